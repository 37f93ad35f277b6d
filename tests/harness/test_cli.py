"""The command line and contributor tools: run-component, lint, create-component, component tests."""

from __future__ import annotations

import os
import subprocess
import sys

import anndata as ad
import pytest
from fixture_tasks import copy_tiny_task

from openpert.cli import main
from openpert.config.lint import lint_paths
from openpert.config.scaffold import create_component
from openpert.config.viash import ConfigError, read_config
from openpert.testing.plugin import ComponentTestError, run_component_test


def test_run_component_cli(tiny_project, tmp_path, capsys, monkeypatch):
    import tempfile

    monkeypatch.chdir(tiny_project)
    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(host_tmp))
    out = tmp_path / "p.h5ad"
    code = main(["run-component", "src/tiny/methods/shrunk_mean/config.vsh.yaml", "--input_train", "resources_test/tiny/syn/train.h5ad",
                 "--input_test", "resources_test/tiny/syn/test.h5ad", "--output", str(out), "--alpha", "0"])
    assert code == 0 and out.is_file()
    assert ad.read_h5ad(out).uns["method_id"] == "shrunk_mean"
    # A successful run without --work-dir leaves no temporary work dir behind; a failed one keeps its log.
    assert list(host_tmp.iterdir()) == []
    code = main(["run-component", "src/tiny/methods/fail_raise/config.vsh.yaml", "--input_train", "resources_test/tiny/syn/train.h5ad",
                 "--input_test", "resources_test/tiny/syn/test.h5ad", "--output", str(tmp_path / "q.h5ad")])
    err = capsys.readouterr().err
    assert code == 1 and "fail_raise failed: exited with code 1" in err and "this method fails on purpose" in err
    [kept] = host_tmp.iterdir()
    assert (kept / "output.log").is_file() and not (kept / ".tmp").exists() and not (kept / ".home").exists()
    code = main(["run-component", "src/tiny/methods/nope/config.vsh.yaml"])
    assert code == 2 and "nope/config.vsh.yaml: file not found" in capsys.readouterr().err


def test_run_component_in_a_process_of_its_own_starts_no_fork_server(tmp_path, monkeypatch):
    """One job per process (Nextflow's tasks): no server; a caller running several commands keeps it."""
    monkeypatch.delenv("OPENPERT_FORKSERVER", raising=False)
    missing = str(tmp_path / "config.vsh.yaml")
    assert main(["run-component", missing]) == 2
    assert "OPENPERT_FORKSERVER" not in os.environ
    monkeypatch.setattr(sys, "argv", ["openpert", "run-component", missing])
    assert main() == 2
    assert os.environ["OPENPERT_FORKSERVER"] == "off"


def test_lint(tiny_project, tmp_path):
    assert lint_paths([tiny_project / "src"]) == []
    bad = tmp_path / "project"
    import shutil

    shutil.copytree(tiny_project, bad)
    cfg = bad / "src/tiny/control_methods/zeros/config.vsh.yaml"
    cfg.write_text(cfg.read_text().replace("control: negative", "control: neutral").replace("label: Zeros", "label: " + "Z" * 60))
    metric = bad / "src/tiny/metrics/errors/config.vsh.yaml"
    metric.write_text(metric.read_text().replace("      maximize: false\n", "", 1))
    problems = "\n".join(lint_paths([bad / "src"]))
    assert f"{cfg}: info.control: a control method needs one of" in problems
    assert f"{cfg}: label: 60 characters; at most 30" in problems
    assert f"{metric}: info.metrics[0]: missing maximize" in problems


def test_create_component_scaffolds_a_working_component(project_copy):
    for comp_type, name in [("method", "my_method"), ("metric", "my_metric"), ("control_method", "my_control")]:
        folder = create_component(project_copy, task="tiny", comp_type=comp_type, name=name)
        config = read_config(folder / "config.vsh.yaml")
        # as generated, the component test passes; lint asks for the real text of the placeholders
        assert run_component_test(config, folder.parent / f"_{name}_work").succeeded
        assert any("still holds the scaffold's placeholder" in p for p in lint_paths([folder]))
        text = (folder / "config.vsh.yaml").read_text()
        text = text.replace("FILL IN: ", "Filled in by the contributor: ").replace("10.0000/fill.in", "10.1000/real.doi")
        text = text.replace("https://example.org/fill-in", "https://example.org/docs")
        (folder / "config.vsh.yaml").write_text(text)
        result = run_component_test(read_config(folder / "config.vsh.yaml"), folder.parent / f"_{name}_work2")
        assert result.succeeded and lint_paths([folder]) == []
    with pytest.raises(ConfigError, match="already exists"):
        create_component(project_copy, task="tiny", comp_type="method", name="my_method")


