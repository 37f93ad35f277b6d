"""Hostile configs: escape by name, escape by resource path, pose as a control (classes 3, 4, 5).

All are refused when the task is read: the component is left out, listed in ``config_errors`` with
its file, and the rest of the task runs as in a clean run. None of these depends on the sandbox.

3. ``name: ../synthetic_simulation/no_change``, ``name: ../../../../escape_probe`` and
   ``name: ../syn/zeros`` (which would publish over the negative control's prediction): refused,
   nothing written outside the results folder, the negative control's prediction untouched.
4. resources ``../../../../resources_test/tiny/syn/solution.h5ad``, ``/../../../etc/passwd``, another
   task's library (``../../../other/other_lib/helper.py``), and a symbolic link inside the component's
   folder that points at the solution: refused.
5. a folder in ``methods/`` whose config merges ``comp_control_method.yaml`` (``info.type:
   control_method``): left out, never run, never given the solution, not on the leaderboard; and a
   "method" that declares ``--input_solution`` itself: it fails before anything runs.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from adversarial.hostile import (
    METHOD_CONFIG,
    add_method,
    assert_honest_unchanged,
    copy_project,
    failed_ids,
    prediction_layer,
    run,
)

BODY = "submit(np.zeros(test.shape))\n"
NAME_ESCAPES = {"escape_sibling": "../synthetic_simulation/no_change", "escape_probe": "../../../../escape_probe",
                "escape_zeros": "../syn/zeros"}
RESOURCE_ESCAPES = {"res_solution": "../../../../resources_test/tiny/syn/solution.h5ad", "res_passwd": "/../../../etc/passwd",
                    "res_other_lib": "../../../other/other_lib/helper.py", "res_symlink": "leak.h5ad"}
CONTROL_CONFIG = METHOD_CONFIG.replace("__merge__: ../../api/comp_method.yaml", "__merge__: ../../api/comp_control_method.yaml")
SOLUTION_ARG = """arguments:
  - name: --input_solution
    __merge__: ../../api/file_solution.yaml
    direction: input
    required: true
"""
STEAL_BODY = """
sol = read(par["input_solution"])
submit(sol.layers["truth"][sol.positions(test.obs_names)], note="stolen")
"""


@pytest.fixture(scope="module")
def config_run(tiny_project, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("configs")
    root = copy_project(tiny_project, tmp / "project")
    for folder, name in NAME_ESCAPES.items():
        add_method(root, folder, BODY, config=METHOD_CONFIG.format(name=name, labels="lowmem, lowcpu, lowtime"))
    other_lib = root / "src" / "other" / "other_lib"
    other_lib.mkdir(parents=True)
    (other_lib / "helper.py").write_text("x = 1\n")
    for folder, path in RESOURCE_ESCAPES.items():
        config = METHOD_CONFIG.format(name=folder, labels="lowmem, lowcpu, lowtime")
        config = config.replace("    path: script.py\n", f"    path: script.py\n  - type: file\n    path: {path}\n")
        comp = add_method(root, folder, BODY, config=config)
        if folder == "res_symlink":
            os.symlink(root / "resources_test" / "tiny" / "syn" / "solution.h5ad", comp / "leak.h5ad")
    add_method(root, "pose_control", STEAL_BODY, config=CONTROL_CONFIG.format(name="pose_control", labels="lowmem, lowcpu, lowtime"))
    add_method(root, "pose_method", STEAL_BODY,
               config=METHOD_CONFIG.format(name="pose_method", labels="lowmem, lowcpu, lowtime") + SOLUTION_ARG)
    before = set(tmp.rglob("*"))
    results = run(root, tmp / "out")
    return {"results": results, "root": root, "out": tmp / "out", "tmp": tmp, "before": before}


def _errors(results) -> dict[str, str]:
    """Folder of the offending component -> reason."""
    out = {}
    for err in results["config_errors"]:
        text = " ".join(str(v) for v in err.values())
        match = re.search(r"/methods/([a-z_]+)/", text)
        out[match.group(1) if match else text] = text
    return out


def test_honest_scores_unchanged(config_run, clean):
    assert_honest_unchanged(config_run["results"], clean)


@pytest.mark.parametrize("folder", sorted(NAME_ESCAPES))
def test_escape_by_name(config_run, folder):
    """3. Refused; nothing written outside the results folder; the negative control's prediction untouched."""
    results = config_run["results"]
    assert folder in _errors(results), results["config_errors"]
    ids = {s["method_id"] for s in results["scores"]}
    assert not {n for n in ids if "/" in n or ".." in n}
    new = set(config_run["tmp"].rglob("*")) - config_run["before"]
    outside = [p for p in new if not p.is_relative_to(config_run["out"])]
    assert not outside, outside
    methods = config_run["root"] / "src" / "tiny" / "methods"
    escaped = [p for p in config_run["tmp"].parent.rglob("*") if p.name in ("no_change", "escape_probe") and not p.is_relative_to(methods)]
    assert not escaped, escaped
    zeros = prediction_layer(config_run["out"] / "outputs" / "syn" / "zeros" / "prediction.h5ad")
    assert np.all(zeros == 0)


@pytest.mark.parametrize("folder", sorted(RESOURCE_ESCAPES))
def test_escape_by_resource_path(config_run, folder):
    """4. Refused when the task is read, with an error naming the component's file."""
    results = config_run["results"]
    errors = _errors(results)
    assert folder in errors, results["config_errors"]
    assert "config.vsh.yaml" in errors[folder]
    assert folder not in {s["method_id"] for s in results["scores"]}


def test_pose_as_control(config_run):
    """5. A control in methods/ is left out; a method asking for the solution fails before running."""
    results = config_run["results"]
    assert "pose_control" in _errors(results), results["config_errors"]
    assert "pose_control" not in {s["method_id"] for s in results["scores"]}
    assert not (config_run["out"] / "outputs" / "syn" / "pose_control").exists()
    failures = failed_ids(results)
    assert "pose_method" in failures, failures
    assert "solution" in failures["pose_method"]["reason"]
    assert not (config_run["out"] / "outputs" / "syn" / "pose_method").exists()
    assert "pose_method" not in {s["method_id"] for s in results["scores"]}


def test_a_method_interface_edited_to_give_the_solution_is_named_by_lint_and_refused_at_run_time(tiny_project, tmp_path):
    """6. The rules are the harness's: ``--input_solution`` added to ``api/comp_method.yaml`` (not required)
    and a method that copies it. Lint names the edited interface and the method; the engine, which
    takes the solution-only formats from ``task_info.yaml``, refuses the method's job before it runs."""
    from openpert.config.lint import task_problems

    root = copy_project(tiny_project, tmp_path / "project")
    interface = root / "src" / "tiny" / "api" / "comp_method.yaml"
    interface.write_text(interface.read_text() + "  - name: --input_solution\n    __merge__: file_solution.yaml\n"
                         "    required: false\n    direction: input\n")
    add_method(root, "copier", STEAL_BODY)
    problems = [p for p in task_problems(root / "src" / "tiny") if "solution-only" in p]
    assert [p.split(": arguments")[0] for p in problems] == [str(interface)], problems
    results = run(root, tmp_path / "out", methods=["copier"])
    failures = failed_ids(results)
    assert "copier" in failures and "file_solution" in failures["copier"]["reason"], failures
    assert "copier" not in {s["method_id"] for s in results["scores"]}
