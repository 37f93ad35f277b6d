"""Run a component's script with a clock on its phases: imports, reading, compute, writing.

Used by ``benchmarks/profile_run.py``, which starts a job's process as
``python benchmarks/job_probe.py <report.json> <script.py>`` in place of ``python <script.py>``.
The script runs as ``__main__`` exactly as it would alone (same ``sys.argv[0]`` and
``sys.path[0]``); the probe only wraps functions:

* every module import (``importlib._bootstrap._find_and_load``, which both the ``import``
  statement and ``importlib.import_module`` go through for a module not yet loaded): imports;
* the readers and writers of the file formats the components use (anndata, pandas, numpy, json,
  pickle, pathlib, scipy.sparse, pyarrow, torch), wrapped once their module is imported:
  reading and writing;
* everything else the script does: compute.

Time is charged to the innermost phase only (an import made lazily inside ``read_h5ad`` counts
as import, not reading), so the phases add up to the script's wall time. The report (JSON) holds
the wall-clock time (``time.time()``) when the probe started and when the script ended, so the
caller can tell interpreter start-up and exit apart from the script itself.
"""

from __future__ import annotations

import time

PROBE_STARTED = time.time()

import json  # noqa: E402
import runpy  # noqa: E402
import sys  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

#: module -> (phase, attribute paths) wrapped when the module has been imported.
IO_FUNCTIONS: dict[str, list[tuple[str, str]]] = {
    "anndata": [("reading", "read_h5ad"), ("reading", "read_zarr"), ("writing", "AnnData.write_h5ad"),
                ("writing", "AnnData.write"), ("writing", "AnnData.write_zarr")],
    "anndata.io": [("reading", "read_h5ad"), ("reading", "read_zarr")],
    "pandas": [("reading", f"read_{kind}") for kind in ("csv", "table", "parquet", "json", "pickle", "feather", "excel", "hdf")]
    + [("writing", f"{cls}.to_{kind}") for cls in ("DataFrame", "Series") for kind in ("csv", "parquet", "json", "pickle", "feather")
       if not (cls == "Series" and kind in ("parquet", "feather"))],
    "numpy": [("reading", name) for name in ("load", "loadtxt", "genfromtxt", "fromfile")]
    + [("writing", name) for name in ("save", "savez", "savez_compressed", "savetxt")],
    "scipy.sparse": [("reading", "load_npz"), ("writing", "save_npz")],
    "pyarrow.parquet": [("reading", "read_table"), ("writing", "write_table")],
    "torch": [("reading", "load"), ("writing", "save")],
    "pickle": [("reading", "load"), ("writing", "dump")],
    "json": [("reading", "load"), ("writing", "dump")],
    "yaml": [("reading", "safe_load"), ("writing", "safe_dump")],
}
PATHLIB_FUNCTIONS = [("reading", "Path.read_text"), ("reading", "Path.read_bytes"),
                     ("writing", "Path.write_text"), ("writing", "Path.write_bytes")]


class PhaseClock:
    """Exclusive time per phase: the phase on top of the stack is charged; ``compute`` at the bottom.

    Wall time (``totals``) and the process's CPU time (``cpu_totals``, all threads): on a loaded
    machine the second says what the job itself cost.
    """

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.cpu_totals: dict[str, float] = defaultdict(float)
        self.stack: list[str] = ["compute"]
        self.restart()

    def restart(self) -> None:
        self.last, self.cpu_last = time.perf_counter(), time.process_time()

    def _charge(self) -> None:
        now, cpu_now = time.perf_counter(), time.process_time()
        self.totals[self.stack[-1]] += now - self.last
        self.cpu_totals[self.stack[-1]] += cpu_now - self.cpu_last
        self.last, self.cpu_last = now, cpu_now

    def enter(self, phase: str) -> None:
        self._charge()
        self.stack.append(phase)

    def leave(self) -> None:
        self._charge()
        self.stack.pop()


CLOCK = PhaseClock()


def timed(phase: str, func):
    """``func`` charging its time to ``phase``."""

    def wrapper(*args, **kwargs):
        CLOCK.enter(phase)
        try:
            return func(*args, **kwargs)
        finally:
            CLOCK.leave()

    wrapper.__wrapped__ = func
    wrapper.__name__ = getattr(func, "__name__", "wrapped")
    wrapper.__doc__ = getattr(func, "__doc__", None)
    return wrapper


def wrap_attributes(module, entries: list[tuple[str, str]]) -> None:
    """Wrap ``module.<path>`` for each ``(phase, path)``; paths that do not exist are left alone."""
    for phase, path in entries:
        owner = module
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent, None)
        func = getattr(owner, name, None) if owner is not None else None
        if func is None or getattr(func, "_probe", False):
            continue
        wrapped = timed(phase, func)
        wrapped._probe = True
        setattr(owner, name, wrapped)


def install() -> None:
    """Wrap the import machinery, the readers and writers already imported, and those imported later."""
    import importlib._bootstrap as bootstrap

    wrapped_modules: set[str] = set()

    def wrap_module(name: str) -> None:
        module = sys.modules.get(name)
        if name in IO_FUNCTIONS and name not in wrapped_modules and module is not None:
            wrapped_modules.add(name)
            wrap_attributes(module, IO_FUNCTIONS[name])

    original = bootstrap._find_and_load

    def find_and_load(name, import_):
        CLOCK.enter("imports")
        try:
            module = original(name, import_)
        finally:
            CLOCK.leave()
        wrap_module(name)
        return module

    bootstrap._find_and_load = find_and_load
    wrap_attributes(sys.modules["pathlib"], PATHLIB_FUNCTIONS)
    for name in list(IO_FUNCTIONS):
        wrap_module(name)


def main() -> None:
    report, script = Path(sys.argv[1]), sys.argv[2]
    sys.argv = [script, *sys.argv[3:]]
    # As ``python script.py`` does: the script's folder first on the path, not this file's.
    sys.path[0] = str(Path(script).resolve().parent)
    install()
    CLOCK.restart()
    exit_code: int | str | None = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        exit_code = stop.code
        raise
    except BaseException:
        exit_code = 1
        raise
    finally:
        CLOCK._charge()
        report.write_text(json.dumps({"probe_started": PROBE_STARTED, "script_ended": time.time(),
                                      "phases": dict(CLOCK.totals), "cpu_phases": dict(CLOCK.cpu_totals),
                                      "exit_code": exit_code}))


if __name__ == "__main__":
    main()
