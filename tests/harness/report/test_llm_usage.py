"""The language-model use table: counts per method and dataset, flagged rates, hostile text kept inert."""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup
from report_fixture import HOSTILE, build_results
from test_site import norm, parse

from openpert.report.formatting import MISSING
from openpert.report.llm_usage import llm_model_sentence, llm_usage_table
from openpert.report.task_results import TaskResults


def _results() -> TaskResults:
    data = build_results()
    data["qc"] = [{"flag": "llm_abstentions", "dataset_id": "k562", "method_id": "big_llm", "metric_id": None,
                   "message": f"75% abstained {HOSTILE}"},
                  {"flag": "llm_prompt_too_long", "dataset_id": "k562", "method_id": "big_llm", "metric_id": None,
                   "message": "big_llm on k562: 3 of 1810 prompts were longer than the model's context window"}]
    return TaskResults(data, Path("."))


def _table(tmp_path: Path, html: str):
    page = tmp_path / "page.html"
    page.write_text(f"<html><body>{html}</body></html>")
    return parse(page)


def test_rows_counts_flags_and_hostile_text(tmp_path: Path) -> None:
    rows = [
        {"dataset_id": "k562", "method_id": "big_llm", "component": f"llm{HOSTILE}", "stage": "method",
         "questions": 40, "samples": 120, "abstentions": 90, "abstention_rate": 0.75, "fallbacks": 30,
         "requests": 1810, "retries": 1, "cache_hits": 20, "prompt_tokens": 123456, "completion_tokens": 7890,
         "failed": 3, "context_window": 4096},
        {"dataset_id": "rpe1", "method_id": None, "component": "judge", "stage": "metric", "abstention_rate": None,
         "prompt_tokens": 5, "unmetered": 2},
    ]
    html = llm_usage_table(_results(), rows, "usage")
    assert isinstance(html, Markup)
    assert HOSTILE not in html and "&lt;script&gt;" in html
    doc = _table(tmp_path, html)
    body = [[norm(c.text()) for c in r.elements()] for r in doc.find("table", id="usage").find("tbody").find_all("tr")]
    assert body[0][2:8] == [f"llm{HOSTILE}", "40", "120", "90", "75.0% flagged", "30"]
    assert body[0][8:10] == ["3 flagged", "1,810"]
    assert body[1][0] == MISSING and body[1][2] == "judge (judge)" and body[1][6] == MISSING and body[1][8] == MISSING
    assert body[1][12] == "5 *"
    flag, too_long = doc.find_all("span", class_="tag-abstains")
    assert flag.attrs["title"] == f"75% abstained {HOSTILE}"  # the attribute holds the text, escaped in the markup
    assert too_long.attrs["title"].startswith("big_llm on k562: 3 of 1810 prompts were longer")
    assert "lower bounds" in norm(doc.find("p", class_="note").text())
    rate = doc.find("table", id="usage").find("tbody").find_all("tr")[0].elements()[6]
    assert rate.attrs["data-sort"] == "0.75"


def test_no_note_without_unmetered_responses() -> None:
    rows = [{"dataset_id": "k562", "method_id": "mlp", "component": "mlp", "stage": "method", "prompt_tokens": 3}]
    html = llm_usage_table(_results(), rows, "usage")
    assert 'class="note"' not in html and "lower bounds" not in html and "flagged" not in html


def test_the_model_sentence_names_the_model_its_digest_and_the_cap() -> None:
    assert llm_model_sentence(None) == ""
    capped = llm_model_sentence({"model": "smollm2-135m", "model_sha256": "b179c9523d0e" + "0" * 52, "max_tokens": 32,
                                 "datasets": ["*llm*"]})
    assert capped.startswith("Answers came from smollm2-135m (GGUF sha256 b179c9523d0e…) on the datasets matching *llm*")
    assert "capped at 32 tokens" in capped and "no result of the methods' own models" in capped
    full = llm_model_sentence({"model": None, "model_sha256": None, "max_tokens": None, "datasets": None})
    assert full == "Answers came from the first model its server lists."
