"""Every figure of ``benchmarks/`` beside its target, in one table: how far each is from its goal.

    python benchmarks/summary.py [--results benchmarks/results]

Reads the JSON files the benchmark scripts of this folder write into ``benchmarks/results/``
(``wilcoxon.py``, ``harness_overhead.py``, ``profile_run.py``, ``lsft.py``, ``limma_vs_r.py``,
``reference_paths.py``, ``statistics_speed.py``, ``llm_client.py``, ``time_run.py`` for whole runs, ``longest_jobs.py`` for
their jobs and ``compare_results.py`` for their scores). A figure
with a target is shown with it and with its margin: positive when the goal is met (by how much),
negative when it is missed. A figure whose script has not run here is shown as not measured; no
number is ever filled in. Figures without a target follow, with when and under what load each
was measured (the machine's load changes timings by a factor of several).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

from figures import RESULTS


@dataclasses.dataclass(frozen=True)
class Target:
    """A figure and its goal: ``figure <op> bound``, the bound a number or another figure times a factor plus an offset."""

    label: str
    source: str  # results file stem
    figure: str
    op: str  # "<=", "<" or ">="
    bound: float | None = None
    bound_source: str | None = None  # the bound is another measured figure ...
    bound_figure: str | None = None
    factor: float = 1.0  # ... times this factor
    offset: float = 0.0  # ... plus this
    unit: str = ""


TARGETS = [
    Target("Wilcoxon: speed-up over scanpy", "wilcoxon", "speedup_vs_scanpy", ">=", 100.0, unit="x"),
    Target("Wilcoxon: time / illico's", "wilcoxon", "time_vs_illico", "<=", 0.5, unit="x"),
    Target("Wilcoxon, 2 threads: / illico@2", "wilcoxon", "time_vs_illico_2_threads", "<=", 0.5, unit="x"),
    Target("Wilcoxon: memory above data", "wilcoxon", "openpert_above_data_mb", "<=",
           bound_source="wilcoxon", bound_figure="illico_above_data_mb", unit="MB"),
    Target("Wilcoxon: p-value vs scipy (rel)", "wilcoxon", "openpert_max_rel_dp_vs_scipy", "<=", 1e-9),
    Target("Harness overhead per job", "harness_overhead", "harness_overhead_s", "<=", 0.3, unit="s"),
    Target("Sandbox overhead per job", "harness_overhead", "sandbox_overhead_s", "<", 0.1, unit="s"),
    Target("LSFT, training PCA, batched", "lsft", "batched_pca_s", "<", 60.0, unit="s"),
    Target("LSFT, fixed embedding, batched", "lsft", "batched_fixed_embedding_s", "<", 60.0, unit="s"),
    Target("Full-size OP3 run", "run_full_op3", "seconds", "<=", 600.0, unit="s"),
    Target("run_benchmark.sh, cold cache", "run_run_benchmark_cold", "seconds", "<=", 180.0, unit="s"),
    # The real model's cost in CI: the bundled run with it (scripts/run_benchmark_with_llm.sh, the
    # server's start included) against the same run without it, on the same machine.
    Target("run_benchmark_with_llm.sh, cold", "run_run_benchmark_with_llm_cold", "seconds", "<=",
           bound_source="run_run_benchmark_cold", bound_figure="seconds", offset=300.0, unit="s"),
    Target("PerturbQA real benchmark", "run_perturbqa_real", "seconds", "<=",
           bound_source="run_perturbqa_real_before", bound_figure="seconds", factor=0.5, unit="s"),
    # The real-data run of all five tasks (openpert benchmark --task all -j 2, no model) on the code
    # before and after a change to the plan or the harness; longest_jobs.py says where it went.
    Target("Real data, all five tasks, -j 2", "run_all_tasks_real", "seconds", "<=",
           bound_source="run_all_tasks_real_before", bound_figure="seconds", unit="s"),
    Target("Test suite", "run_test_suite", "seconds", "<=", 360.0, unit="s"),
    Target("CI (.ci/run), fresh clone", "run_ci", "seconds", "<=", 720.0, unit="s"),
    Target("Score rows changed by a speed-up", "compare_results", "changed_rows", "<=", 0.0),
    Target("LLM client req/s / openai AsyncOpenAI", "llm_client", "ratio", ">=", 1.0, unit="x"),
]


def load_results(folder: Path) -> dict[str, dict]:
    """Results file stem -> its content; a file that cannot be read is an error naming it."""
    out = {}
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise SystemExit(f"{path}: not a readable figures file ({err})") from None
        if not isinstance(data, dict) or not isinstance(data.get("figures"), dict):
            raise SystemExit(f"{path}: no 'figures' mapping; rerun the benchmark that writes it")
        out[path.stem] = data
    return out


def measured(results: dict[str, dict], source: str, figure: str) -> float | None:
    """The figure, or None when it was not measured (no file, no such figure, a failed run, NaN)."""
    data = results.get(source)
    if data is None or data.get("succeeded") is False:
        return None
    value = data["figures"].get(figure)
    if not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def judge(target: Target, results: dict[str, dict]) -> tuple[float | None, float | None, str]:
    """``(value, bound, verdict)``; the verdict names the margin or why there is none."""
    value = measured(results, target.source, target.figure)
    if target.bound is not None:
        bound: float | None = target.bound
    else:
        reference = measured(results, target.bound_source or "", target.bound_figure or "")
        bound = None if reference is None else reference * target.factor + target.offset
    if value is None:
        failed = results.get(target.source, {}).get("succeeded") is False
        return None, bound, "run failed" if failed else "not measured"
    if bound is None:
        return value, None, "reference not measured"
    if target.op == ">=":
        met, margin = value >= bound, (value - bound) / abs(bound) if bound else math.inf
    else:
        met = value < bound if target.op == "<" else value <= bound
        margin = (bound - value) / abs(bound) if bound else (0.0 if value == 0 else -math.inf)
    return value, bound, f"{'met' if met else 'MISSED'} ({margin:+.0%})"


def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:.2e}" if value != 0 and (abs(value) < 1e-2 or abs(value) >= 1e5) else f"{value:.3g}"
    return f"{text} {unit}".strip()


def when(results: dict[str, dict], source: str) -> str:
    data = results.get(source)
    if data is None:
        return ""
    load = data.get("load_average")
    return f"{data.get('measured_at', '?')}, load {load:.1f}" if isinstance(load, (int, float)) else data.get("measured_at", "?")


def format_summary(results: dict[str, dict]) -> str:
    """The table of targets, then every other figure measured."""
    lines = [f"{'figure':34s} {'measured':>12s} {'target':>16s}  {'verdict':22s} measured at"]
    lines.append("-" * 100)
    used: set[tuple[str, str]] = set()
    for target in TARGETS:
        value, bound, verdict = judge(target, results)
        used.add((target.source, target.figure))
        goal = f"{target.op} {number(bound, target.unit)}" if bound is not None else f"{target.op} (unmeasured)"
        lines.append(f"{target.label:34s} {number(value, target.unit):>12s} {goal:>16s}  {verdict:22s} "
                     f"{when(results, target.source)}")
    others = [(source, name, value) for source, data in sorted(results.items())
              for name, value in data["figures"].items() if (source, name) not in used]
    if others:
        width = max(len(f"{source}: {name}") for source, name, _ in others)
        lines += ["", f"{'other figures (no target)':{width}s} {'value':>12s}  measured at", "-" * (width + 45)]
        for source, name, value in others:
            lines.append(f"{source + ': ' + name:{width}s} {number(value):>12s}  {when(results, source)}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=str(RESULTS), help="folder of the benchmarks' JSON files")
    args = parser.parse_args()
    folder = Path(args.results)
    results = load_results(folder) if folder.is_dir() else {}
    if not results:
        print(f"no figures in {folder}: every figure below is not measured", file=sys.stderr)
    print(format_summary(results))


if __name__ == "__main__":
    main()
