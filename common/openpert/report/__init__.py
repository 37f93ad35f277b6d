"""The results website: static HTML pages rendered from each task's ``results.json``.

``render_site`` is the entry point (``openpert report`` calls it). The formatting functions are
public so that tests and other tools write numbers exactly as the pages do.
"""

from openpert.report.formatting import (
    MISSING,
    describe_failure,
    failure_label,
    format_bool,
    format_ci,
    format_count,
    format_duration,
    format_memory,
    format_number,
    format_p_value,
    format_rank,
    format_timestamp,
)
from openpert.report.site import page_weight, render_site

__all__ = [
    "MISSING",
    "describe_failure",
    "failure_label",
    "format_bool",
    "format_ci",
    "format_count",
    "format_duration",
    "format_memory",
    "format_number",
    "format_p_value",
    "format_rank",
    "format_timestamp",
    "page_weight",
    "render_site",
]
