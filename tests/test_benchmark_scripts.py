"""benchmarks/compare_results.py: two runs' scores matched row by row, nothing changed counted as 0."""

from __future__ import annotations

import json
import subprocess
import sys

from project_paths import ROOT


def write_results(folder, task, rows):
    (folder / task).mkdir(parents=True)
    scores = [{"dataset_id": d, "method_id": m, "metric_id": k, "raw": v} for d, m, k, v in rows]
    (folder / task / "results.json").write_text(json.dumps({"scores": scores}))


def run(*args):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compare_results.py"), *map(str, args)],
                          capture_output=True, text=True, check=True)


def test_compare_results_counts_changed_and_unmatched_rows(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    write_results(before, "t", [("d", "a", "m", 0.5), ("d", "b", "m", None), ("d", "c", "m", 0.1), ("d", "gone", "m", 1.0)])
    write_results(after, "t", [("d", "a", "m", 0.5), ("d", "b", "m", None), ("d", "c", "m", 0.1 + 1e-12)])
    write_results(before, "u", [("d", "a", "m", 0.2)])
    write_results(after, "u", [("d", "a", "m", 0.3)])
    out = tmp_path / "figures.json"
    proc = run(before, after, "--json", out)
    figures = json.loads(out.read_text())
    # NaN equals NaN; 1e-12 is a change (bit for bit by default); a row of one run only is unmatched.
    assert figures["figures"] == {"rows": 4, "changed_rows": 2, "unmatched_rows": 1, "max_abs_change": 0.09999999999999998}
    assert "u d a m: 0.2 -> 0.3" in proc.stdout
    run(before, after, "--json", out, "--exclude", "u", "--tolerance", "1e-9")
    figures = json.loads(out.read_text())
    assert figures["figures"]["changed_rows"] == 0 and figures["excluded"] == ["u"] and list(figures["per_task"]) == ["t"]
