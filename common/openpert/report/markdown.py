"""Markdown in descriptions, rendered safely with markdown-it-py.

Task, method, metric and dataset texts come from contributors' configs and may use Markdown
(emphasis, code, lists, links). They are rendered with the CommonMark rules of markdown-it-py
(plus tables and strikethrough), with three safety rules on top:

* raw HTML is never passed through (``html`` is off, so ``<script>`` shows as text);
* links keep their ``href`` only for http(s) (with a host), ``mailto`` and relative addresses;
  any other link (``javascript:``, ``data:``, ``file:``, protocol-relative ``//host``) is reduced
  to its text, so the page shows neither a dangerous link nor a literal ``[text](url)``;
* images become links to the image (or their alt text), so a description never makes the page
  load anything from elsewhere.

Headings inside a description are demoted below the page's own headings.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import Any
from urllib.parse import urlparse

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markupsafe import Markup

#: Heading levels a description's ``#`` headings are shifted by (``#`` becomes ``<h4>``).
HEADING_OFFSET = 3


def allowed_href(href: Any) -> bool:
    """Tell whether a link target from a description may become a clickable link.

    Parameters
    ----------
    href
        The link's target, as markdown-it normalised it.

    Returns
    -------
    bool
        True for http(s) addresses with a host, ``mailto:`` addresses and relative addresses
        (paths, ``#anchors``, ``?queries``); False for everything else, including
        protocol-relative ``//host`` addresses, which look relative but leave the site.
    """
    if not isinstance(href, str):
        return False
    href = href.strip()
    if not href or href.startswith(("//", "/\\", "\\")):
        return False
    parsed = urlparse(href)
    scheme = parsed.scheme.lower()
    if scheme in ("http", "https"):
        return bool(parsed.netloc)
    if scheme == "mailto":
        return True
    return scheme == ""


def _sanitise_links(state: StateCore) -> None:
    """Core rule: drop unsafe links (keeping their text), turn images into links, scope table headers."""
    for block in state.tokens:
        if block.type == "th_open":
            # Header cells of a description's table name their column, like the report's own.
            block.attrSet("scope", "col")
        if block.type != "inline" or not block.children:
            continue
        out: list[Token] = []
        dropped: list[bool] = []  # per open link: whether its open token was dropped
        for token in block.children:
            if token.type == "link_open":
                keep = allowed_href(token.attrGet("href"))
                dropped.append(not keep)
                if keep:
                    out.append(token)
                continue
            if token.type == "link_close":
                if dropped and not dropped.pop():
                    out.append(token)
                continue
            if token.type == "image":
                out.extend(_image_as_link(token))
                continue
            out.append(token)
        block.children = out


def _image_as_link(token: Token) -> list[Token]:
    alt = token.content or "".join(c.content for c in token.children or [])
    text = Token("text", "", 0, content=alt or "image")
    src = token.attrGet("src")
    if not allowed_href(src):
        return [text]
    link_open = Token("link_open", "a", 1, attrs={"href": str(src)})
    link_close = Token("link_close", "a", -1)
    return [link_open, text, link_close]


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    # Accept every target while parsing, so an unsafe link still parses as a link and
    # _sanitise_links can keep its text; markdown-it would otherwise leave "[text](url)" literal.
    md.validateLink = lambda url: True
    md.core.ruler.push("openpert_sanitise_links", _sanitise_links)

    def heading(renderer, tokens, idx, options, env):
        # Opens (nesting 1) or closes a heading, its level shifted below the page's own.
        level = min(6, int(tokens[idx].tag[1]) + HEADING_OFFSET)
        return f"<h{level}>" if tokens[idx].nesting == 1 else f"</h{level}>\n"

    def link_open(renderer, tokens, idx, options, env):
        token = tokens[idx]
        href = str(token.attrGet("href") or "")
        attrs = f' href="{html.escape(href, quote=True)}"'
        title = token.attrGet("title")
        if title:
            attrs += f' title="{html.escape(str(title), quote=True)}"'
        # Outside pages must not learn the report's address nor get a handle on its window.
        if urlparse(href).scheme.lower() in ("http", "https"):
            attrs += ' rel="noopener noreferrer"'
        return f"<a{attrs}>"

    md.add_render_rule("heading_open", heading)
    md.add_render_rule("heading_close", heading)
    md.add_render_rule("link_open", link_open)
    return md


def render_markdown(text: Any) -> Markup:
    """Render a description's Markdown as block HTML.

    Parameters
    ----------
    text
        Markdown; ``None`` or empty gives ``""``.

    Returns
    -------
    Markup
        ``<div class="md">...</div>`` (the browser tests find descriptions by its class), or ``""`` for empty text.
    """
    if text is None or not str(text).strip():
        return Markup("")
    return _render_block(str(text))


# A description shows on several pages (the task page, each component's page, tooltips), and its
# rendering depends on its text only: each text is parsed once.
@lru_cache(maxsize=4096)
def _render_block(text: str) -> Markup:
    body = _parser().render(text).strip()
    return Markup(f'<div class="md">{body}</div>')


def render_inline(text: Any) -> Markup:
    """Render a one-line text (a summary) as inline HTML: emphasis, code and links only.

    Parameters
    ----------
    text
        Markdown; line breaks become spaces.

    Returns
    -------
    Markup
        HTML without block elements, ``""`` for empty text.
    """
    if text is None or not str(text).strip():
        return Markup("")
    return _render_line(" ".join(str(text).split()))


@lru_cache(maxsize=4096)
def _render_line(text: str) -> Markup:
    return Markup(_parser().renderInline(text))


def plain_text(text: Any) -> str:
    """Strip a text's Markdown for contexts that take no markup (tooltips, meta descriptions).

    Parameters
    ----------
    text
        Markdown.

    Returns
    -------
    str
        The text as a reader sees it, whitespace collapsed, not HTML-escaped.
    """
    if text is None:
        return ""
    return _plain(str(text))


@lru_cache(maxsize=4096)
def _plain(text: str) -> str:
    stripped = re.sub(r"<[^>]+>", " ", _render_block(text))  # the rendering the page shows, made once
    return " ".join(html.unescape(stripped).split())
