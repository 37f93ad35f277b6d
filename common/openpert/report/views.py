"""Plain view models of what the pages' tables hold, handed to the templates.

A cell's content is either plain text, escaped by the template, or ``Markup`` rendered by another
template; nothing here holds hand-built HTML.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cell:
    """One table cell.

    Attributes
    ----------
    content
        Text (escaped when rendered) or ``Markup``.
    sort
        The value the page script sorts the column by (``data-sort``), when not the text.
    title
        Hover text.
    """

    content: Any = ""
    sort: Any = None
    title: str = ""


@dataclass(frozen=True)
class Column:
    """A table column: its title, and whether it holds numbers (right-aligned, sorted as numbers)."""

    title: str
    numeric: bool = False


@dataclass(frozen=True)
class Table:
    """A table with a caption, column headers and (by default) one row header per row.

    Attributes
    ----------
    caption
        Text or ``Markup``.
    columns
        The columns.
    rows
        Cells per row, in column order.
    table_id
        The table's id (the page script and the CSV downloads refer to it).
    sortable
        The page script sorts it by a click on a header.
    row_headers
        Each row's first cell is its header (``<th scope="row">``).
    css_class
        Extra classes (``"compact"``: only as wide as its content).
    label
        What screen readers announce for its scrolling region (the caption's text by default).
    """

    caption: Any
    columns: Sequence[Column]
    rows: Sequence[Sequence[Cell]] = field(default_factory=list)
    table_id: str | None = None
    sortable: bool = True
    row_headers: bool = True
    css_class: str = ""
    label: str = ""


def cell(content: Any, sort: Any = None, title: str = "") -> Cell:
    """A cell from content given as text, ``Markup`` or ``(content, sort key)``.

    Parameters
    ----------
    content
        The content, or a pair of the content and its sort key.
    sort
        The sort key when ``content`` is not a pair.
    title
        Hover text.

    Returns
    -------
    Cell
        The cell.
    """
    if isinstance(content, Cell):
        return content
    if isinstance(content, tuple):
        content, sort = content
    return Cell(content, sort, title)


def row_cells(table: Table, row: Sequence[Cell]) -> list[tuple[Cell, str, bool]]:
    """A row's cells as the ``data_table`` macro writes them: each with its tag and its column's number flag.

    Parameters
    ----------
    table
        The table.
    row
        One of its rows.

    Returns
    -------
    list of (Cell, str, bool)
        Per cell: the cell, ``"th"`` for the row header (the first cell when the table has row
        headers) else ``"td"``, and whether its column holds numbers (``False`` past the last column).
    """
    columns = table.columns
    first = "th" if table.row_headers else "td"
    return [(c, first if i == 0 else "td", columns[i].numeric if i < len(columns) else False) for i, c in enumerate(row)]
