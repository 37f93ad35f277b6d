"""Whether each task's test resources come out the same under every BLAS kernel, thread count and sandbox setting.

Run with the project's environment: ``python benchmarks/kernel_invariance.py [task ...] [--quick]``
(default: every task with a generator, ``scripts/create_test_resources/<task>.sh``). For each task
and each variant of the environment, the generator runs into a temporary folder and its files are
compared with the committed ``resources_test/<task>/`` by
:func:`tooling.reproducible_resources.check_task` (in ``tests/``: the comparison the tests use).

Variants (the full matrix):

- ``OPENBLAS_CORETYPE``: unset (OpenBLAS picks the kernel for the CPU), ``Haswell``, ``SkylakeX``,
  ``Sandybridge``. A kernel whose instructions the CPU lacks (``/proc/cpuinfo`` flags) is skipped,
  never run: OpenBLAS would die of an illegal instruction.
- threads: 1 and 2 (``OMP_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS``): a threaded BLAS splits
  sums differently.
- ``OPENPERT_SANDBOX``: ``off`` and ``on``; ``on`` is skipped, with the reason, where bubblewrap
  cannot run. The sandbox passes the thread counts into a job but not ``OPENBLAS_CORETYPE``
  (:mod:`openpert.run.sandbox` scrubs the environment): there the kernel applies to the
  generator's own Python steps only, and the table says so.

``--numpy-baseline`` adds one variant (default kernel, 1 thread, sandbox off) with NumPy's own
vectorised loops held to its baseline (``NPY_DISABLE_CPU_FEATURES`` naming every dispatched feature
this CPU has): NumPy picks its sorts and some ufuncs by the CPU, not by OpenBLAS, and a machine with
another vector width (AVX-512 against AVX2) orders equal values differently. The sandbox scrubs that
variable, so the variant runs unsandboxed.

``--quick`` runs the small set CI can afford: {unset, Sandybridge} x {1, 2 threads}, with the
sandbox as ``$OPENPERT_SANDBOX`` says. The kernel each variant really loads is read back with
threadpoolctl (a ``Sandybridge`` that OpenBLAS ignored would otherwise pass unnoticed).

Printed per task and variant: identical, differs (the first difference and how many files
differ), failed (the generator's error) or skipped (why), and the seconds the regeneration took.
The exit status is 1 when any variant differs or fails. Not a test: it takes minutes per task;
``tests/test_kernel_invariance.py`` runs its core for one cheap task.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from tooling import reproducible_resources as rr  # noqa: E402

from openpert.run import sandbox  # noqa: E402

#: The kernels tried; ``None`` leaves ``OPENBLAS_CORETYPE`` unset.
CORETYPES: tuple[str | None, ...] = (None, "Haswell", "SkylakeX", "Sandybridge")
QUICK_CORETYPES: tuple[str | None, ...] = (None, "Sandybridge")
THREADS = (1, 2)
SANDBOX_SETTINGS = ("off", "on")
#: The /proc/cpuinfo flags each OpenBLAS kernel executes (its widest vector instructions).
KERNEL_FLAGS = {"Haswell": ("avx2", "fma"), "SkylakeX": ("avx512f",), "Sandybridge": ("avx",)}
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: NumPy's switch of its own CPU dispatch (its sorts and vectorised ufuncs).
NUMPY_DISABLE = "NPY_DISABLE_CPU_FEATURES"


@dataclasses.dataclass(frozen=True)
class Variant:
    """One environment a generator runs in."""

    coretype: str | None
    threads: int
    sandbox: str | None  # "off", "on", or None: as $OPENPERT_SANDBOX says
    numpy_disabled: str | None = None  # NPY_DISABLE_CPU_FEATURES: NumPy's dispatched features to leave unused

    def env(self) -> dict[str, str | None]:
        """The variables to set (a string) or unset (``None``) for the generator."""
        env: dict[str, str | None] = {"OPENBLAS_CORETYPE": self.coretype, NUMPY_DISABLE: self.numpy_disabled}
        env.update({name: str(self.threads) for name in THREAD_VARIABLES})
        if self.sandbox is not None:
            env[sandbox.ENV_SANDBOX] = self.sandbox
        return env

    def label(self) -> str:
        box = self.sandbox or f"env ({os.environ.get(sandbox.ENV_SANDBOX) or 'auto'})"
        simd = f" numpy w/o {self.numpy_disabled}" if self.numpy_disabled else ""
        return f"{self.coretype or 'unset':<11} {self.threads} thr  sandbox {box}{simd}"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one regeneration gave."""

    task: str
    variant: Variant
    status: str  # identical, differs, failed, skipped
    detail: str = ""
    seconds: float | None = None
    kernel: str = ""  # the OpenBLAS kernel the variant loads, read back


