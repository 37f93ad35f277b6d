"""What ``scripts/setup_env.sh``'s probe of PyTorch's CPU index adds to a set-up, on this machine.

Set-up asks once, before installing torch, whether the CPU index answers. The probe is the shell
function ``_openpert_reachable`` of the script, run here exactly as written there, against the real
index address (or ``--url``), N times; the reference is the same interpreter starting and exiting
(``python -c pass``), interleaved in the same process. Prints the medians, the probe's own cost (the
difference) and the ratio, and whether the index answered. Target: well under a second where the
index cannot be reached (set-up itself takes minutes).

    python benchmarks/torch_index_probe.py [--n 15] [--url URL]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from figures import write_figures  # noqa: E402

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def probe_function() -> str:
    """The probe's shell function, as ``scripts/setup_env.sh`` defines it."""
    text = (REPO / "scripts" / "setup_env.sh").read_text()
    match = re.search(r"^_openpert_reachable\(\) \{\n.*?^\}\n", text, re.M | re.S)
    if match is None:
        raise SystemExit("scripts/setup_env.sh: no _openpert_reachable function to measure")
    return match.group(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=15)
    parser.add_argument("--url", default=f"{CPU_INDEX}/torch/")
    args = parser.parse_args()
    probe = ["bash", "-c", probe_function() + '_openpert_reachable "$0" "$1"', sys.executable, args.url]
    reference = [sys.executable, "-c", "pass"]
    times: dict[str, list[float]] = {"probe": [], "reference": []}
    answered = None
    for _ in range(args.n):
        for kind, command in (("probe", probe), ("reference", reference)):
            start = time.perf_counter()
            code = subprocess.run(command, capture_output=True).returncode
            times[kind].append(time.perf_counter() - start)
            if kind == "probe":
                answered = code == 0
    probe_s, reference_s = statistics.median(times["probe"]), statistics.median(times["reference"])
    print(f"index {args.url}: {'answers' if answered else 'not reachable'}")
    print(f"probe {probe_s:.3f} s (median of {args.n}); python start-up {reference_s:.3f} s; "
          f"probe's own cost {probe_s - reference_s:.3f} s; ratio {probe_s / reference_s:.2f}x")
    path = write_figures("torch_index_probe", {"probe_s": probe_s, "python_startup_s": reference_s,
                                               "probe_over_startup_s": probe_s - reference_s},
                         url=args.url, reachable=answered, n=args.n)
    print(f"figures: {path}")


if __name__ == "__main__":
    main()
