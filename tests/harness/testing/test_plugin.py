"""The component-test plugin's runs of build components (``openpert.testing.plugin``)."""

from __future__ import annotations

from project_paths import ROOT

from openpert.config.viash import read_config
from openpert.run.component import RunResult
from openpert.testing import plugin

BUILD = ROOT / "src" / "pertreasonqa" / "datasets" / "op3_chemical" / "config.vsh.yaml"


def test_a_builds_test_runs_once_per_test_run_and_each_test_without_the_run_runs_it_itself(tmp_path, own_run, monkeypatch):
    config = read_config(BUILD)
    assert config.build_entries
    runs = []

    def run_test(config, work_dir, extra_args, run_folders):
        runs.append(work_dir)
        return RunResult(0, "", 1.0, 10.0, {"output_items": work_dir / "items.parquet"}, work_dir / "log")

    monkeypatch.setattr(plugin, "_run_component_test", run_test)
    run = own_run
    first = plugin.run_component_test(config, tmp_path / "own_test", run)
    second = plugin.run_component_test(config, tmp_path / "cut_from_it", run)
    assert len(runs) == 1 and first == second
    assert runs[0].is_relative_to(tmp_path / "run")  # in the run's folder, kept for the tests after it
    plugin.run_component_test(config, tmp_path / "alone")
    assert runs[1:] == [tmp_path / "alone"]
