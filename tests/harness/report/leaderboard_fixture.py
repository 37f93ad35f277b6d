"""Small results for the leaderboard and overview tests: hostile texts, a metric a method lacks, headline-only tests."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from openpert.report.task_results import TaskResults

#: Text that must reach a page as text, never as markup or a live link.
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
HOSTILE_URL = "javascript:alert(1)"


def small_results(**extra: Any) -> TaskResults:
    """Two datasets, a headline metric ``h`` and a diagnostic ``x``; methods ``a`` (best), ``b``, ``c``; a positive control.

    ``c`` has no value of ``x`` anywhere (it does not address it). ``b`` is significantly worse than ``a``
    on ``h`` on d1, not on d2, and worse on ``x`` everywhere (diagnostic tests, which count in no group).
    """
    scores = []
    for did in ("d1", "d2"):
        for mid, scaled in (("a", 0.8), ("b", 0.6), ("c", 0.3), ("pos", 1.0)):
            scores.append({"dataset_id": did, "method_id": mid, "metric_id": "h", "raw": scaled, "scaled": scaled,
                           "ci_low": scaled - 0.05, "ci_high": scaled + 0.05, "n_items": 40})
            if mid != "c":
                scores.append({"dataset_id": did, "method_id": mid, "metric_id": "x", "raw": scaled, "scaled": scaled})
    data = {
        "task": {"name": "t", "label": "Task"},
        "datasets": [{"dataset_id": "d1", "dataset_name": "First"}, {"dataset_id": "d2", "dataset_name": "Second"}],
        "metrics": [{"id": "x", "label": "Diag", "maximize": False}, {"id": "h", "label": "Head"}],
        "headline_metrics": ["h"],
        "methods": [{"id": i, "type": "method", "label": i.upper()} for i in ("a", "b", "c")]
        + [{"id": "pos", "type": "control_method", "control": "positive", "label": "Positive"}],
        "scores": scores,
        "overall": [{"method_id": "a", "score": 0.8}, {"method_id": "b", "score": 0.6}, {"method_id": "c", "score": 0.3},
                    {"method_id": "pos", "score": 1.0}],
        "comparisons": [
            {"dataset_id": "d1", "metric_id": "h", "method_id": "b", "best_method_id": "a", "p_value": 0.01,
             "significant": True},
            {"dataset_id": "d2", "metric_id": "h", "method_id": "b", "best_method_id": "a", "p_value": 0.4,
             "significant": False},
            {"dataset_id": "d1", "metric_id": "x", "method_id": "b", "best_method_id": "a", "p_value": 0.001,
             "significant": True},
            {"dataset_id": "d2", "metric_id": "x", "method_id": "b", "best_method_id": "a", "p_value": 0.001,
             "significant": True},
        ],
    }
    data.update(extra)
    return TaskResults(data, Path("."))


def hostile_results() -> TaskResults:
    """:func:`small_results` with markup and ``javascript:`` links in every text a leaderboard shows."""
    data = dict(small_results().data)
    data["task"] = {"name": "t", "label": "Task " + HOSTILE}
    data["datasets"] = [{"dataset_id": "d1", "dataset_name": "First " + HOSTILE, "dataset_summary": HOSTILE},
                        {"dataset_id": "d2", "dataset_name": HOSTILE_URL}]
    data["metrics"] = [{"id": "x", "label": "Diag " + HOSTILE, "summary": f"[click]({HOSTILE_URL}) {HOSTILE}"},
                       {"id": "h", "label": HOSTILE_URL, "summary": HOSTILE}]
    data["methods"] = [{"id": "a", "type": "method", "label": "A " + HOSTILE, "summary": f"[c]({HOSTILE_URL}) {HOSTILE}"},
                       {"id": "b", "type": "method", "label": HOSTILE_URL},
                       {"id": "c", "type": "method", "label": "C"},
                       {"id": "pos", "type": "control_method", "control": HOSTILE, "label": "Positive"}]
    data["qc"] = [{"flag": "llm_abstentions", "dataset_id": "d1", "method_id": "a", "message": HOSTILE}]
    data["failures"] = [{"dataset_id": "d2", "method_id": "c", "component": "c", "stage": "method", "exit_code": 1,
                         "reason": HOSTILE, "job_id": "j"}]
    return TaskResults(data, Path("."))


class ElementCounter(HTMLParser):
    """Counts the elements of an HTML fragment and collects its links and event-handler attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.hrefs: list[str] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for name, value in attrs:
            if name in ("href", "src"):
                self.hrefs.append(value or "")
            if name.startswith("on"):
                self.handlers.append(name)


def parse(fragment: str) -> ElementCounter:
    """The elements of an HTML fragment."""
    counter = ElementCounter()
    counter.feed(str(fragment))
    counter.close()
    return counter
