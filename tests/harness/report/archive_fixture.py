"""An archive of earlier runs of the website fixture's task, for the What changed and History sections.

The earlier runs lack ``gat`` (added since), and ``mlp`` scored lower in them (its code changed since:
another component digest), so the later run moves mlp up past big_llm.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from report_fixture import build_results

from openpert.results.archive import add_record

#: How much lower mlp's overall score was in each earlier run, oldest first.
EARLIER_MLP_DROPS = (0.5, 0.4)


def earlier_run(data: dict[str, Any], drop: float, day: int) -> dict[str, Any]:
    """The fixture's results as an earlier run: no ``gat``, ``mlp`` lower by ``drop``, its own time and commit."""
    old = copy.deepcopy(data)
    for key in ("methods",):
        old[key] = [m for m in old[key] if m.get("id") != "gat"]
    for key in ("scores", "dataset_scores", "overall", "comparisons", "failures", "resources"):
        old[key] = [r for r in old.get(key, []) if r.get("method_id") != "gat"]
    for row in old["scores"]:
        if row["method_id"] == "mlp" and row.get("raw") is not None:
            row["raw"] -= drop / 2
    for row in old["dataset_scores"] + old["overall"]:
        if row["method_id"] == "mlp" and row.get("score") is not None:
            row["score"] = max(row["score"] - drop, 0.0)
    ranked = sorted((r for r in old["overall"] if r.get("rank") is not None), key=lambda r: -r["score"])
    for i, row in enumerate(ranked, 1):
        row["rank"] = i
    old["created"] = f"2026-11-{day:02d}T08:30:00+00:00"
    old["provenance"]["commit"] = f"{day:02d}" * 20
    old["provenance"]["dirty"] = False
    old["provenance"]["component_digests"]["mlp"] = f"sha256:{'e' * 62}{day:02d}"
    old["provenance"]["component_digests"].pop("gat", None)
    return old


def write_archive(base: Path) -> Path:
    """Archive two earlier runs of the fixture's default task under ``base/archive``; return that folder."""
    archive = base / "archive"
    for i, drop in enumerate(EARLIER_MLP_DROPS):
        folder = base / f"earlier-{i}" / "perturbqa"
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(earlier_run(build_results(), drop, 10 + i)))
        add_record(folder, archive)
    return archive
