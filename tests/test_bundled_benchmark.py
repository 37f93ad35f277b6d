"""The benchmark of every task on its bundled resources: its scores must mean what they say.

CI runs README's first command (``scripts/run_benchmark.sh``) and hands its ``results/`` folder to
the suite as ``$OPENPERT_REPORT_RESULTS``; elsewhere these tests skip with that reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from project_paths import ROOT

from openpert.config.task import discover_tasks

pytestmark = pytest.mark.skipif(not os.environ.get("OPENPERT_REPORT_RESULTS"),
                                reason="set OPENPERT_REPORT_RESULTS to the results/ of scripts/run_benchmark.sh")

TASKS = sorted(t.name for t in discover_tasks(ROOT))


def _results(task: str) -> dict:
    path = Path(os.environ["OPENPERT_REPORT_RESULTS"]) / task / "results.json"
    assert path.is_file(), f"{path}: the bundled run wrote no results for {task}"
    return json.loads(path.read_text())


@pytest.mark.parametrize("task", TASKS)
def test_no_headline_metric_is_gameable(task):
    results = _results(task)
    assert results["headline_metrics"], f"{task} declares no headline metric"
    # Every task ships adversarial controls, so the gameability table has rows to judge by.
    assert results["gameability"], f"{task}: no adversarial control scored"
    flagged = sorted((r["dataset_id"], r["metric_id"]) for r in results["gameability"] if r["headline"] and r["gameable"])
    detail = {(r["dataset_id"], r["metric_id"]): (r["adversarial_method_id"], r["gameability"], r["method_median"])
              for r in results["gameability"]}
    assert flagged == [], "\n".join(f"{task} {d}/{m}: {detail[d, m][0]} scores {detail[d, m][1]:.3f} scaled, "
                                    f"above the median method ({detail[d, m][2]:.3f})" for d, m in flagged)


@pytest.mark.parametrize("task", TASKS)
def test_no_job_failed(task):
    # The bundled resources are small and every component's test passes on them: a failure here is a bug.
    failures = [f"{f['job_id']}: {f['reason'][:200]}" for f in _results(task)["failures"]]
    assert failures == [], f"{task}:\n" + "\n".join(failures)
