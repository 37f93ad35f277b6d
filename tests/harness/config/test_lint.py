"""``openpert lint``'s label rule: component and metric labels fit a results-website column."""

from __future__ import annotations

from openpert.config.lint import LABEL_MAX, lint_config
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
