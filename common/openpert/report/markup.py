"""The building blocks every page shares, called from Python: labels, links, tables, sections, the page frame.

Each renders a macro of ``templates/macros.html`` (or ``base.html``), where the markup is and where
autoescape escapes every string from ``results.json``; links from the file are only made clickable
when they are http(s) or DOI links. Templates call the macros themselves; these are for the Python
that still assembles fragments, and return plain ``str`` (HTML) so that concatenation with other
fragments does not escape them twice.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import cache
from typing import Any
from urllib.parse import quote, urlparse

from markupsafe import Markup

from openpert.config.formats import LABEL_MAX  # longer labels are cut with an ellipsis, whole on hover
from openpert.report.views import Cell, Column, Table

SITE_NAME = "openpert results"



def esc(value: Any) -> str:
    """Escape a value for HTML text or a quoted attribute (``None`` becomes ``""``).

    Parameters
    ----------
    value
        Anything; it is converted with ``str``.

    Returns
    -------
    str
        The escaped text.
    """
    if value is None:
        return ""
    return html.escape(str(value), quote=True)


def short_label(text: Any, limit: int = LABEL_MAX) -> str:
    """Cut a label to ``limit`` characters, ending it with an ellipsis when cut.

    Parameters
    ----------
    text
        The label.
    limit
        Longest result, ellipsis included.

    Returns
    -------
    str
        The label, unescaped.
    """
    text = " ".join(str(text if text is not None else "").split())
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 1)].rstrip(" ,;:-/(") + "…"


def label_parts(label: Any, tooltip: Any = None, limit: int | None = None) -> tuple[str, str]:
    """A label as shown (cut to ``limit``) and its hover text (full label and description).

    Parameters
    ----------
    label
        The full label.
    tooltip
        A longer description appended to the hover text (plain text).
    limit
        Longest label shown (default :data:`LABEL_MAX`).

    Returns
    -------
    tuple of str
        The shown label and the hover text (``""`` when the label is short and has no description).
    """
    full = " ".join(str(label if label is not None else "").split())
    shown = short_label(full, limit or LABEL_MAX)
    if tooltip and str(tooltip) != full:
        return shown, f"{full}: {tooltip}"
    return shown, full if shown != full else ""


def label_span(label: Any, tooltip: Any = None, limit: int = LABEL_MAX) -> str:
    """A short label with its full text (and a description) on hover (``label_span`` macro).

    Parameters
    ----------
    label
        The full label.
    tooltip
        A longer description appended to the hover text (plain text).
    limit
        Longest label shown.

    Returns
    -------
    str
        ``<span title="...">short</span>``, or the label alone when it is short and has no description.
    """
    return str(_macro("label_span")(label, tooltip, limit))


def safe_url(url: Any) -> str | None:
    """Return ``url`` when it is an absolute http(s) or mailto address, else None.

    Parameters
    ----------
    url
        A link from ``results.json``.

    Returns
    -------
    str or None
        The URL, unescaped; None for anything a browser could execute or resolve locally.
    """
    if not isinstance(url, str):
        return None
    url = url.strip()
    scheme = urlparse(url).scheme.lower()
    if scheme in ("http", "https") and urlparse(url).netloc:
        return url
    if scheme == "mailto":
        return url
    return None


def external_link(url: Any, text: Any | None = None) -> str:
    """A link to an outside page, or plain text when the URL is not safe to link.

    Parameters
    ----------
    url
        The address.
    text
        The link text; the URL itself when omitted.

    Returns
    -------
    str
        HTML.
    """
    return str(_macro("external_link")(url, text))


def doi_parts(doi: Any) -> tuple[str, str]:
    """A DOI without its prefix, and its resolver address.

    Parameters
    ----------
    doi
        A DOI, with or without a ``doi:`` or resolver prefix.

    Returns
    -------
    tuple of str
        The bare DOI and ``https://doi.org/<doi>``.
    """
    bare = re.sub(r"^(doi:|https?://(dx\.)?doi\.org/)", "", str(doi).strip(), flags=re.IGNORECASE)
    return bare, "https://doi.org/" + quote(bare, safe="/:;()._-<>[]")


def doi_link(doi: Any) -> str:
    """A link to ``https://doi.org/<doi>`` showing the DOI.

    Parameters
    ----------
    doi
        A DOI, with or without a ``doi:`` or resolver prefix.

    Returns
    -------
    str
        HTML.
    """
    return str(_macro("doi_link")(doi))


def paragraph_blocks(text: Any) -> list[str]:
    """The report's own text split on blank lines.

    Parameters
    ----------
    text
        Plain text.

    Returns
    -------
    list of str
        The paragraphs, stripped; none for empty text.
    """
    if not text:
        return []
    return [b.strip() for b in re.split(r"\n\s*\n", str(text)) if b.strip()]


def paragraphs(text: Any, css_class: str | None = None) -> str:
    """The report's own text as ``<p>`` elements, split on blank lines.

    Texts from ``results.json`` go through :mod:`openpert.report.markdown` instead.

    Parameters
    ----------
    text
        Plain text.
    css_class
        Class of every paragraph.

    Returns
    -------
    str
        HTML, empty for empty text.
    """
    return str(_macro("paragraphs")(text, css_class))


def reference_parts(refs: Any) -> tuple[list[str], list[tuple[str, str]]]:
    """The DOIs and the BibTeX entries (with their keys) of a ``references`` block.

    Parameters
    ----------
    refs
        ``{"doi": [...], "bibtex": [...]}``; a single string is accepted for either.

    Returns
    -------
    tuple
        The DOIs, and ``(key, entry)`` per BibTeX entry (``key`` is ``""`` when it has none).
    """
    if not isinstance(refs, dict):
        return [], []
    return _as_list(refs.get("doi")), [(_bibtex_key(e), str(e)) for e in _as_list(refs.get("bibtex"))]


def references(refs: Any) -> str:
    """DOI links and BibTeX entries (each in a ``<details>``).

    Parameters
    ----------
    refs
        ``{"doi": [...], "bibtex": [...]}``; a single string is accepted for either.

    Returns
    -------
    str
        HTML, empty when there is no reference.
    """
    return str(_macro("references")(refs))


def link_parts(links_block: Any) -> list[tuple[str, list[Any]]]:
    """Named links as ``(name, urls)``, names made readable, empty entries left out.

    Parameters
    ----------
    links_block
        ``{"repository": url, ...}``; values may also be lists of URLs.

    Returns
    -------
    list
        ``(name, urls)`` pairs.
    """
    if not isinstance(links_block, dict):
        return []
    return [(_humanize(name), _as_list(value)) for name, value in links_block.items() if _as_list(value)]


def links(links_block: Any) -> str:
    """A definition list of named links (repository, documentation, ...).

    Parameters
    ----------
    links_block
        ``{"repository": url, ...}``; values may also be lists of URLs.

    Returns
    -------
    str
        HTML, empty when there is no link.
    """
    return str(_macro("links")(links_block))


def definition_list(pairs: Iterable[tuple[str, Any]], css_class: str = "facts") -> str:
    """A ``<dl>`` from ``(term, value)`` pairs; pairs with an empty value are left out.

    Parameters
    ----------
    pairs
        Terms (text) and their values (text or ``Markup``; a plain ``str`` is taken as HTML
        while pages still build fragments in Python).
    css_class
        Class of the list.

    Returns
    -------
    str
        HTML.
    """
    return str(_macro("definition_list")([(t, _as_html(v)) for t, v in pairs], css_class))


def table_region(table_html: str, label: str, css_class: str = "table-wrap") -> str:
    """Wrap a table in a keyboard-scrollable region, so wide tables scroll instead of overflow.

    Parameters
    ----------
    table_html
        The ``<table>`` (HTML).
    label
        What screen readers announce for the region.
    css_class
        Classes of the region.

    Returns
    -------
    str
        HTML.
    """
    return str(_render_call("table_region", _as_html(table_html), label, css_class))


def simple_table(
    caption: str,
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    table_id: str | None = None,
    sortable: bool = True,
    numeric: Sequence[bool] | None = None,
    row_headers: bool = True,
    caption_html: bool = False,
    css_class: str = "",
) -> str:
    """A table with a caption, column headers and one row header per row (``data_table`` macro).

    Parameters
    ----------
    caption
        The caption (text unless ``caption_html``).
    header
        Column titles (text).
    rows
        Cells: ``Markup``, or a plain ``str`` taken as HTML while pages still build fragments in
        Python. A cell given as ``(content, sort_key)`` also sets ``data-sort``.
    table_id
        The table's id.
    sortable
        Make the columns sortable by the page script.
    numeric
        Per column, whether it holds numbers (right-aligned, numeric sort).
    row_headers
        Render each row's first cell as ``<th scope="row">``.
    caption_html
        The caption is already HTML.
    css_class
        Extra classes of the table (``"compact"``: only as wide as its content).

    Returns
    -------
    str
        HTML, wrapped in a scrollable region.
    """
    numeric = list(numeric or [False] * len(header))
    columns = [Column(str(title), bool(numeric[i]) if i < len(numeric) else False) for i, title in enumerate(header)]
    body = [[_html_cell(c) for c in row] for row in rows]
    cap = Markup(caption) if caption_html else caption
    table = Table(cap, columns, body, table_id=table_id, sortable=sortable, row_headers=row_headers,
                  css_class=css_class, label=_strip_tags(str(cap)) if caption_html else str(caption))
    return str(data_table(table))


def data_table(table: Table) -> str:
    """Render a :class:`~openpert.report.views.Table` (``data_table`` macro).

    Parameters
    ----------
    table
        The table's view model.

    Returns
    -------
    str
        HTML, wrapped in a scrollable region.
    """
    if not table.label:
        caption = table.caption
        table = replace(table, label=_strip_tags(caption) if isinstance(caption, Markup) else str(caption))
    return str(_macro("data_table")(table))


def page(
    *,
    title: str,
    body: str,
    root: str,
    crumbs: Sequence[tuple[str, str | None]] = (),
    description: str = "",
) -> str:
    """A complete HTML document in the site's frame (``base.html``).

    Parameters
    ----------
    title
        The page title (text).
    body
        The content of ``<main>`` (HTML).
    root
        Relative path from the page to the site root (``""``, ``"../"``, ...).
    crumbs
        Breadcrumbs as ``(text, href)``; the last one, the current page, has no href.
    description
        The page's meta description (text).

    Returns
    -------
    str
        The document.
    """
    from openpert.report.templating import render

    return str(render("base.html", title=title, body=_as_html(body), root=root, crumbs=list(crumbs),
                      description=description))


def section(section_id: str, title: str, content: str, level: int = 2, intro: str = "") -> str:
    """A ``<section>`` labelled by its heading.

    Parameters
    ----------
    section_id
        The id (also the in-page anchor).
    title
        The heading (text).
    content
        HTML.
    level
        Heading level.
    intro
        HTML placed right under the heading.

    Returns
    -------
    str
        HTML.
    """
    return str(_render_call("section", _as_html(content), section_id, title, level, _as_html(intro)))


def badge(text: str, kind: str = "") -> str:
    """A small pill label.

    Parameters
    ----------
    text
        The label (text).
    kind
        Modifier class, e.g. ``"positive"``, ``"failed"``.

    Returns
    -------
    str
        HTML.
    """
    return str(_macro("badge")(text, re.sub(r"[^a-z0-9-]", "-", kind.lower())))


def _as_list(value: Any) -> list[Any]:
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return [v for v in value if v not in (None, "")]
    return [value]


def _bibtex_key(entry: Any) -> str:
    match = re.match(r"\s*@\w+\s*\{\s*([^,\s]+)", str(entry))
    return match.group(1) if match else ""


def _humanize(name: Any) -> str:
    text = str(name).replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def _strip_tags(text: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def _macro(name: str):
    from openpert.report.templating import macro

    return macro(name)


def _render_call(name: str, content: Markup, *args: Any) -> Markup:
    """Call a macro that wraps a block (``{% call %}``) around ``content``."""
    return Markup(_call_template(name).render(args=args, content=content))


@cache
def _call_template(name: str):
    from openpert.report.templating import environment

    return environment().from_string(
        "{% import 'macros.html' as m %}{% call m." + name + "(*args) %}{{ content }}{% endcall %}")


def _as_html(value: Any) -> Any:
    """A fragment built by a page in Python: a ``str`` there is already HTML."""
    return Markup(value) if isinstance(value, str) else value


def _html_cell(value: Any) -> Cell:
    if isinstance(value, tuple):
        return Cell(_as_html(value[0]), value[1])
    return Cell(_as_html(value))
