"""How numbers, durations, sizes and failures are written on the results website.

Every figure, table cell and CSV label goes through these functions, so a test can format a value
from ``results.json`` the same way and find it on the page.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

#: What a cell shows when there is no value.
MISSING = "–"

#: Exit codes that schedulers use with a fixed meaning (see ``openpert.run.records``).
EXIT_MEMORY = 137
EXIT_TIME = 143
EXIT_INVALID = -1


def format_number(value: float | int | None, digits: int = 3) -> str:
    """Format a score or metric value to a number of significant digits.

    Parameters
    ----------
    value
        The number; ``None`` stands for a missing value.
    digits
        Significant digits shown. Trailing zeros are kept (``0.500``), so a column of scores
        reads at one precision.

    Returns
    -------
    str
        ``"0.612"``, ``"24.4"``, ``"0.0123"`` for ordinary magnitudes; scientific notation
        (``"1.23e-05"``, ``"1.23e+05"``) when fixed-point would need more than ``digits``
        significant digits or hide them all; :data:`MISSING` for ``None``.
    """
    if value is None:
        return MISSING
    x = float(value)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == 0:
        # Also folds -0.0, which would otherwise print as "-0.00".
        return f"{0:.{max(digits - 1, 0)}f}"
    text = f"{x:#.{digits}g}"
    # "#" keeps trailing zeros but also leaves a bare point ("100."); drop it.
    mantissa, sep, exponent = text.partition("e")
    return mantissa.rstrip(".") + sep + exponent


def format_count(value: float | int | None) -> str:
    """Format a count (items, permutations, jobs) as an integer with thousands separators.

    Parameters
    ----------
    value
        The count. JSON writers may store it as a float (``21.0``); a value that is not a whole
        number is not a count and falls back to :func:`format_number`.

    Returns
    -------
    str
        ``"21"``, ``"10,000"``; :data:`MISSING` for ``None``.
    """
    if value is None or isinstance(value, bool):
        return MISSING if value is None else format_bool(value)
    x = float(value)
    if not math.isfinite(x) or x != round(x):
        return format_number(x)
    return f"{int(round(x)):,}"


def format_rank(value: float | int | None) -> str:
    """Format a rank as an integer (``1.0`` in ``results.json`` reads ``"1"``).

    Parameters
    ----------
    value
        The rank; ``None`` for unranked (control) methods.

    Returns
    -------
    str
        The rank, :data:`MISSING` for ``None``.
    """
    if value is None or isinstance(value, bool):
        return MISSING
    x = float(value)
    if not math.isfinite(x):
        return MISSING
    return str(int(round(x)))


def format_p_value(value: float | None) -> str:
    """Format a p-value in scientific notation with three significant digits.

    Parameters
    ----------
    value
        The p-value.

    Returns
    -------
    str
        ``"2.49e-01"``, ``"1.00e-04"``: one notation whatever the magnitude, so very small
        p-values never round to zero; :data:`MISSING` for ``None``.
    """
    if value is None or isinstance(value, bool):
        return MISSING
    x = float(value)
    if math.isnan(x):
        return "NaN"
    return f"{x:.2e}"


def format_bool(value: Any) -> str:
    """Format a boolean as a mark: ``"✓"`` for true, ``"✗"`` for false.

    Parameters
    ----------
    value
        A boolean; ``None`` when missing.

    Returns
    -------
    str
        The mark, :data:`MISSING` for ``None``.
    """
    if value is None:
        return MISSING
    return "✓" if value else "✗"


#: Column names (or their last ``_`` part) that hold p-values, counts and ranks in free-form tables.
_P_VALUE_NAMES = {"p", "p_value", "pvalue", "pval", "p_adj", "padj", "q_value", "qvalue", "fdr", "p_value_adjusted"}
_COUNT_NAMES = {"n", "count", "n_items", "n_permutations", "n_bootstrap", "n_genes", "n_cells", "n_perturbations",
                "n_methods", "n_datasets", "n_pairs", "n_test", "n_train", "seed", "size", "k", "top_k"}
_RANK_NAMES = {"rank", "ranking"}


def value_kind(column: str, values: Sequence[Any] = ()) -> str:
    """Tell how a column of a free-form table is to be formatted.

    Parameters
    ----------
    column
        The column's name (e.g. ``p_value``, ``n_items``, ``slope``).
    values
        The column's values; booleans and all-integer columns are recognised from them.

    Returns
    -------
    str
        ``"bool"``, ``"p_value"``, ``"rank"``, ``"count"``, ``"score"`` or ``"text"``.
    """
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "bool"
    if present and not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "text"
    name = column.lower()
    if name in _P_VALUE_NAMES or name.endswith(("_p_value", "_pvalue", "_pval", "_q_value", "_fdr")) or name.startswith("p_value"):
        return "p_value"
    if name in _RANK_NAMES or name.endswith("_rank"):
        return "rank"
    if name in _COUNT_NAMES or name.startswith("n_") or name.endswith(("_count", "_n")):
        return "count"
    if present and all(isinstance(v, int) for v in present):
        return "count"
    return "score"


def format_value(value: Any, kind: str) -> str:
    """Format a value of a free-form table by its kind (see :func:`value_kind`).

    Parameters
    ----------
    value
        The value.
    kind
        ``"bool"``, ``"p_value"``, ``"rank"``, ``"count"``, ``"score"`` or ``"text"``.

    Returns
    -------
    str
        The value for display; :data:`MISSING` for ``None``.
    """
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return format_bool(value)
    if not isinstance(value, (int, float)):
        return format_parameter(value)
    return {"p_value": format_p_value, "rank": format_rank, "count": format_count}.get(kind, format_number)(value)


def format_ci(
    value: float | None, low: float | None, high: float | None, digits: int = 3
) -> str:
    """Format a value with its 95% confidence interval.

    Parameters
    ----------
    value, low, high
        The estimate and the interval's bounds; either bound may be ``None``.
    digits
        Passed to :func:`format_number`.

    Returns
    -------
    str
        ``"0.612 [0.590, 0.634]"``, or only the value when the interval is unknown.
    """
    text = format_number(value, digits)
    if value is None or low is None or high is None:
        return text
    return f"{text} [{format_number(low, digits)}, {format_number(high, digits)}]"


def format_duration(seconds: float | None) -> str:
    """Format a wall time in seconds as ``"12.3 s"``, ``"2 min 05 s"`` or ``"1 h 02 min"``.

    Parameters
    ----------
    seconds
        The duration; ``None`` when it was not measured.

    Returns
    -------
    str
        The duration for display, :data:`MISSING` for ``None``.
    """
    if seconds is None or not math.isfinite(float(seconds)):
        return MISSING
    s = float(seconds)
    if s < 60:
        return f"{s:.1f} s"
    total = int(round(s))
    if total < 3600:
        return f"{total // 60} min {total % 60:02d} s"
    return f"{total // 3600} h {(total % 3600) // 60:02d} min"


def format_duration_short(seconds: float | None) -> str:
    """Format a wall time compactly for a narrow cell: ``"12 s"``, ``"2.1 min"``, ``"1.2 h"``.

    Parameters
    ----------
    seconds
        The duration; ``None`` when it was not measured.

    Returns
    -------
    str
        The duration, :data:`MISSING` for ``None``.
    """
    if seconds is None or not math.isfinite(float(seconds)):
        return MISSING
    s = float(seconds)
    if s < 10:
        return f"{s:.1f} s"
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def format_memory(megabytes: float | None) -> str:
    """Format a peak memory in megabytes as ``"812 MB"`` or ``"2.1 GB"``.

    Parameters
    ----------
    megabytes
        The peak resident memory; ``None`` when it was not measured.

    Returns
    -------
    str
        The size for display, :data:`MISSING` for ``None``.
    """
    if megabytes is None or not math.isfinite(float(megabytes)):
        return MISSING
    mb = float(megabytes)
    if mb < 1000:
        return f"{mb:.0f} MB"
    return f"{mb / 1000:.1f} GB"


def describe_failure(exit_code: int | None, reason: str | None = None) -> str:
    """Say in a few words why a job failed.

    Parameters
    ----------
    exit_code
        The job's exit code.
    reason
        The one-line reason recorded by the runner.

    Returns
    -------
    str
        ``"memory limit exceeded"`` for 137, ``"time limit exceeded"`` for 143, otherwise the
        recorded reason (or a generic phrase when there is none).
    """
    if exit_code == EXIT_MEMORY:
        return "memory limit exceeded"
    if exit_code == EXIT_TIME:
        return "time limit exceeded"
    if reason:
        return str(reason)
    if exit_code == EXIT_INVALID:
        return "invalid output, or the job never ran"
    if exit_code is None:
        return "failed"
    return f"exited with code {exit_code}"


def failure_label(exit_code: int | None, reason: str | None = None, limit: int | None = None) -> str:
    """Describe a failure with its exit code, as shown in table cells.

    Parameters
    ----------
    exit_code, reason
        See :func:`describe_failure`.
    limit
        Longest reason kept, in characters, for a label short enough for a table cell: absolute
        paths (work folders of the run) are then also cut to their file name. The cell's tooltip
        and the failures list carry the full text.

    Returns
    -------
    str
        E.g. ``"memory limit exceeded (exit 137)"``; with a limit, e.g.
        ``"invalid output --output: …/prediction.h5ad (file_prediction): layers[… (exit -1)"``.
    """
    text = describe_failure(exit_code, reason)
    if limit is not None:
        text = re.sub(r"(?:/[^/\s:'\"()]+)+/([^/\s:'\"()]+)", r"…/\1", text)
        if len(text) > limit:
            text = text[: limit - 1].rstrip() + "…"
    return text if exit_code is None else f"{text} (exit {exit_code})"


def format_parameter(value: Any) -> str:
    """Format a component parameter value the way it would be written in a config file.

    Parameters
    ----------
    value
        Any JSON value.

    Returns
    -------
    str
        Strings as they are, JSON for everything else (``true``, ``null``, ``[1, 2]``).
    """
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A CSV download: a header line, then one line per row, numbers at full precision.

    Parameters
    ----------
    header
        The column names.
    rows
        The values of each row, in column order.

    Returns
    -------
    str
        The CSV text: floats as ``repr`` (it round-trips), booleans ``true``/``false``, ``None``
        empty, lists and objects as JSON (:func:`format_parameter`).
    """
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([_csv_value(v) for v in row] for row in rows)
    return buf.getvalue()


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (dict, list)):
        return format_parameter(value)
    return value


def format_timestamp(value: Any) -> str:
    """Format an ISO 8601 timestamp as ``"2026-11-21 10:00 UTC"``.

    Parameters
    ----------
    value
        The timestamp from ``results.json`` (``created``).

    Returns
    -------
    str
        The time in UTC when it carries an offset, as written when it does not parse, and
        :data:`MISSING` when absent.
    """
    if not value:
        return MISSING
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return str(value)
    if moment.tzinfo is None:
        return moment.strftime("%Y-%m-%d %H:%M")
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
