"""The table of what language-model components asked and got back, for the task's and the methods' pages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from openpert.report.formatting import MISSING, format_count
from openpert.report.fragments import code, fragment, label, sort_key, table
from openpert.report.task_results import TaskResults
from openpert.report.templating import render

__all__ = ["llm_usage_table", "llm_model_sentence"]

_COUNTS = ("questions", "samples", "abstentions")
_CALLS = ("requests", "retries", "cache_hits")
_TOKENS = ("prompt_tokens", "completion_tokens")


def llm_usage_table(results: TaskResults, rows: Sequence[dict[str, Any]], table_id: str) -> Markup:
    """Rows of ``results.json``'s ``llm_usage`` as a table, flagged rates marked.

    Parameters
    ----------
    results
        The task's results (labels and QC flags).
    rows
        The ``llm_usage`` rows to show.
    table_id
        The table's id.

    Returns
    -------
    Markup
        The table, and a note when some responses reported no token counts
        (``sections/llm_usage.html``).
    """
    body = []
    for r in rows:
        judge = r.get("stage") == "metric"
        # A judge's gradings of the method's answers carry the judge's own flags.
        names = ("llm_judge_abstentions", "llm_judge_prompt_too_long") if judge else ("llm_abstentions", "llm_prompt_too_long")
        flag, too_long = (results.abstention_flag(r.get("dataset_id"), r.get("method_id") or None, name) for name in names)
        rate = r.get("abstention_rate")
        shown = MISSING if rate is None else f"{100 * float(rate):.1f}%"
        mark = " *" if r.get("unmetered") else ""
        body.append(
            [
                label(results.method_label(r.get("method_id"))) if r.get("method_id") else MISSING,
                label(results.dataset_label(r.get("dataset_id"))),
                code(r.get("component"), after=" (judge)" if judge else ""),
                *[_count(r.get(k)) for k in _COUNTS],
                (fragment("flagged_rate")(shown, None if flag is None else flag.get("message")), sort_key(rate)),
                _count(r.get("fallbacks")),
                (fragment("flagged_rate")(format_count(r.get("failed")), None if too_long is None else too_long.get("message")),
                 sort_key(r.get("failed"))),
                *[_count(r.get(k)) for k in _CALLS],
                *[_count(r.get(k), mark) for k in _TOKENS],
            ]
        )
    view = table(
        f"Language-model use per method and dataset ({len(body)})",
        ["Method", "Dataset", "Component", "Questions", "Samples", "Abstained", "Abstention rate", "Fallbacks",
         "Too long", "Requests", "Retries", "Cache hits", "Prompt tokens", "Completion tokens"],
        body,
        table_id=table_id,
    )
    return render("sections/llm_usage.html", table=view, unmetered=any(r.get("unmetered") for r in rows))


def llm_model_sentence(llm: Mapping[str, Any] | None) -> str:
    """What answered the language-model components, from the run's ``provenance.llm``.

    Parameters
    ----------
    llm
        ``provenance["llm"]`` of ``results.json`` (model, its file's sha256, the cap on completions,
        the ``--llm-datasets`` patterns).

    Returns
    -------
    str
        One sentence; a run whose completions were capped says that its scores check the path and
        are no result of the methods' models. Empty when the run recorded nothing.
    """
    if not llm:
        return ""
    model = llm.get("model") or "the first model its server lists"
    digest = f" (GGUF sha256 {str(llm['model_sha256'])[:12]}…)" if llm.get("model_sha256") else ""
    parts = [f"Answers came from {model}{digest}"]
    if llm.get("datasets"):
        parts.append(f"on the datasets matching {', '.join(str(p) for p in llm['datasets'])}")
    sentence = " ".join(parts)
    if llm.get("max_tokens"):
        return (f"{sentence}, with every completion capped at {int(llm['max_tokens'])} tokens: these scores check "
                "that the components run end to end on a real model; they are no result of the methods' own models.")
    return f"{sentence}."


def _count(value: Any, mark: str = "") -> tuple[str, str]:
    return format_count(value) + mark, sort_key(value)