def test_component_test_checks_metric_ids(project_copy, tmp_path):
    script = project_copy / "src/tiny/metrics/correlation/script.py"
    script.write_text(script.read_text().replace('"metric_ids": ["pearson"]', '"metric_ids": ["spearman"]'))
    with pytest.raises(ComponentTestError, match=r"metric ids \['spearman'\] differ from info.metrics \['pearson'\]"):
        run_component_test(read_config(project_copy / "src/tiny/metrics/correlation/config.vsh.yaml"), tmp_path / "w")
    result = run_component_test(read_config(project_copy / "src/tiny/metrics/errors/config.vsh.yaml"), tmp_path / "w2")
    assert result.succeeded


def test_component_test_and_lint_catch_an_import_the_image_does_not_provide(project_copy, tmp_path, capsys, monkeypatch):
    """An import the image lacks fails `openpert test` and `openpert lint` here, not only in the image test."""
    import shutil

    pytest.importorskip("sklearn")
    from project_paths import ROOT

    shutil.copytree(ROOT / "docker", project_copy / "docker")
    script = project_copy / "src/tiny/methods/group_mean/script.py"
    script.write_text("import sklearn  # noqa: F401\n" + script.read_text())
    config = read_config(project_copy / "src/tiny/methods/group_mean/config.vsh.yaml")
    line = (f"{script}:1: imports sklearn (distribution scikit-learn), which image core does not hold and its setup does "
            f"not add: use `image: ml`, which holds it, in the docker engine of {config.path}")
    with pytest.raises(ComponentTestError) as raised:
        run_component_test(config, tmp_path / "w")
    assert line in str(raised.value)
    monkeypatch.chdir(project_copy)
    assert main(["lint", "src/tiny/methods/group_mean"]) == 1
    assert line in capsys.readouterr().out


