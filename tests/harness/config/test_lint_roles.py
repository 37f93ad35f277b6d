"""``openpert lint`` on score roles: control roles, seed replicates, headline metrics, dataset labels."""

from __future__ import annotations

import pytest

from openpert.config.lint import lint_config, project_problems, task_problems
from openpert.config.viash import CONTROL_ROLES, read_config

ZEROS = "src/tiny/control_methods/zeros/config.vsh.yaml"


@pytest.mark.parametrize("role", CONTROL_ROLES)
def test_every_control_role_is_accepted(project_copy, role):
    path = project_copy / ZEROS
    path.write_text(path.read_text().replace("control: negative", f"control: {role}"))
    assert not [p for p in lint_config(read_config(path)) if "info.control" in p]


def test_an_unknown_role_is_named(project_copy):
    path = project_copy / ZEROS
    path.write_text(path.read_text().replace("control: negative", "control: oracle"))
    (problem,) = [p for p in lint_config(read_config(path)) if "info.control" in p]
    assert "'adversarial'" in problem and "'ceiling'" in problem and "'oracle'" in problem


def test_seeds_need_an_integer_seed_argument(project_copy):
    path = project_copy / ZEROS
    path.write_text(path.read_text().replace("control: negative", "control: negative\n  seeds: 5"))
    assert f"{path}: info.seeds: a seeded component needs an integer argument --seed (each replicate runs with " \
           "--seed 0, 1, ...)" in lint_config(read_config(path))
    path.write_text(path.read_text() + "arguments:\n  - {name: --seed, type: string, default: a}\n")
    assert f"{path}: arguments --seed: must be of type integer, got string" in lint_config(read_config(path))
    path.write_text(path.read_text().replace("type: string, default: a", "type: integer, default: 0"))
    assert not [p for p in lint_config(read_config(path)) if "seed" in p]
    path.write_text(path.read_text().replace("seeds: 5", "seeds: 0"))
    assert any("info.seeds: expected an integer from 1 to 100" in p for p in lint_config(read_config(path)))


def test_seeds_on_a_metric_are_refused(project_copy):
    path = project_copy / "src/tiny/metrics/errors/config.vsh.yaml"
    path.write_text(path.read_text().replace("info:\n", "info:\n  seeds: 2\n", 1))
    assert any("only methods and control methods run as seed replicates" in p for p in lint_config(read_config(path)))


def test_dataset_labels_at_most_30_characters(project_copy):
    path = project_copy / "src/tiny/datasets/synthetic/config.vsh.yaml"
    path.write_text(path.read_text().replace("{id: syn_a, seed: 1}", "{id: syn_a, seed: 1, label: " + "L" * 30 + "}")
                    .replace("{id: syn_b, seed: 2}", "{id: syn_b, seed: 2, dataset_name: " + "N" * 31 + "}"))
    problems = lint_config(read_config(path))
    assert f"{path}: info.datasets[1].dataset_name: 31 characters; at most 30" in problems
    assert not [p for p in problems if "info.datasets[0]" in p]
    path.write_text(path.read_text().replace("arguments:\n", "arguments:\n  - {name: --dataset_name, type: string, "
                                             "default: " + "D" * 31 + "}\n", 1))
    assert any("arguments --dataset_name: default has 31 characters" in p for p in lint_config(read_config(path)))


def _task_problems(task_dir) -> list[str]:
    """The task's problems but one: its reads_solution method declares the solution on purpose (the
    engines' refusal is tested on it), which lint names."""
    return [p for p in task_problems(task_dir) if "/methods/reads_solution/" not in p]


def _task_info(root, extra: str) -> None:
    info = root / "src/tiny/api/task_info.yaml"
    info.write_text(info.read_text() + extra)


def test_headline_and_diagnostic_metrics_must_partition_the_metric_ids(project_copy):
    task_dir = project_copy / "src/tiny"
    where = task_dir / "api" / "task_info.yaml"
    (problem,) = _task_problems(task_dir)
    assert problem.startswith(f"{where}: headline_metrics, diagnostic_metrics: missing")
    _task_info(project_copy, "headline_metrics: [rmse, pearson, bogus]\ndiagnostic_metrics: [pearson]\n")
    problems = _task_problems(task_dir)
    assert f"{where}: pearson: in both headline_metrics and diagnostic_metrics" in problems
    assert f"{where}: bogus: not a metric id of any metric component of the task" in problems
    assert f"{where}: mae: in neither headline_metrics nor diagnostic_metrics" in problems


def test_a_partition_is_clean_and_reaches_project_lint(project_copy):
    _task_info(project_copy, "headline_metrics: [rmse, pearson]\ndiagnostic_metrics: [mae]\n")
    assert _task_problems(project_copy / "src/tiny") == []
    assert not [p for p in project_problems(project_copy, []) if "task_info.yaml:" in p]
    info = project_copy / "src/tiny/api/task_info.yaml"
    info.write_text(info.read_text().replace("diagnostic_metrics: [mae]", "diagnostic_metrics: mae"))
    assert any("diagnostic_metrics: expected a list of metric ids" in p for p in project_problems(project_copy, []))


def test_games_name_metrics_of_the_task_on_adversarial_controls_only(project_copy):
    path = project_copy / ZEROS
    task_dir = project_copy / "src/tiny"
    path.write_text(path.read_text().replace("control: negative", "control: negative\n  games: [rmse]"))
    assert f"{path}: info.games: only adversarial controls name the metrics they game" in task_problems(task_dir)
    path.write_text(path.read_text().replace("control: negative", "control: adversarial").replace("[rmse]", "[rmse, bleu]"))
    games = [p for p in task_problems(task_dir) if "info.games" in p]
    assert games == [f"{path}: info.games: bleu: not a metric id of the task"]
    path.write_text(path.read_text().replace("[rmse, bleu]", "[rmse]"))
    assert [p for p in task_problems(task_dir) if "info.games" in p] == []
    assert read_config(path).games == ["rmse"]
