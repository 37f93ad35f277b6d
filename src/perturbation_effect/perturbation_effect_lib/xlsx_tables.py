"""Reading a sheet of an Office Open XML workbook (``.xlsx``) as a table, with the standard library.

A workbook is a zip archive: ``xl/workbook.xml`` names its sheets and points each, through
``xl/_rels/workbook.xml.rels``, at ``xl/worksheets/sheetN.xml``, whose ``<row>`` elements hold
``<c r="B2" t="...">`` cells. A cell's type ``t`` says where its value is: ``s`` an index into
``xl/sharedStrings.xml``, ``inlineStr`` the text of its ``<is>``, ``str`` a formula's text, ``b`` a
boolean, ``e`` an error, none or ``n`` a number in ``<v>``. That is all a table of published
source data needs; styles, dates and formulas' expressions are not interpreted (a date stays the
serial number Excel stores).

The first row of a sheet is its header. Streaming parsing keeps a sheet of a million cells in
bounded memory beyond the table itself.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path, PurePosixPath
from xml.etree import ElementTree

import pandas as pd

__all__ = ["sheet_names", "read_sheet"]

_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_PKG = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_CELL_REF = re.compile(r"([A-Z]+)(\d+)")


def _sheet_targets(book: zipfile.ZipFile, path: Path) -> dict[str, str]:
    """Sheet name -> its member in the archive, in the workbook's order."""
    try:
        workbook = ElementTree.fromstring(book.read("xl/workbook.xml"))
        rels = ElementTree.fromstring(book.read("xl/_rels/workbook.xml.rels"))
    except KeyError as err:
        raise ValueError(f"{path}: not an xlsx workbook ({err.args[0]})") from None
    targets = {r.get("Id"): r.get("Target", "") for r in rels.iter(f"{_PKG}Relationship")}
    out = {}
    for sheet in workbook.iter(f"{_MAIN}sheet"):
        target = targets.get(sheet.get(f"{_REL}id"), "")
        # Targets are relative to xl/ unless absolute within the package.
        member = target.lstrip("/") if target.startswith("/") else str(PurePosixPath("xl") / target)
        out[str(sheet.get("name"))] = member
    return out


def sheet_names(path: str | Path) -> list[str]:
    """The names of a workbook's sheets, in order.

    Raises
    ------
    ValueError
        Naming the file, when it is not an xlsx workbook.
    """
    path = Path(path)
    with zipfile.ZipFile(path) as book:
        return list(_sheet_targets(book, path))


def _shared_strings(book: zipfile.ZipFile) -> list[str]:
    if "xl/sharedStrings.xml" not in book.namelist():
        return []
    root = ElementTree.fromstring(book.read("xl/sharedStrings.xml"))
    # A shared string is one <t> or several rich-text runs <r><t>, concatenated.
    return ["".join(t.text or "" for t in si.iter(f"{_MAIN}t")) for si in root.iter(f"{_MAIN}si")]


def _column_index(letters: str) -> int:
    index = 0
    for ch in letters:
        index = index * 26 + (ord(ch) - ord("A") + 1)
    return index - 1


def _cell_value(cell: ElementTree.Element, strings: list[str]):
    kind = cell.get("t", "n")
    if kind == "inlineStr":
        return "".join(t.text or "" for t in cell.iter(f"{_MAIN}t"))
    v = cell.find(f"{_MAIN}v")
    text = None if v is None else v.text
    if text is None:
        return None
    if kind == "s":
        return strings[int(text)]
    if kind == "b":
        return text.strip() == "1"
    if kind in ("str", "e"):
        return text
    number = float(text)
    return int(number) if number.is_integer() and "." not in text and "E" not in text.upper() else number


def read_sheet(path: str | Path, sheet: str) -> pd.DataFrame:
    """One sheet of a workbook as a table whose columns are its first row.

    Parameters
    ----------
    path
        The ``.xlsx`` file.
    sheet
        The sheet's name (as the workbook's tabs show it).

    Returns
    -------
    pandas.DataFrame
        One row per row of the sheet after the header; an empty cell is missing (``None``/NaN).
        Numbers are ``int`` when written without a fraction, else ``float``; booleans ``bool``.

    Raises
    ------
    KeyError
        Naming the file and its sheets, when it has no sheet of that name.
    ValueError
        Naming the file, when it is not an xlsx workbook or the sheet has no header row.
    """
    path = Path(path)
    with zipfile.ZipFile(path) as book:
        targets = _sheet_targets(book, path)
        if sheet not in targets:
            raise KeyError(f"{path}: no sheet {sheet!r}; its sheets are {list(targets)}")
        strings = _shared_strings(book)
        rows: list[dict[int, object]] = []
        with book.open(targets[sheet]) as fh:
            for _, element in ElementTree.iterparse(fh, events=("end",)):
                if element.tag != f"{_MAIN}row":
                    continue
                values = {}
                for position, cell in enumerate(element.iter(f"{_MAIN}c")):
                    ref = _CELL_REF.fullmatch(cell.get("r", ""))
                    column = _column_index(ref.group(1)) if ref else position
                    values[column] = _cell_value(cell, strings)
                rows.append(values)
                element.clear()
    if not rows or not rows[0]:
        raise ValueError(f"{path}: sheet {sheet!r} has no header row")
    header = rows[0]
    width = max(header) + 1
    names = [str(header.get(i, f"column_{i + 1}")) for i in range(width)]
    table = pd.DataFrame([[r.get(i) for i in range(width)] for r in rows[1:]], columns=names)
    return table.infer_objects()
