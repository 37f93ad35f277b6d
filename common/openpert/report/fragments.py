"""Small fragments (labels, code, marks) and table views that the section and component templates share.

The fragments are macros of ``templates/sections/cells.html`` (and ``macros.html``), called from
the Python that builds a table's cells; each returns ``Markup``, so a cell holds no hand-built HTML.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from markupsafe import Markup

from openpert.report.templating import macro
from openpert.report.views import Column, Table, cell

CELLS = "sections/cells.html"


def fragment(name: str) -> Callable[..., Markup]:
    """A macro of ``sections/cells.html`` (``code``, ``bool_mark``, ``label_link``, ...).

    Parameters
    ----------
    name
        The macro's name.

    Returns
    -------
    callable
        The macro; it returns ``Markup``.
    """
    return macro(name, CELLS)


def label(text: Any) -> Markup:
    """A short label with its full text on hover (the ``label_span`` macro).

    Parameters
    ----------
    text
        The full label.

    Returns
    -------
    Markup
        The label.
    """
    if type(text) is str:
        return _plain_label(text)
    return macro("label_span")(text)


# The same few names (methods, datasets, metrics) label thousands of cells of a task's tables.
@lru_cache(maxsize=4096)
def _plain_label(text: str) -> Markup:
    return macro("label_span")(text)


def badge(text: Any, kind: Any = "") -> Markup:
    """A small pill label (the ``badge`` macro), its kind reduced to a safe class name.

    Parameters
    ----------
    text
        The label.
    kind
        Modifier class (``"positive"``, ``"failed"``); it may come from ``results.json``, so
        anything but lowercase letters, digits and hyphens becomes a hyphen.

    Returns
    -------
    Markup
        The badge.
    """
    return macro("badge")(text, badge_kind(kind))


def badge_kind(kind: Any) -> str:
    """A badge's kind as a class name: lowercase letters, digits and hyphens only.

    Parameters
    ----------
    kind
        The kind, perhaps from ``results.json``.

    Returns
    -------
    str
        The kind with every other character replaced by a hyphen.
    """
    return re.sub(r"[^a-z0-9-]", "-", str(kind).lower())


def code(text: Any, css_class: str | None = None, after: Any = "") -> Markup:
    """Text set as ``<code>``, with an optional class and text after it.

    Parameters
    ----------
    text
        The text.
    css_class
        The element's class.
    after
        Text (or ``Markup``) placed right after the element.

    Returns
    -------
    Markup
        The fragment.
    """
    return fragment("code")(text, css_class, after)


def table(
    caption: Any,
    titles: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    table_id: str | None = None,
    numeric: Sequence[bool] | None = None,
    sortable: bool = True,
    row_headers: bool = True,
    css_class: str = "",
) -> Table:
    """A table view from column titles and rows of cells, labelled by its caption.

    Parameters
    ----------
    caption
        The caption (text).
    titles
        Column titles.
    rows
        Per row, its cells: text, ``Markup``, a :class:`~openpert.report.views.Cell`, or
        ``(content, sort key)``.
    numeric
        Per column, whether it holds numbers.
    table_id, sortable, row_headers, css_class
        As :class:`~openpert.report.views.Table` holds them.

    Returns
    -------
    Table
        The view, for the ``data_table`` macro.
    """
    flags = list(numeric or [])
    columns = [Column(str(t), bool(flags[i]) if i < len(flags) else False) for i, t in enumerate(titles)]
    body = [[cell(c) for c in row] for row in rows]
    return Table(caption, columns, body, table_id=table_id, sortable=sortable, row_headers=row_headers,
                 css_class=css_class, label=str(caption))



def sort_key(value: Any) -> str:
    """What a number's cell sorts by (``data-sort``): its exact value, empty when missing.

    Parameters
    ----------
    value
        A number, or ``None``.

    Returns
    -------
    str
        ``repr`` of the value as a float (it round-trips), ``""`` for ``None``.
    """
    return "" if value is None else repr(float(value))


def paragraphs(text: str) -> Markup:
    """The report's own text as paragraphs, split on blank lines (a section's intro).

    Parameters
    ----------
    text
        Plain text (escaped when rendered).

    Returns
    -------
    Markup
        One ``<p>`` per paragraph (the ``paragraphs`` macro).
    """
    return macro("paragraphs")(text)
