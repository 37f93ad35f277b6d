"""HTML building blocks shared by every page: escaping, the page frame, references and links.

Every string that comes from ``results.json`` passes through :func:`esc` before it reaches the
page; links from the file are only made clickable when they are http(s) or DOI links.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, urlparse

import openpert
from openpert.config.formats import LABEL_MAX  # longer labels are cut with an ellipsis, whole on hover

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


def label_span(label: Any, tooltip: Any = None, limit: int = LABEL_MAX) -> str:
    """A short label with its full text (and a description) on hover.

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
        ``<span title="...">short</span>``, or the escaped label alone when it is short and has
        no description.
    """
    full = " ".join(str(label if label is not None else "").split())
    shown = short_label(full, limit)
    if tooltip and str(tooltip) != full:
        hover = f"{full}: {tooltip}"
    else:
        hover = full if shown != full else ""
    if not hover:
        return esc(shown)
    return f'<span title="{esc(hover)}">{esc(shown)}</span>'


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
    shown = esc(text if text is not None else url)
    target = safe_url(url)
    if target is None:
        return f"<span>{shown}</span>"
    return f'<a href="{esc(target)}" rel="noopener noreferrer">{shown}</a>'


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
    text = str(doi).strip()
    bare = re.sub(r"^(doi:|https?://(dx\.)?doi\.org/)", "", text, flags=re.IGNORECASE)
    href = "https://doi.org/" + quote(bare, safe="/:;()._-<>[]")
    return f'<a href="{esc(href)}" rel="noopener noreferrer">doi:{esc(bare)}</a>'


def paragraphs(text: Any, css_class: str | None = None) -> str:
    """Split the report's own text on blank lines into escaped ``<p>`` elements.

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
    if not text:
        return ""
    cls = f' class="{esc(css_class)}"' if css_class else ""
    blocks = [b.strip() for b in re.split(r"\n\s*\n", str(text)) if b.strip()]
    return "".join(f"<p{cls}>{esc(b)}</p>" for b in blocks)


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
    if not isinstance(refs, dict):
        return ""
    dois = _as_list(refs.get("doi"))
    bibtex = _as_list(refs.get("bibtex"))
    if not dois and not bibtex:
        return ""
    parts = []
    if dois:
        parts.append('<ul class="refs">' + "".join(f"<li>{doi_link(d)}</li>" for d in dois) + "</ul>")
    for i, entry in enumerate(bibtex, start=1):
        key = _bibtex_key(entry)
        summary = f"BibTeX: {key}" if key else f"BibTeX entry {i}"
        parts.append(
            f'<details class="bibtex"><summary>{esc(summary)}</summary>'
            f"<pre><code>{esc(entry)}</code></pre></details>"
        )
    return "".join(parts)


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
    if not isinstance(links_block, dict) or not links_block:
        return ""
    rows = []
    for name, value in links_block.items():
        urls = _as_list(value)
        if not urls:
            continue
        shown = ", ".join(external_link(u) for u in urls)
        rows.append(f"<dt>{esc(_humanize(name))}</dt><dd>{shown}</dd>")
    return f'<dl class="links">{"".join(rows)}</dl>' if rows else ""


def definition_list(pairs: Iterable[tuple[str, str]], css_class: str = "facts") -> str:
    """A ``<dl>`` from ``(term, html)`` pairs; pairs with empty html are left out.

    Parameters
    ----------
    pairs
        Terms (escaped here) and their values (already HTML).
    css_class
        Class of the list.

    Returns
    -------
    str
        HTML.
    """
    items = "".join(f"<dt>{esc(t)}</dt><dd>{v}</dd>" for t, v in pairs if v)
    return f'<dl class="{esc(css_class)}">{items}</dl>' if items else ""


def table_region(table_html: str, label: str, css_class: str = "table-wrap") -> str:
    """Wrap a table in a keyboard-scrollable region, so wide tables scroll instead of overflow.

    Parameters
    ----------
    table_html
        The ``<table>``.
    label
        What screen readers announce for the region.
    css_class
        Classes of the region.

    Returns
    -------
    str
        HTML.
    """
    return (
        f'<div class="{esc(css_class)}" role="region" tabindex="0" aria-label="{esc(label)}">'
        f"{table_html}</div>"
    )


