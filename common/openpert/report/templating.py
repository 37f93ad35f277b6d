"""Rendering the site's pages and fragments from Jinja2 templates, with HTML escaping on by default.

Python builds plain view models (:mod:`openpert.report.views`) of what each page and table holds;
the markup lives in ``report/templates/``. Autoescape is on for every template, so a string from
``results.json`` is escaped wherever it lands unless it was already made safe (a
:class:`markupsafe.Markup` from another template or from :mod:`openpert.report.markdown`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, lru_cache
from typing import Any

import jinja2
from markupsafe import Markup

import openpert
from openpert.report import formatting, text_parts, views

TEMPLATE_PACKAGE = ("openpert.report", "templates")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The site's template environment (built once).

    Returns
    -------
    jinja2.Environment
        Templates from ``openpert/report/templates``, autoescaped, with undefined names an error,
        and the report's number formats the templates use as filters (``{{ value | count }}``).
    """
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(*TEMPLATE_PACKAGE),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        # The templates are package data that never change while the site renders: checking each
        # one's file on every lookup (thousands per page) would cost more than rendering it.
        auto_reload=False,
    )
    env.filters.update(
        short_label=text_parts.short_label,
        safe_url=text_parts.safe_url,
        paragraph_blocks=text_parts.paragraph_blocks,
        count=formatting.format_count,
        rank=formatting.format_rank,
        memory=formatting.format_memory,
        timestamp=formatting.format_timestamp,
    )
    env.globals.update(
        label_parts=text_parts.label_parts,
        doi_parts=text_parts.doi_parts,
        reference_parts=text_parts.reference_parts,
        link_parts=text_parts.link_parts,
        row_cells=views.row_cells,
    )
    env.globals.update(site_name=text_parts.SITE_NAME, openpert_version=openpert.__version__, missing=formatting.MISSING)
    return env


def render(template: str, /, **context: Any) -> Markup:
    """Render one template with its view model.

    Parameters
    ----------
    template
        Its path under ``report/templates`` (``"task_page.html"``).
    **context
        The view model: plain values, dataclasses, and ``Markup`` for fragments already rendered.

    Returns
    -------
    Markup
        The rendered HTML, safe to place in another template unescaped.
    """
    return Markup(environment().get_template(template).render(**context))


@cache
def macro(name: str, template: str = "macros.html") -> Callable[..., Markup]:
    """A macro of a template, callable from Python (its result is ``Markup``).

    Parameters
    ----------
    name
        The macro's name.
    template
        The template that defines it.

    Returns
    -------
    callable
        The macro (looked up once: the cells of a table call the same few macros thousands of times).
    """
    return getattr(environment().get_template(template).module, name)