def test_pytest_plugin_collects_components(tiny_project):
    """`pytest src/` in a project gives each component a test; failing components fail theirs."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "src/tiny/methods", "-q", "-p", "no:cacheprovider", "--co"],
                          cwd=tiny_project, capture_output=True, text=True)
    assert "component[group_mean]" in proc.stdout and "component[fail_raise]" in proc.stdout
    assert proc.stdout.count("config.vsh.yaml::component[") == 9


def test_llm_component_test_runs_against_a_local_server(tiny_project, tmp_path):
    config = read_config(tiny_project / "src/tiny/methods/llm_constant/config.vsh.yaml")
    result = run_component_test(config, tmp_path)
    assert result.succeeded
    (path,) = result.outputs.values()
    assert (ad.read_h5ad(path).layers["prediction"] == 0.25).all()


def test_benchmark_exits_non_zero_when_every_method_of_a_dataset_fails(tiny_project, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tiny_project)
    # one control: "every method" counts methods, not the controls that run beside them
    args = ["benchmark", "--task", "tiny", "--input", "resources_test/tiny", "--controls", "truth", "--metrics", "errors",
            "-j", "2", "-o"]
    assert main([*args, str(tmp_path / "bad"), "--methods", "fail_raise", "fail_invalid"]) == 1
    assert "error: every method failed on dataset syn" in capsys.readouterr().err
    assert main([*args, str(tmp_path / "good"), "--methods", "fail_raise", "group_mean"]) == 0


def test_run_problems_names_failed_dataset_jobs():
    from openpert.cli import run_problems

    results = {"failures": [{"job_id": "datasets/k562", "stage": "dataset", "reason": "no items for screen hepg2"}],
               "methods": [{"id": "m", "type": "method"}, {"id": "c", "type": "control_method"}],
               "resources": [{"stage": "method", "method_id": "c", "dataset_id": "d", "status": "succeeded"},
                             {"stage": "method", "method_id": "m", "dataset_id": "d", "status": "succeeded"}]}
    assert run_problems(results) == ["dataset job datasets/k562 failed: no items for screen hepg2"]
    results["resources"][1]["status"] = "failed"
    assert run_problems(results)[1] == "every method failed on dataset d"


def test_run_component_fills_a_dataset_components_outputs(tiny_project, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tiny_project / "src/tiny/datasets/synthetic/config.vsh.yaml"
    # No output named: each goes to ./<dataset_id>/<the format's file name>.
    assert main(["run-component", str(config), "--dataset_id", "syn_c", "--seed", "3"]) == 0
    written = sorted(p.name for p in (tmp_path / "syn_c").iterdir())
    expected = sorted(read_config(config).file_outputs, key=lambda a: a.name)
    assert len(written) == len(expected) >= 2
    assert ad.read_h5ad(tmp_path / "syn_c" / "train.h5ad").n_obs > 0
    # One output named, the rest in --output-dir.
    named = tmp_path / "elsewhere" / "train.h5ad"
    named.parent.mkdir()
    assert main(["run-component", str(config), "--output-dir", str(tmp_path / "d"), "--output_train", str(named)]) == 0
    assert named.is_file() and not (tmp_path / "d" / "train.h5ad").exists()
    assert len(list((tmp_path / "d").iterdir())) == len(expected) - 1


def test_openpert_sandbox_on_makes_a_benchmark_fail_where_bubblewrap_cannot_run(tiny_project, tmp_path, capsys, monkeypatch):
    """$OPENPERT_SANDBOX is --sandbox's default: `on` where bwrap fails stops the benchmark with the AppArmor fixes."""
    from sandbox_marks import reset_sandbox_probe

    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("OPENPERT_SANDBOX", "on")
    monkeypatch.chdir(tiny_project)
    reset_sandbox_probe()
    try:
        code = main(["benchmark", "--task", "tiny", "--input", "resources_test/tiny", "--methods", "group_mean",
                     "-o", str(tmp_path / "out"), "--quiet"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert "a sandbox was required" in err and "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in err
        # --sandbox on the command line wins over the variable
        assert main(["benchmark", "--task", "tiny", "--input", "resources_test/tiny", "--methods", "group_mean",
                     "--controls", "truth", "--metrics", "errors", "-o", str(tmp_path / "off"), "--quiet", "--sandbox",
                     "off"]) == 0
        monkeypatch.setenv("OPENPERT_SANDBOX", "always")
        assert main(["benchmark", "--task", "tiny", "--input", "resources_test/tiny", "-o", str(tmp_path / "bad")]) == 2
        assert "$OPENPERT_SANDBOX is 'always'" in capsys.readouterr().err
    finally:
        monkeypatch.undo()
        reset_sandbox_probe()


def test_a_failed_run_component_keeps_its_work_dir_but_not_its_private_tmp(project_copy, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(project_copy)
    script = project_copy / "src/tiny/methods/fail_raise/script.py"
    script.write_text(script.read_text().replace("## VIASH END\n", "## VIASH END\nimport os\n"
                      "open(os.path.join(os.environ['TMPDIR'], 'scratch'), 'wb').write(bytes(1 << 20))\n", 1))
    work = tmp_path / "work"
    code = main(["run-component", "src/tiny/methods/fail_raise/config.vsh.yaml", "--work-dir", str(work),
                 "--input_train", "resources_test/tiny/syn/train.h5ad", "--input_test", "resources_test/tiny/syn/test.h5ad",
                 "--output", str(tmp_path / "q.h5ad")])
    assert code == 1 and "this method fails on purpose" in capsys.readouterr().err
    assert (work / "output.log").is_file()
    assert not (work / ".tmp").exists() and not (work / ".home").exists()


def test_the_console_shows_a_failure_s_reason_in_full(fixture_runs, tiny_task, tmp_path, capsys):
    """A reason is wrapped at word boundaries, never cut mid-word."""
    import argparse
    import copy

    from openpert.cli import _report_task

    _, mixed, _, _ = fixture_runs
    results = copy.deepcopy(mixed)
    reason = "invalid output --output: " + " ".join(f"column{i} should be numeric, found dtype object" for i in range(12))
    results["failures"][0]["reason"] = reason
    _report_task(argparse.Namespace(output=str(tmp_path)), tiny_task, results)
    out = capsys.readouterr().out
    assert " ".join(out.split()).count(reason) == 1


def test_datasets_of_several_tasks_go_each_to_its_task(project_copy, tmp_path, capsys, monkeypatch):
    import argparse
    import shutil

    from openpert.cli import _datasets_per_task
    from openpert.config.task import Task

    # A second task, a copy of the first, whose only dataset is named otherwise.
    copy_tiny_task(project_copy, "tiny2")
    shutil.copytree(project_copy / "resources_test" / "tiny" / "syn", project_copy / "resources_test" / "tiny2" / "other")
    tasks = [Task(project_copy / "src" / name) for name in ("tiny", "tiny2")]
    ns = argparse.Namespace(datasets=["other", "syn"], input=str(project_copy / "resources_test"))
    assert _datasets_per_task(ns, tasks) == {"tiny": ["syn"], "tiny2": ["other"]}
    ns.datasets = ["syn"]
    assert _datasets_per_task(ns, tasks) == {"tiny": ["syn"], "tiny2": []}
    ns.datasets = ["syn", "nowhere"]
    with pytest.raises(ConfigError, match="no dataset nowhere in any of the tasks tiny, tiny2"):
        _datasets_per_task(ns, tasks)
    # Without --input, the ids are those the dataset components declare (syn_a, syn_b in both copies).
    ns.input, ns.datasets = None, ["syn_b"]
    assert _datasets_per_task(ns, tasks) == {"tiny": ["syn_b"], "tiny2": ["syn_b"]}

    # The command runs only the task that has the dataset named.
    monkeypatch.chdir(project_copy)
    out = tmp_path / "out"
    code = main(["benchmark", "--task", "tiny", "tiny2", "--input", "resources_test", "--datasets", "other",
                 "--methods", "group_mean", "--controls", "truth", "--metrics", "errors", "-o", str(out), "--sandbox", "off",
                 "--quiet"])
    assert code == 0
    assert "has none of --datasets other: left out" in capsys.readouterr().err
    assert (out / "tiny2" / "results.json").is_file() and not (out / "tiny").exists()
