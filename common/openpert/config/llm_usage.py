"""The ``llm_usage`` record a language-model component writes into its output's ``uns``, and its checks.

A component that calls a language model accounts for it in one flat mapping of non-negative
integers (written by ``pertsci.llm_usage.usage_record``; documented in ``docs/results_json.md``):

``questions``, ``samples``, ``abstentions``, ``fallbacks``
    Questions asked, answers parsed for them, of those the answers without a usable label
    (unparseable, or an explicit abstention), and questions left without any usable answer and
    scored with the task's default instead.
``prompts``, ``generated``, ``cache_hits``, ``requests``, ``retries``
    Prompts asked (summaries included), of those generated and read from the cache, requests
    sent (retries included) and retries.
``prompt_tokens``, ``completion_tokens``, ``unmetered``
    Tokens the model server reported, and answered requests whose response reported none.
``failed``, ``context_window``
    Prompts the server refused as longer than the model's context window (answered with empty
    texts, so their items took the task's default), and the window in tokens the server stated
    then (0 when none was refused or none stated it; not a count: combined over jobs by its
    largest value, :data:`LARGEST_KEYS`).

A file format declares it as a ``uns`` slot of type ``llm_usage``; the format's validation then
checks it (:func:`usage_problems`) like any other slot of a component's output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["USAGE_KEYS", "LARGEST_KEYS", "usage_problems", "read_usage"]

#: The keys of an ``llm_usage`` record, every one required.
USAGE_KEYS = ("questions", "samples", "abstentions", "fallbacks", "prompts", "generated", "cache_hits", "requests",
              "retries", "prompt_tokens", "completion_tokens", "unmetered", "failed", "context_window")
#: Keys combined over jobs by their largest value rather than summed.
LARGEST_KEYS = ("context_window",)


def _as_count(value: Any) -> int | None:
    """A non-negative whole number as int (numpy scalars and 0-d arrays too), else ``None``."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)) and value >= 0:
        return int(value)
    return None


def usage_problems(value: Any, where: str = "uns['llm_usage']") -> list[str]:
    """What is wrong with an ``llm_usage`` record (empty when it is valid).

    Parameters
    ----------
    value
        The record as read from the file.
    where
        How the messages name it.

    Returns
    -------
    list of str
        Missing or unknown keys, values that are not non-negative integers, and counts that
        contradict each other (more abstentions than samples, more fallbacks than questions,
        fewer samples than questions, more cache hits, generated or failed prompts than prompts,
        failed prompts without a request, a context window without a failed prompt).
    """
    if not isinstance(value, Mapping):
        return [f"{where} should be a mapping of counts, found {type(value).__name__}"]
    problems = []
    missing = [k for k in USAGE_KEYS if k not in value]
    unknown = sorted(str(k) for k in value if k not in USAGE_KEYS)
    if missing:
        problems.append(f"{where} lacks {', '.join(missing)}")
    if unknown:
        problems.append(f"{where} has unknown keys {', '.join(unknown[:5])} (expected {', '.join(USAGE_KEYS)})")
    counts = {}
    for key in USAGE_KEYS:
        if key in value:
            count = _as_count(value[key])
            if count is None:
                problems.append(f"{where}[{key!r}] should be a non-negative integer, found {value[key]!r}")
            else:
                counts[key] = count
    for small, large in (("abstentions", "samples"), ("fallbacks", "questions"), ("questions", "samples"),
                         ("cache_hits", "prompts"), ("generated", "prompts"), ("failed", "prompts")):
        if small in counts and large in counts and counts[small] > counts[large]:
            problems.append(f"{where}: {small} ({counts[small]}) exceeds {large} ({counts[large]})")
    if counts.get("failed") and "requests" in counts and not counts["requests"]:
        problems.append(f"{where}: {counts['failed']} failed prompts without any request")
    if counts.get("context_window") and counts.get("failed") == 0:
        problems.append(f"{where}: a context window ({counts['context_window']}) is stated only by refused prompts, "
                        "and failed is 0")
    return problems


def read_usage(path: Any) -> dict[str, int] | None:
    """The ``llm_usage`` record of an h5ad output, or ``None`` when it has none.

    Only that group of the file is read, and only when it holds scalars (a component's output
    may be large, and hostile).

    Raises
    ------
    ValueError
        Naming the file and every problem, when the record is malformed or the file unreadable.
    """
    import h5py
    from anndata.io import read_elem

    try:
        with h5py.File(path, "r") as fh:
            if "uns" not in fh or "llm_usage" not in fh["uns"]:
                return None
            node = fh["uns"]["llm_usage"]
            if not isinstance(node, h5py.Group) or len(node) > 4 * len(USAGE_KEYS):
                raise ValueError(f"{path}: uns['llm_usage'] should be a mapping of {len(USAGE_KEYS)} counts")
            # Only scalars are read: an output is a component's, and an entry could declare gigabytes.
            arrays = [k for k in node if not isinstance(node[k], h5py.Dataset) or node[k].shape != ()]
            if arrays:
                raise ValueError(f"{path}: uns['llm_usage'] entries must be single counts, not {', '.join(arrays[:5])}")
            value = read_elem(node)
    except (OSError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: cannot read uns['llm_usage']: {type(err).__name__}: {err}") from None
    problems = usage_problems(value)
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return {k: int(np.asarray(value[k])) for k in USAGE_KEYS}
