"""How numbers, durations, sizes and failures are written on the results website.

Every figure, table cell and CSV label goes through these functions, so a test can format a value
from ``results.json`` the same way and find it on the page.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from typing import Any

#: What a cell shows when there is no value.
MISSING = "–"

#: Exit codes that schedulers use with a fixed meaning (see ``openpert.run.records``).
EXIT_MEMORY = 137
EXIT_TIME = 143
EXIT_INVALID = -1


def format_number(value: float | int | None, digits: int = 3) -> str:
    """Format a score or metric value for display.

    Parameters
    ----------
    value
        The number; ``None`` stands for a missing value.
    digits
        Decimals shown for ordinary magnitudes (significant digits for very small or very
        large ones).

    Returns
    -------
    str
        ``"0.612"`` for ordinary values, scientific notation (``"1.23e-05"``) for values whose
        fixed-point form would hide every significant digit or be unreadably long, and
        :data:`MISSING` for ``None``.
    """
    if value is None:
        return MISSING
    x = float(value)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == 0:
        # Also folds -0.0, which would otherwise print as "-0.000".
        return f"{0:.{digits}f}"
    if 10.0**-digits <= abs(x) < 1e5:
        return f"{x:.{digits}f}"
    return f"{x:.{digits}g}"


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


def failure_label(exit_code: int | None, reason: str | None = None) -> str:
    """Describe a failure with its exit code, as shown in table cells.

    Parameters
    ----------
    exit_code, reason
        See :func:`describe_failure`.

    Returns
    -------
    str
        E.g. ``"memory limit exceeded (exit 137)"``.
    """
    text = describe_failure(exit_code, reason)
    if exit_code is None:
        return text
    return f"{text} (exit {exit_code})"


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


def brief_failure_label(exit_code: int | None, reason: str | None = None, limit: int = 72) -> str:
    """A failure label short enough for a table cell.

    Absolute paths (work folders of the run) are cut to their file name and the reason is
    truncated; the cell's tooltip and the failures list carry the full text.

    Parameters
    ----------
    exit_code, reason
        See :func:`describe_failure`.
    limit
        Longest reason kept, in characters.

    Returns
    -------
    str
        E.g. ``"invalid output --output: …/prediction.h5ad (file_prediction): layers[…"`` with
        ``" (exit -1)"`` appended.
    """
    text = re.sub(r"(?:/[^/\s:'\"()]+)+/([^/\s:'\"()]+)", r"…/\1", describe_failure(exit_code, reason))
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text if exit_code is None else f"{text} (exit {exit_code})"
