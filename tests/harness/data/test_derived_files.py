"""Every derived file the tasks' manifests declare is what its derivation makes of its public originals.

A file of ``../shared/data`` that was derived (rows kept, an ``.rda`` table converted, a zip member)
is made again from its pinned originals by the function its manifest names, run as the store runs
it (:func:`openpert.data.fetching.run_derivation`), and compared with the manifest's checksum and
the shared copy. The originals come from GitHub and Dataverse, which this project's CI does not
reach: each case runs where the data store holds them (``openpert data fetch`` on a machine with
network, or ``$OPENPERT_DATA`` pointing at such a store) and says so when it skips.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from openpert.config.project import shared_data_dir
from openpert.config.task import discover_tasks
from openpert.data.fetching import run_derivation
from openpert.data.manifest import merge_manifests, task_manifest
from openpert.data.store import default_store_dir
from openpert.files import hash_file

ROOT = Path(__file__).resolve().parents[3]
DERIVED = [f for f in merge_manifests(task_manifest(t.dir) for t in discover_tasks(ROOT)) if f.derive is not None]


def test_the_manifests_declare_derived_files():
    assert {"knowledge_graphs/dorothea_hs_ABC.tsv", "biome_bench/task_b_hsa_mmu.jsonl",
            "basal_expression/singlecell_baseline_K562_Gasperini.tsv"} <= {f.path for f in DERIVED}


@pytest.mark.parametrize("entry", DERIVED, ids=lambda f: f.path)
def test_a_derivation_of_the_real_originals_gives_the_declared_file(entry, tmp_path):
    store = default_store_dir()
    sources = {name: store / original.path for name, original in entry.derive.sources}
    missing = [str(p) for p in sources.values() if not p.is_file()]
    if missing:
        pytest.skip(f"originals not in the data store: {', '.join(missing)} (`openpert data fetch` where their origins are reachable)")
    for name, original in entry.derive.sources:
        if original.pinned:
            assert hash_file(sources[name]) == original.sha256, f"{sources[name]}: not the pinned original"
    out = tmp_path / Path(entry.path).name
    run_derivation(entry, sources, out)
    if entry.pinned:
        assert (hash_file(out), out.stat().st_size) == (entry.sha256, entry.size)
    shared = shared_data_dir(ROOT) / entry.path
    if shared.is_file():
        assert out.read_bytes() == shared.read_bytes()
