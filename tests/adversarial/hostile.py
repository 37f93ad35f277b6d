"""Helpers of the adversarial suite: a private fixture project, hostile components, clean scores.

Every test of ``tests/adversarial`` adds hostile components to a private copy of the fixture
project (``tests/fixtures/project``, task ``tiny``) and runs the benchmark with them next to the
honest components. Two things are checked each time:

(a) the attack fails: the hostile component fails, or scores worse than the positive control, or
    is left out as a configuration error;
(b) the rest of the benchmark is unchanged: the raw scores (metric ``errors``) of the honest
    components ``truth``, ``zeros``, ``train_mean`` and ``group_mean`` equal those of a clean run.

A hostile method is written from a template: :func:`add_method` makes ``methods/<name>/`` with a
config that merges the task's method interface and a script whose body comes from the test.
"""

from __future__ import annotations

import hashlib
import shutil
import textwrap
from pathlib import Path

import anndata as ad

from openpert.config.task import Task
from openpert.engines.benchmark import run_benchmark

#: The honest components whose scores must not move.
HONEST = ("truth", "zeros", "train_mean", "group_mean")
#: Fixture methods removed from a hostile project (they would only slow the run down).
OTHER_METHODS = ("shrunk_mean", "fail_raise", "fail_timeout", "fail_memory", "fail_invalid", "reads_solution",
                 "spy_workdir", "llm_constant")

METHOD_CONFIG = """\
__merge__: ../../api/comp_method.yaml
name: {name}
label: Hostile {name}
summary: A hostile method of the adversarial suite.
description: A hostile method of the adversarial suite ({name}).
references:
  doi: [10.1000/fixture]
info:
  preferred_normalization: none
resources:
  - type: python_script
    path: script.py
  - {{type: file, path: /src/tiny/tiny_lib/h5ad_files.py, dest: tiny_lib/h5ad_files.py}}
engines:
  - type: native
runners:
  - type: executable
  - type: nextflow
    directives:
      label: [{labels}]
"""

SCRIPT_HEAD = '''\
import os
import sys

import numpy as np

## VIASH START
par = {"input_train": "train.h5ad", "input_test": "test.h5ad", "output": "prediction.h5ad"}
meta = {"name": "hostile", "resources_dir": "src/tiny"}
## VIASH END

sys.path.append(meta["resources_dir"])
from tiny_lib.h5ad_files import read, write  # noqa: E402

test = read(par["input_test"])
found = []  # what the attack obtained, published in the prediction's uns for the test to inspect


def submit(values, note=""):
    """Write a prediction (the stolen truth when the attack worked, else zeros)."""
    uns = {"dataset_id": test.uns["dataset_id"], "method_id": meta["name"], "found": np.array([str(f).replace("\\0", " ") for f in found] or [""]),
           "note": note}
    write(par["output"], test.obs_names, test.var_names, layers={"prediction": np.asarray(values, dtype=float)}, uns=uns)


def steal(path):
    """Use a solution file as the prediction if it can be read; True when it worked."""
    try:
        sol = read(path)
        truth = sol.layers["truth"][sol.positions(test.obs_names)]
    except Exception as err:  # noqa: BLE001
        print(f"could not read {path}: {type(err).__name__}: {err}", file=sys.stderr)
        return False
    found.append(f"solution:{path}")
    submit(truth, note="stolen")
    return True


def search(base):
    """Files named solution*.h5ad below ``base`` (not following links, skipping /proc, /sys, /dev)."""
    for folder, dirs, files in os.walk(base):
        if folder.startswith(("/proc", "/sys", "/dev")):
            dirs[:] = []
            continue
        for name in files:
            if name.startswith("solution") and name.endswith(".h5ad"):
                yield os.path.join(folder, name)

'''


def copy_project(source: Path, dest: Path) -> Path:
    """A private copy of the fixture project (with its test resources), without the slow fixture methods."""
    shutil.copytree(source, dest)
    for name in OTHER_METHODS:
        shutil.rmtree(dest / "src" / "tiny" / "methods" / name, ignore_errors=True)
    return dest


def add_method(root: Path, name: str, body: str, *, labels: str = "lowmem, lowcpu, lowtime, lowdisk", config: str | None = None,
               folder: str = "methods") -> Path:
    """Add a hostile component ``src/tiny/<folder>/<name>/`` whose script is :data:`SCRIPT_HEAD` + ``body``."""
    comp = root / "src" / "tiny" / folder / name
    comp.mkdir(parents=True)
    (comp / "config.vsh.yaml").write_text(config if config is not None else METHOD_CONFIG.format(name=name, labels=labels))
    (comp / "script.py").write_text(SCRIPT_HEAD + textwrap.dedent(body))
    return comp


def run(root: Path, outdir: Path, methods: list[str] | None = None, **kwargs) -> dict:
    """Run the fixture benchmark of a project copy (metric ``errors``)."""
    return run_benchmark(Task(root / "src" / "tiny"), outdir, input_dir=root / "resources_test" / "tiny", methods=methods,
                         metrics=["errors"], progress=False, jobs=2, **kwargs)


def raw_scores(results: dict, methods=HONEST) -> dict[tuple[str, str], float]:
    """``(method, metric) -> raw score`` of the given methods."""
    return {(s["method_id"], s["metric_id"]): s["raw"] for s in results["scores"] if s["method_id"] in methods}


def assert_honest_unchanged(results: dict, clean: dict) -> None:
    """(b): the honest components' raw scores equal the clean run's."""
    got, want = raw_scores(results), raw_scores(clean)
    assert set(want) == {(m, k) for m in HONEST for k in ("rmse", "mae")}, want
    assert got == want


def failed_ids(results: dict) -> dict[str, dict]:
    """Failures by method (or component) id."""
    out = {}
    for f in results["failures"]:
        out[f.get("method_id") or f.get("component") or f.get("job_id")] = f
    return out


def assert_no_advantage(results: dict, method: str) -> None:
    """(a): the hostile method failed, or scores worse than the positive control on every metric."""
    mine = raw_scores(results, (method,))
    truth = raw_scores(results, ("truth",))
    if not mine:
        return  # no score: it failed (or was left out)
    for (_, metric), value in mine.items():
        assert value != truth[("truth", metric)], f"{method} scored like the positive control on {metric}: the attack worked"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tree_digest(folder: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every regular file below ``folder`` (for "nothing changed" checks)."""
    return {str(p.relative_to(folder)): sha256(p) for p in sorted(Path(folder).rglob("*")) if p.is_file() and not p.is_symlink()
            and "__pycache__" not in p.parts}


def prediction_layer(path: Path):
    return ad.read_h5ad(path).layers["prediction"]

