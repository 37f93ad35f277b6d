"""The text the shared macros show, cut and vetted in Python: labels, links, DOIs, references, paragraphs.

The markup is in ``templates/macros.html``, where autoescape escapes every string from
``results.json``; what is decided here is which text is shown and whether a link from the file may
be clickable (only http(s) and mailto addresses, and DOIs through their resolver).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlparse

from openpert.config.formats import LABEL_MAX  # longer labels are cut with an ellipsis, whole on hover
from openpert.report.markdown import allowed_href

SITE_NAME = "openpert results"


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
    # The links a description may make, less the relative ones: a link from the file leaves the site.
    return url.strip() if allowed_href(url) and urlparse(url.strip()).scheme else None


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
