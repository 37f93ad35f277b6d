"""Tasks read from the tree: the folder of a component decides its type."""

from __future__ import annotations

import re
import shutil

import pytest

from openpert.config.task import Task
from openpert.config.viash import ConfigError


def test_components_are_discovered_by_type(tiny_task):
    assert {c.name for c in tiny_task.of_type("metric")} == {"correlation", "errors"}
    assert "group_mean" in {c.name for c in tiny_task.of_type("method")}


def errors_of(task: Task) -> dict[str, str]:
    """Component folder -> reason of every config the task left out."""
    return {e.component: e.reason for e in task.config_errors}


def test_a_method_that_merges_the_control_interface_is_refused(project_copy):
    """A contribution in methods/ posing as a control would be given the solution: it is left out."""
    task_dir = project_copy / "src" / "tiny"
    poser = task_dir / "methods" / "poser"
    shutil.copytree(task_dir / "control_methods" / "truth", poser)
    config = poser / "config.vsh.yaml"
    config.write_text(config.read_text().replace("name: truth", "name: poser"))
    task = Task(task_dir)
    assert "poser" not in {c.name for c in task.components}
    assert "truth" in {c.name for c in task.of_type("control_method")}
    assert re.search(r"poser/config.vsh.yaml: info.type is 'control_method' but the component is in methods/", errors_of(task)["poser"])
    (error,) = task.config_errors
    assert error.config == "src/tiny/methods/poser/config.vsh.yaml" and error.type == "method"


def test_a_component_outside_the_type_folders_is_refused(project_copy):
    task_dir = project_copy / "src" / "tiny"
    shutil.copytree(task_dir / "methods" / "group_mean", task_dir / "extras" / "group_mean")
    task = Task(task_dir)
    assert [c.name for c in task.of_type("method")].count("group_mean") == 1
    (error,) = task.config_errors
    assert "extras/group_mean/config.vsh.yaml: components live in datasets, control_methods, methods, metrics/" in error.reason
    assert error.type == ""


BROKEN = {
    "bad_yaml": ("name: bad_yaml\narguments: [\n", r"bad_yaml/config.vsh.yaml: invalid YAML"),
    "bad_merge": ("__merge__: ../../api/comp_nope.yaml\nname: bad_merge\n", r"bad_merge/config.vsh.yaml: __merge__: merged file .*comp_nope.yaml.* not found"),
    "bad_name": ("__merge__: ../../api/comp_method.yaml\nname: Bad-Name\n", r"bad_name/config.vsh.yaml: name: 'Bad-Name' must match"),
    "bad_label": ("__merge__: ../../api/comp_method.yaml\nname: bad_label\nrunners:\n  - {type: nextflow, directives: {label: [hugemem]}}\n",
                  r"bad_label/config.vsh.yaml: runners.directives.label: unknown label\(s\) \['hugemem'\]"),
    "bad_refs": ("__merge__: ../../api/comp_method.yaml\nname: bad_refs\nreferences: [10.1/x]\n", r"bad_refs/config.vsh.yaml: references must be a mapping"),
    "bad_resources": ("__merge__: ../../api/comp_method.yaml\nname: bad_resources\nresources: 5\n",
                      r"bad_resources/config.vsh.yaml: cannot read the config: TypeError"),
}


def test_malformed_configs_are_collected_and_the_rest_of_the_task_stands(project_copy):
    task_dir = project_copy / "src" / "tiny"
    for name, (text, _) in BROKEN.items():
        (task_dir / "methods" / name).mkdir()
        (task_dir / "methods" / name / "config.vsh.yaml").write_text(text)
    task = Task(task_dir)
    errors = errors_of(task)
    assert set(errors) == set(BROKEN)
    for name, (_, pattern) in BROKEN.items():
        assert re.search(pattern, errors[name]), (name, errors[name])
    assert {e.type for e in task.config_errors} == {"method"}
    assert {c.name for c in task.of_type("method")} >= {"group_mean", "shrunk_mean"}
    assert {c.name for c in task.of_type("metric")} == {"correlation", "errors"}
    # errors of the task itself are still errors
    with pytest.raises(ConfigError, match="not a task folder"):
        Task(task_dir / "methods")
    (task_dir / "api" / "comp_method.yaml").unlink()
    with pytest.raises(ConfigError, match="comp_method.yaml: file not found"):
        _ = Task(task_dir).method_formats


def test_a_name_used_twice_leaves_out_every_holder(project_copy):
    """A new folder taking an existing component's name must not shadow it (nor be shadowed)."""
    task_dir = project_copy / "src" / "tiny"
    shutil.copytree(task_dir / "methods" / "group_mean", task_dir / "methods" / "a_copy")
    task = Task(task_dir)
    assert "group_mean" not in {c.name for c in task.components}
    errors = errors_of(task)
    assert set(errors) == {"a_copy", "group_mean"}
    assert re.search(r"a_copy/config.vsh.yaml: name 'group_mean' is also used by .*methods/group_mean/config.vsh.yaml", errors["a_copy"])


def test_malformed_dataset_list_is_a_config_error(project_copy):
    config = project_copy / "src/tiny/datasets/synthetic/config.vsh.yaml"
    config.write_text(config.read_text().replace("    - {id: syn_a, seed: 1}", "    - {seed: 1}"))
    task = Task(project_copy / "src" / "tiny")
    assert task.of_type("dataset") == []
    assert "synthetic/config.vsh.yaml: info.datasets[0] needs an id" in errors_of(task)["synthetic"]


def test_config_at_gives_the_component_already_read(tiny_task):
    method = tiny_task.component("group_mean")
    assert tiny_task.config_at(str(method.path)) is method
    # A path the task did not read (here: the same file, spelt otherwise) is read from disk.
    other = tiny_task.config_at(f"{method.path.parent}/./config.vsh.yaml")
    assert other is not method and other.name == "group_mean"


def test_a_method_declaring_a_solution_only_format_is_named_and_never_given_it(project_copy):
    method = project_copy / "src" / "tiny" / "methods" / "group_mean" / "config.vsh.yaml"
    method.write_text(method.read_text() + "arguments:\n  - name: --input_answers\n    __merge__: ../../api/file_solution.yaml\n"
                      "    direction: input\n")
    task = Task(project_copy / "src" / "tiny")
    assert task.solution_formats == ["file_solution"]
    assert "file_solution" not in task.method_formats
    # The fixture's reads_solution method (the engines' refusal is tested on it) is named too.
    assert [p for p in task.solution_read_problems() if "reads_solution" not in p] == [
        f"{method}: arguments --input_answers: reads file_solution, which task_info.yaml declares solution-only: "
        "only control methods and metrics may read it"]
    info = project_copy / "src" / "tiny" / "api" / "task_info.yaml"
    info.write_text(info.read_text().replace("solution_formats: [file_solution]", "solution_formats: [file_answers]"))
    assert Task(project_copy / "src" / "tiny").solution_read_problems()[0].endswith(
        "solution_formats: 'file_answers' is not a file format of the task (api/file_answers.yaml)")
