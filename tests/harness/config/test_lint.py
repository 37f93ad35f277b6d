"""``openpert lint``'s rules on one component: labels fit a results-website column, chance levels are
numbers, and a script reads only the ``par`` keys its config declares."""

from __future__ import annotations

from openpert.config.lint import LABEL_MAX, lint_config, lint_paths, parameter_reads
from openpert.config.viash import read_config


def test_labels_at_most_30_characters(project_copy):
    assert LABEL_MAX == 30
    method = project_copy / "src/tiny/methods/group_mean/config.vsh.yaml"
    metric = project_copy / "src/tiny/metrics/errors/config.vsh.yaml"
    # Exactly 30 characters is fine, for a component and for one of its metrics.
    method.write_text(method.read_text().replace("label: Group mean", "label: " + "G" * 30))
    metric.write_text(metric.read_text().replace("label: RMSE", "label: " + "R" * 30))
    assert not [p for p in lint_config(read_config(method)) if "label" in p]
    assert not [p for p in lint_config(read_config(metric)) if "label" in p]
    # One more is flagged, with the key to fix.
    method.write_text(method.read_text().replace("label: " + "G" * 30, "label: " + "G" * 31))
    metric.write_text(metric.read_text().replace("label: " + "R" * 30, "label: " + "R" * 31))
    assert f"{method}: label: 31 characters; at most 30" in lint_config(read_config(method))
    assert f"{metric}: info.metrics[0].label: 31 characters; at most 30" in lint_config(read_config(metric))


def test_a_chance_level_is_a_number(project_copy):
    metric = project_copy / "src/tiny/metrics/errors/config.vsh.yaml"
    text = metric.read_text()
    first = text.index("maximize:")
    line_end = text.index("\n", first)
    for value, ok in (("0.5", True), ("0", True), ("'0.5'", False), ("true", False)):
        metric.write_text(text[:line_end] + f"\n      chance: {value}" + text[line_end:])
        problems = [p for p in lint_config(read_config(metric)) if "chance" in p]
        assert problems == ([] if ok else [f"{metric}: info.metrics[0].chance: must be a number: the metric's "
                                           "expected value for an uninformative answer"]), value


def test_parameter_reads_are_subscripts_and_get_calls_with_literal_keys():
    source = """
par = {"a": 1}
x = par["input"]
y = par.get("alpha", 0.2)
par["written"] = 3
z = par[name]
w = other["input"]
v = par.get(key)
"""
    assert parameter_reads(source) == [(3, "input"), (4, "alpha")]


def test_a_script_reading_an_undeclared_parameter_names_line_key_and_closest_argument(project_copy):
    config = project_copy / "src/tiny/methods/shrunk_mean/config.vsh.yaml"
    script = config.parent / "script.py"
    # The fixture reads its own --alpha and the --input_train, --input_test, --output that its
    # config merges from the task's API: all declared.
    assert not [p for p in lint_config(read_config(config)) if "par[" in p]
    text = script.read_text()
    lines = text.splitlines()
    alpha_line = next(i for i, line in enumerate(lines, 1) if 'par["alpha"]' in line)
    text = text.replace('par["alpha"]', 'par["alpah"]')
    text += 'extra = par.get("input_tset")\npar["scratch"] = 1\nkey = "output"\nsame = par[key]\n'
    script.write_text(text)
    problems = [p for p in lint_config(read_config(config)) if "par[" in p]
    get_line = len(lines) + 1
    assert problems == [
        f"{script}:{alpha_line}: par['alpah'] is not an argument of {config} (closest declared argument: --alpha)",
        f"{script}:{get_line}: par['input_tset'] is not an argument of {config} (closest declared argument: --input_test)",
    ]


def test_a_script_that_does_not_parse_is_reported_with_its_line(project_copy):
    config = project_copy / "src/tiny/methods/shrunk_mean/config.vsh.yaml"
    script = config.parent / "script.py"
    script.write_text(script.read_text() + "if par['alpha']\n")
    (problem,) = [p for p in lint_config(read_config(config)) if str(script) in p and "parse" in p]
    assert problem.startswith(f"{script}:{len(script.read_text().splitlines())}: does not parse as Python")


def test_every_fixture_component_reads_only_declared_parameters(tiny_project):
    assert not [p for p in lint_paths([tiny_project / "src"]) if "par[" in p]


def test_a_component_naming_no_disk_label_is_told_the_lowest_it_runs_with_and_the_choices(project_copy):
    method = project_copy / "src/tiny/methods/group_mean/config.vsh.yaml"
    assert not [p for p in lint_config(read_config(method)) if "runs with the lowest" in p]
    method.write_text(method.read_text().replace(", lowdisk]", "]"))
    problems = [p for p in lint_config(read_config(method)) if "runs with the lowest" in p]
    assert problems == [f"{method}: runners.directives.label: names no disk label, so it runs with the lowest, "
                        "tinydisk (20 MB): add one of lowdisk, tinydisk"]


def test_a_project_whose_labels_set_no_time_limit_is_a_problem(project_copy):
    from openpert.config.lint import project_problems

    viash = project_copy / "_viash.yaml"
    viash.write_text(viash.read_text().replace(', lowtime : "time = 10.m", tinytime : "time = 4.s"', ""))
    problems = [p for p in project_problems(project_copy, []) if "config_mods" in p]
    assert problems == [f"{viash}: config_mods: no resource label sets a time limit; define one (e.g. lowtime), "
                        "which components naming none run with"]