def variants(quick: bool = False, sandbox_setting: str | None = None) -> list[Variant]:
    """The matrix (``quick``: the CI set, the sandbox as the environment says or as ``sandbox_setting``)."""
    if quick:
        return [Variant(c, t, sandbox_setting) for c, t in itertools.product(QUICK_CORETYPES, THREADS)]
    boxes = (sandbox_setting,) if sandbox_setting is not None else SANDBOX_SETTINGS
    return [Variant(c, t, s) for c, t, s in itertools.product(CORETYPES, THREADS, boxes)]


def numpy_dispatched_features() -> str:
    """The features above its baseline that NumPy dispatches to on this CPU, space-separated ("" when none)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return " ".join(f for f in __cpu_dispatch__ if __cpu_features__.get(f))


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The instruction-set flags of the first CPU in ``cpuinfo`` (empty where it cannot be read)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def skip_reason(variant: Variant, flags: frozenset[str], sandbox_problem: str | None) -> str | None:
    """Why ``variant`` cannot run here (``None`` when it can).

    Parameters
    ----------
    variant
        The variant.
    flags
        The CPU's flags (:func:`cpu_flags`).
    sandbox_problem
        Why bubblewrap cannot run here (:func:`openpert.run.sandbox.unavailable_reason`), or ``None``.
    """
    if variant.coretype is not None:
        if variant.coretype not in KERNEL_FLAGS:
            return f"unknown kernel {variant.coretype!r} (known: {', '.join(KERNEL_FLAGS)})"
        missing = [f for f in KERNEL_FLAGS[variant.coretype] if f not in flags]
        if missing:
            return f"the CPU lacks {', '.join(missing)} (/proc/cpuinfo), which {variant.coretype} executes"
    wants_box = variant.sandbox == "on" or (variant.sandbox is None and os.environ.get(sandbox.ENV_SANDBOX, "").lower() == "on")
    if wants_box and sandbox_problem is not None:
        return f"sandbox on, but {sandbox_problem}"
    return None


@functools.cache
def loaded_kernel(coretype: str | None, threads: int) -> str:
    """The OpenBLAS kernel and thread count NumPy loads under ``coretype`` and ``threads`` (a new process)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    if coretype is not None:
        env["OPENBLAS_CORETYPE"] = coretype
    env.update({name: str(threads) for name in THREAD_VARIABLES})
    probe = ("import numpy, threadpoolctl\n"
             "i = [x for x in threadpoolctl.threadpool_info() if x['internal_api'] == 'openblas']\n"
             "print(f\"{i[0]['architecture']}/{i[0]['num_threads']}\" if i else 'no OpenBLAS')")
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return f"probe failed (exit {done.returncode})"
    return done.stdout.strip()


