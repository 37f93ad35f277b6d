"""Seed replicates in the plan: one job per seed, ids and folders named ``<method>@seed<k>``."""

from __future__ import annotations

import pytest

from openpert.config.task import Task
from openpert.config.viash import ConfigError
from openpert.engines.plan import Output, make_plan, plan_jobs


def seed_control(root, n=3):
    """Give the fixture's negative control ``info.seeds: n`` and an integer ``--seed`` argument."""
    config = root / "src/tiny/control_methods/zeros/config.vsh.yaml"
    text = config.read_text()
    assert "  control: negative\n" in text
    text = text.replace("  control: negative\n", f"  control: negative\n  seeds: {n}\n")
    assert "\narguments:" not in text
    text += "arguments:\n  - {name: --seed, type: integer, default: 0, description: Seed of the replicate.}\n"
    config.write_text(text)
    return config


def test_seeded_control_runs_once_per_seed(project_copy, tmp_path):
    seed_control(project_copy)
    task = Task(project_copy / "src" / "tiny")
    assert not task.config_errors
    plan = make_plan(task, task.find_datasets(project_copy / "resources_test" / "tiny"), tmp_path,
                     methods=["group_mean"], metrics=["errors"])
    entries = {e["id"]: e for e in plan["methods"]}
    assert entries["zeros"]["seeds"] == [0, 1, 2] and entries["group_mean"]["seeds"] == []
    jobs = plan_jobs(plan)
    zeros = [j for j in jobs if j.method_id == "zeros" and j.stage == "method"]
    assert [j.job_id for j in zeros] == ["syn/zeros@seed0", "syn/zeros@seed1", "syn/zeros@seed2"]
    assert [j.params["seed"] for j in zeros] == [0, 1, 2] and [j.seed for j in zeros] == [0, 1, 2]
    assert [j.publish_dir.name for j in zeros] == ["zeros@seed0", "zeros@seed1", "zeros@seed2"]
    # the seed enters the cache key: replicates never reuse each other's predictions
    assert len({j.key("component") for j in zeros}) == 3
    (unseeded,) = [j for j in jobs if j.method_id == "group_mean" and j.stage == "method"]
    assert unseeded.job_id == "syn/group_mean" and unseeded.seed is None
    # metric jobs keep the replicate in their id and folder, and method_id the control's name; they
    # follow their replicate and read its prediction
    (metric,) = [j for j in jobs if j.after == "syn/zeros@seed1"]
    assert metric.job_id == "syn/zeros@seed1/errors" and metric.method_id == "zeros" and metric.seed == 1
    assert metric.publish_dir.parent.name == "zeros@seed1"
    assert Output("syn/zeros@seed1", "output") in metric.inputs.values()
    prediction = tmp_path / "prediction.h5ad"
    resolved = metric.resolved(lambda job_id: {"output": str(prediction)} if job_id == "syn/zeros@seed1" else {})
    assert prediction in resolved.inputs.values() and not any(isinstance(v, Output) for v in resolved.inputs.values())


@pytest.mark.parametrize(("value", "message"), [("0", "expected an integer from 1"), ("two", "expected an integer"),
                                                ("true", "expected an integer")])
def test_malformed_seeds_leave_the_component_out(project_copy, value, message):
    config = project_copy / "src/tiny/control_methods/zeros/config.vsh.yaml"
    config.write_text(config.read_text().replace("  control: negative\n", f"  control: negative\n  seeds: {value}\n"))
    task = Task(project_copy / "src" / "tiny")
    (problem,) = [e for e in task.config_errors if e.component == "zeros"]
    assert message in problem.reason and "info.seeds" in problem.reason


def test_seeds_need_a_seed_argument(project_copy):
    config = project_copy / "src/tiny/methods/group_mean/config.vsh.yaml"
    text = config.read_text()
    assert "--seed" not in text
    config.write_text(text.replace("info:\n", "info:\n  seeds: 2\n", 1))
    task = Task(project_copy / "src" / "tiny")
    (problem,) = [e for e in task.config_errors if e.component == "group_mean"]
    assert "needs an integer argument --seed" in problem.reason
    with pytest.raises(ConfigError, match="no component named"):
        task.component("group_mean")
