"""Wall time of a whole run (a benchmark, the test suite), kept as a figure for ``summary.py``.

    python benchmarks/time_run.py NAME -- COMMAND [ARGS ...]

runs the command as it is (its output passes through), and writes its wall time and exit code to
``benchmarks/results/run_<NAME>.json``. A run that fails keeps its time but is marked failed, and
``summary.py`` does not count it as a figure. The names ``summary.py`` sets against a target:

==========================  =================================================================
``run_benchmark_cold``      ``bash scripts/run_benchmark.sh`` after clearing its results and
                            the text-embedding cache (``rm -rf results .cache/embeddings``),
                            as on a fresh clone: target <= 3 min
``full_op3``                ``openpert benchmark --task perturbation_prediction -o DIR``, the
                            full-size OP3 run: target <= 10 min
``run_benchmark_with_llm_cold``
                            ``bash scripts/run_benchmark_with_llm.sh`` the same way: the
                            bundled run with a real small model (docs/llm.md): target <=
                            ``run_benchmark_cold`` + 5 min
``perturbqa_real_before``   the real PerturbQA benchmark (``openpert benchmark --task
                            perturbqa``, every dataset, every non-LLM method, cold cache) on
                            the code before a change: the reference
``perturbqa_real``          the same after: target <= half of the reference
``all_tasks_real_before``   the real-data run of all five tasks (``openpert benchmark --task
                            all -j 2 -o DIR``, every non-LLM component, store filled) on the
                            code before a change: the reference
``all_tasks_real``          the same after: target <= the reference (``longest_jobs.py DIR
                            --before DIR`` says which jobs the time went to)
``test_suite``              ``bash scripts/test.sh``: target <= 6 min
``ci``                      ``bash .ci/run`` on a fresh clone (``CI=true``, empty generation
                            cache): target <= 12 min
==========================  =================================================================

The targets hold on an idle 2-core machine; the load average at the start and the end is kept
with the figure.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

from figures import write_figures


def main() -> int:
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: python benchmarks/time_run.py NAME -- COMMAND [ARGS ...]")
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the figure's name (letters, digits, _ and -)")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not command:
        sys.exit("time_run: no command after --")
    if not re.fullmatch(r"[A-Za-z0-9_-]+", args.name):
        sys.exit(f"time_run: {args.name!r} is not a usable name (letters, digits, _ and -)")
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    code = subprocess.call(command)
    seconds = time.perf_counter() - start
    dest = write_figures(f"run_{args.name}", {"seconds": seconds, "exit_code": code}, command=command,
                         load_average_at_start=load_before, succeeded=code == 0)
    print(f"time_run: {args.name}: {seconds:.1f} s, exit code {code} -> {dest}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