def run_variant(root: Path, task: str, variant: Variant, flags: frozenset[str], sandbox_problem: str | None,
                check: Callable[..., list[rr.Difference]] = rr.check_task) -> Outcome:
    """Regenerate ``task`` under ``variant`` into a temporary folder and compare it with the committed files.

    Parameters
    ----------
    root
        The project root.
    task
        The task's name.
    variant
        The environment to run the generator in.
    flags, sandbox_problem
        What this machine can run (see :func:`skip_reason`).
    check
        The regenerate-and-compare function (:func:`tooling.reproducible_resources.check_task`, in ``tests/``).

    Returns
    -------
    Outcome
        ``skipped`` with the reason, ``failed`` with the error's last line, ``differs`` with the
        first difference, or ``identical``; with the seconds the regeneration took.
    """
    reason = skip_reason(variant, flags, sandbox_problem)
    if reason is not None:
        return Outcome(task, variant, "skipped", reason)
    kernel = loaded_kernel(variant.coretype, variant.threads)
    if variant.coretype is not None and not kernel.lower().startswith(variant.coretype.lower()):
        return Outcome(task, variant, "failed", f"OPENBLAS_CORETYPE={variant.coretype} but OpenBLAS loaded {kernel}", kernel=kernel)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"openpert-kernel-{task}-") as work:
        try:
            differences = check(root, task, Path(work), env=variant.env())
        except (RuntimeError, subprocess.TimeoutExpired) as err:
            last = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
            return Outcome(task, variant, "failed", last, time.perf_counter() - start, kernel)
    seconds = time.perf_counter() - start
    if differences:
        more = f" (+{len(differences) - 1} more files)" if len(differences) > 1 else ""
        return Outcome(task, variant, "differs", f"{differences[0]}{more}", seconds, kernel)
    return Outcome(task, variant, "identical", "", seconds, kernel)


def _note(outcome: Outcome) -> str:
    variant = outcome.variant
    if outcome.status == "skipped":
        return ""
    box_on = variant.sandbox == "on" or (variant.sandbox is None and os.environ.get(sandbox.ENV_SANDBOX, "").lower() in ("on", "auto", ""))
    return " [kernel outside the jobs only]" if variant.coretype is not None and box_on else ""


def format_row(outcome: Outcome) -> str:
    """One line of the table."""
    seconds = f"{outcome.seconds:7.1f}" if outcome.seconds is not None else "      -"
    detail = f": {outcome.detail}" if outcome.detail else ""
    kernel = f"{outcome.kernel:<16}" if outcome.kernel else f"{'-':<16}"
    return f"{outcome.task:<24} {outcome.variant.label():<34} {kernel} {seconds}  {outcome.status}{_note(outcome)}{detail}"


def run_matrix(root: Path, tasks: Sequence[str], matrix: Iterable[Variant], out: Callable[[str], None] = print,
               check: Callable[..., list[rr.Difference]] = rr.check_task) -> list[Outcome]:
    """Run every task under every variant, printing each row as it comes; the outcomes."""
    flags = cpu_flags()
    problem = sandbox.unavailable_reason() if any(v.sandbox != "off" for v in matrix) else None
    matrix = list(matrix)
    out(f"{'task':<24} {'variant':<34} {'loaded kernel':<16} {'seconds':>7}  result")
    outcomes = []
    for task in tasks:
        for variant in matrix:
            outcome = run_variant(root, task, variant, flags, problem, check=check)
            out(format_row(outcome))
            outcomes.append(outcome)
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run the matrix, print the table; 1 when any variant differs or fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="*", help="tasks (default: every task with a generator)")
    parser.add_argument("--quick", action="store_true", help="the CI set: {unset, Sandybridge} x {1, 2 threads}, sandbox as the environment says")
    parser.add_argument("--sandbox", choices=SANDBOX_SETTINGS, help="only this sandbox setting")
    parser.add_argument("--numpy-baseline", action="store_true",
                        help="also run once with NumPy's vectorised loops held to its baseline (NPY_DISABLE_CPU_FEATURES)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the project root (default: this checkout)")
    ns = parser.parse_args(argv)
    tasks = ns.tasks or rr.generator_tasks(ns.root)
    unknown = sorted(set(tasks) - set(rr.generator_tasks(ns.root)))
    if unknown:
        parser.error(f"no generator in {ns.root / rr.SCRIPTS_DIR} for: {', '.join(unknown)}")
    matrix = variants(ns.quick, ns.sandbox)
    if ns.numpy_baseline:
        features = numpy_dispatched_features()
        if features:
            matrix.append(Variant(None, 1, "off", numpy_disabled=features))
        else:
            print("--numpy-baseline: NumPy dispatches to nothing above its baseline on this CPU; no variant added")
    outcomes = run_matrix(ns.root, tasks, matrix)
    bad = [o for o in outcomes if o.status in ("differs", "failed")]
    ran = sum(o.status != "skipped" for o in outcomes)
    print(f"{ran} regenerations, {len(bad)} differ or fail, {len(outcomes) - ran} skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
