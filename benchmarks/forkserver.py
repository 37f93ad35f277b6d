"""Bundled benchmark runs with jobs forked from the fork server against the same runs starting a fresh interpreter per job.

    python benchmarks/forkserver.py [--tasks perturbation_effect pertreasonqa] [--rounds 2] [-j 2] [--sandbox off]

For each task, runs ``openpert benchmark --task T --input resources_test`` (sandboxed, or not with
``--sandbox off`` as a component test in its image's environment runs its jobs; into a new results
folder each time) with ``$OPENPERT_FORKSERVER=off`` (the reference: every job starts a
fresh interpreter, :mod:`openpert.run.forkserver`) and on, alternating, ``--rounds`` times each.
Prints the wall time of each run, the medians, their ratio (forked / fresh) and the jobs run, and
checks that both ways give every score row the same value (``compare_results.score_rows``; the
rows are keyed by dataset, method and metric). The figures go to
``benchmarks/results/forkserver.json`` (``forkserver_unsandboxed.json``). No target of its own: it says what the fork server saves
on the way to the test suite's and CI's (``time_run.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compare_results import same, score_rows
from figures import write_figures

REPO = Path(__file__).resolve().parents[1]


def run(task: str, out: Path, *, forked: bool, jobs: int, sandbox: str) -> float:
    """Wall seconds of one bundled run of ``task`` into ``out``."""
    env = dict(os.environ, OPENPERT_SANDBOX=sandbox, OPENPERT_FORKSERVER="on" if forked else "off")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "openpert.cli", "benchmark", "--task", task, "--input", "resources_test",
                    "-o", str(out), "-j", str(jobs)], check=True, cwd=REPO, env=env,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["perturbation_effect", "pertreasonqa"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--sandbox", choices=("on", "off"), default="on")
    args = parser.parse_args()
    figures: dict[str, float] = {}
    tmp = Path(tempfile.mkdtemp(prefix="openpert-forkserver-"))
    try:
        for task in args.tasks:
            times: dict[str, list[float]] = {"fresh": [], "forked": []}
            rows: dict[str, dict] = {}
            for i in range(args.rounds):
                for way in (("fresh", "forked") if i % 2 == 0 else ("forked", "fresh")):
                    out = tmp / f"{task}_{way}_{i}"
                    seconds = run(task, out, forked=way == "forked", jobs=args.jobs, sandbox=args.sandbox)
                    times[way].append(seconds)
                    rows.setdefault(way, score_rows(out, task))
                    print(f"{task:22s} {way:7s} round {i + 1}: {seconds:7.1f} s", flush=True)
                    shutil.rmtree(out)
            fresh_rows, forked_rows = rows["fresh"], rows["forked"]
            if fresh_rows.keys() != forked_rows.keys() or not all(same(v, forked_rows[k], 0.0) for k, v in fresh_rows.items()):
                sys.exit(f"{task}: the forked run scored differently from the fresh one")
            fresh, forked = statistics.median(times["fresh"]), statistics.median(times["forked"])
            print(f"{task:22s} median fresh {fresh:.1f} s, forked {forked:.1f} s: ratio {forked / fresh:.2f} "
                  f"({len(rows['fresh'])} score rows, identical)")
            figures[f"{task}_fresh_s"], figures[f"{task}_forked_s"] = fresh, forked
            figures[f"{task}_ratio"] = forked / fresh
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_figures("forkserver" if args.sandbox == "on" else "forkserver_unsandboxed", figures)


if __name__ == "__main__":
    main()
