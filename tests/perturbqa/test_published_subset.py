"""perturbqa_lib.published_subset: the subset of the published files is the test resources' raw folder."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from perturbqa_lib.published_subset import subsample_published
from project_paths import SHARED_DATA

RAW = Path(__file__).resolve().parents[2] / "resources_test" / "perturbqa" / "raw"


@pytest.mark.skipif(not (SHARED_DATA / "perturbqa").is_dir(), reason="the shared PerturbQA data is not present")
def test_subset_reproduces_the_test_resources(tmp_path):
    universe = subsample_published(SHARED_DATA / "perturbqa", SHARED_DATA / "knowledge_graphs", tmp_path, seed=0)
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert written == sorted(p.relative_to(RAW) for p in RAW.glob("*/*") if p.is_file())
    for rel in written:
        read = gzip.open if rel.suffix == ".gz" else open
        with read(tmp_path / rel, "rb") as new, read(RAW / rel, "rb") as old:
            assert new.read() == old.read(), f"{rel} differs from the committed test resource"
    # 72 perturbations drawn, 71 with pairs among the 60 downstream genes; 4 annotated clusters plus an
    # unannotated one per gse file.
    de = (tmp_path / "perturbqa" / "k562-de.csv").read_text().splitlines()[1:]
    assert len({row.split(",")[0] for row in de}) == 71 and len({row.split(",")[1] for row in de}) == 60
    clusters = json.loads((tmp_path / "perturbqa" / "k562_gene-gse.json").read_text())
    assert [bool(c["label"]) for c in clusters] == [True] * 4 + [False]
    assert all(len(c["genes"]) <= 5 and set(c["genes"]) <= set(universe) for c in clusters)
