"""Tests of openpert.report.templating and the shared macros: escaping is the default, links are vetted."""

from __future__ import annotations

import jinja2
import pytest
from markupsafe import Markup

from openpert.report.templating import environment, macro, render
from openpert.report.views import Column, Table, cell

HOSTILE = '<script>alert(1)</script>" onmouseover="x'


def test_autoescape_is_on_and_an_undefined_name_is_an_error():
    template = environment().from_string("<p title=\"{{ text }}\">{{ text }}</p>")
    out = template.render(text=HOSTILE)
    assert "<script>" not in out and 'onmouseover="x' not in out
    assert "&lt;script&gt;" in out and "&#34;" in out
    # Markup from another template passes through unescaped.
    assert template.render(text=Markup("<b>ok</b>")) == '<p title="<b>ok</b>"><b>ok</b></p>'
    with pytest.raises(jinja2.UndefinedError, match="missing_name"):
        environment().from_string("{{ missing_name }}").render()


def test_the_number_filters_write_missing_values_as_a_dash():
    template = environment().from_string("{{ a | rank }}|{{ b | memory }}|{{ c | count }}|{{ d | count }}")
    assert template.render(a=None, b=812.4, c=12345, d=None) == "–|812 MB|12,345|–"


def test_external_link_refuses_what_a_browser_could_execute():
    link = macro("external_link")
    assert str(link("javascript:alert(1)", "click")) == "<span>click</span>"
    assert str(link("data:text/html,<script>x</script>")) == "<span>data:text/html,&lt;script&gt;x&lt;/script&gt;</span>"
    assert str(link("https://example.org/a?b=1&c=2", HOSTILE)) == (
        '<a href="https://example.org/a?b=1&amp;c=2" rel="noopener noreferrer">'
        "&lt;script&gt;alert(1)&lt;/script&gt;&#34; onmouseover=&#34;x</a>")


def test_label_span_cuts_a_long_label_and_keeps_it_whole_on_hover():
    span = str(macro("label_span")("A" * 80 + "<b>", None, 20))
    assert span.startswith('<span title="' + "A" * 80 + '&lt;b&gt;">') and span.endswith("…</span>")
    assert str(macro("label_span")("short")) == "short"
    assert str(macro("label_span")("short", "what it is")) == '<span title="short: what it is">short</span>'


def test_a_data_table_escapes_text_cells_and_keeps_markup_cells():
    table = Table(caption=HOSTILE, columns=[Column("Method"), Column("Score", numeric=True)],
                  rows=[[cell(HOSTILE), cell((Markup("<em>0.5</em>"), 0.5))]], table_id="t1", label=HOSTILE)
    out = macro("data_table")(table)
    assert "<script>" not in out
    assert '<td class="num" data-sort="0.5"><em>0.5</em></td>' in out
    assert '<th scope="col" class="num" data-col="1" data-type="number">Score</th>' in out
    assert 'aria-label="&lt;script&gt;alert(1)&lt;/script&gt;&#34; onmouseover=&#34;x"' in out
    assert out.count('<th scope="row">') == 1


def test_the_page_frame_escapes_title_crumbs_and_description():
    out = render("base.html", title=HOSTILE, body=Markup("<p>body</p>"), root="../",
                 crumbs=[(HOSTILE, "../index.html"), ("here", None)], description=HOSTILE)
    assert "<script>" not in out and out.startswith("<!DOCTYPE html>")
    assert "<p>body</p>" in out and 'href="../static/report.css"' in out
    assert '<span aria-current="page">here</span>' in out


def test_render_returns_markup_that_another_template_keeps():
    inner = render("macros.html")  # defines macros only: renders to whitespace
    assert isinstance(inner, Markup) and not inner.strip()


def test_every_template_ships_with_the_package():
    from pathlib import Path, PurePosixPath

    import tomllib

    import openpert

    package = Path(openpert.__file__).parent
    patterns = tomllib.loads((package.parents[1] / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["openpert"]
    templates = [p.relative_to(package).as_posix() for p in (package / "report" / "templates").rglob("*") if p.is_file()]
    assert templates
    # An installed openpert (a wheel, an image) has only what package-data lists.
    unlisted = [t for t in templates if not any(PurePosixPath(t).match(p) and t.count("/") == p.count("/")
                                                 for p in patterns)]
    assert unlisted == []