def simple_table(
    caption: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    table_id: str | None = None,
    sortable: bool = True,
    numeric: Sequence[bool] | None = None,
    row_headers: bool = True,
    caption_html: bool = False,
    css_class: str = "",
) -> str:
    """A table with a caption, column headers and one row header per row.

    Parameters
    ----------
    caption
        The caption (escaped unless ``caption_html``).
    header
        Column titles (escaped).
    rows
        Cells, already HTML. A cell given as ``(html, sort_key)`` also sets ``data-sort``.
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
    head = []
    for i, title in enumerate(header):
        extra = f' data-col="{i}"' if sortable else ""
        if sortable and numeric[i]:
            extra += ' data-type="number"'
        cls = ' class="num"' if numeric[i] else ""
        head.append(f'<th scope="col"{cls}{extra}>{esc(title)}</th>')
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            content, key = cell if isinstance(cell, tuple) else (cell, None)
            sort_attr = f' data-sort="{esc(key)}"' if key is not None else ""
            cls = ' class="num"' if i < len(numeric) and numeric[i] else ""
            if i == 0 and row_headers:
                cells.append(f'<th scope="row"{cls}{sort_attr}>{content}</th>')
            else:
                cells.append(f"<td{cls}{sort_attr}>{content}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    id_attr = f' id="{esc(table_id)}"' if table_id else ""
    cls = "data sortable" if sortable else "data"
    if css_class:
        cls += f" {esc(css_class)}"
    cap = caption if caption_html else esc(caption)
    table = (
        f'<table class="{cls}"{id_attr}><caption>{cap}</caption>'
        f"<thead><tr>{''.join(head)}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )
    return table_region(table, _strip_tags(cap))


def page(
    *,
    title: str,
    body: str,
    root: str,
    crumbs: Sequence[tuple[str, str | None]] = (),
    description: str = "",
) -> str:
    """A complete HTML document in the site's frame.

    Parameters
    ----------
    title
        The page title (escaped here).
    body
        The content of ``<main>``, already HTML.
    root
        Relative path from the page to the site root (``""``, ``"../"``, ...).
    crumbs
        Breadcrumbs as ``(text, href)``; the last one, the current page, has no href.
    description
        The page's meta description (escaped here).

    Returns
    -------
    str
        The document.
    """
    nav = ""
    if crumbs:
        items = []
        for text, href in crumbs:
            if href is None:
                items.append(f'<li><span aria-current="page">{esc(text)}</span></li>')
            else:
                items.append(f'<li><a href="{esc(href)}">{esc(text)}</a></li>')
        nav = f'<nav class="breadcrumbs" aria-label="Breadcrumb"><ol>{"".join(items)}</ol></nav>'
    meta = f'<meta name="description" content="{esc(description)}">\n' if description else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)} · {SITE_NAME}</title>\n{meta}"
        f'<link rel="icon" href="{root}static/favicon.svg" type="image/svg+xml">\n'
        f'<link rel="stylesheet" href="{root}static/report.css">\n'
        f'<script src="{root}static/report.js" defer></script>\n'
        "</head>\n<body>\n"
        '<a class="skip-link" href="#main">Skip to content</a>\n'
        '<header class="site-header"><div class="container">'
        f'<a class="brand" href="{root}index.html"><span class="brand-mark" aria-hidden="true"></span>'
        f'openpert <span class="brand-sub">results</span></a></div></header>\n'
        f'<div class="container">{nav}</div>\n'
        f'<main id="main" class="container">\n{body}\n</main>\n'
        '<footer class="site-footer"><div class="container">'
        f"Rendered by openpert {esc(openpert.__version__)} from <code>results.json</code>. "
        "Scores are scaled between each dataset&#x27;s strongest negative control (0) and its positive control (1)."
        "</div></footer>\n</body>\n</html>\n"
    )


def section(section_id: str, title: str, content: str, level: int = 2, intro: str = "") -> str:
    """A ``<section>`` labelled by its heading.

    Parameters
    ----------
    section_id
        The id (also the in-page anchor).
    title
        The heading (escaped here).
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
    hid = f"{section_id}-title"
    return (
        f'<section id="{esc(section_id)}" aria-labelledby="{esc(hid)}">'
        f'<h{level} id="{esc(hid)}">{esc(title)}</h{level}>{intro}{content}</section>'
    )


def badge(text: str, kind: str = "") -> str:
    """A small pill label.

    Parameters
    ----------
    text
        The label (escaped here).
    kind
        Modifier class, e.g. ``"positive"``, ``"failed"``.

    Returns
    -------
    str
        HTML.
    """
    cls = f"badge badge-{re.sub(r'[^a-z0-9-]', '-', kind.lower())}" if kind else "badge"
    return f'<span class="{cls}">{esc(text)}</span>'


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
