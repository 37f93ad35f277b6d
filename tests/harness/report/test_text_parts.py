"""Tests of openpert.report.text_parts: which text a macro shows, and which links it may make clickable."""

from __future__ import annotations

import pytest

from openpert.report.text_parts import (
    doi_parts,
    label_parts,
    link_parts,
    paragraph_blocks,
    reference_parts,
    safe_url,
    short_label,
)


def test_a_long_label_is_cut_with_an_ellipsis_and_whole_on_hover():
    assert short_label("  many   spaces  ") == "many spaces"
    assert short_label("abcdefghij", 6) == "abcde…"
    assert label_parts("abcdefghij", None, 6) == ("abcde…", "abcdefghij")
    assert label_parts("short", None) == ("short", "")
    assert label_parts("short", "what it is") == ("short", "short: what it is")


@pytest.mark.parametrize("url", ["javascript:alert(1)", "JaVaScRiPt:x", "data:text/html,x", "file:///etc/passwd",
                                 "/local/path", "https://", "vbscript:x", None, 3])
def test_only_http_and_mailto_addresses_are_linked(url):
    assert safe_url(url) is None


def test_web_and_mail_addresses_are_kept():
    assert safe_url(" https://example.org/a?b=1 ") == "https://example.org/a?b=1"
    assert safe_url("mailto:a@b.org") == "mailto:a@b.org"


def test_a_doi_goes_through_its_resolver_whatever_its_prefix():
    assert doi_parts("doi:10.1000/xyz") == ("10.1000/xyz", "https://doi.org/10.1000/xyz")
    assert doi_parts("https://dx.doi.org/10.1/a b") == ("10.1/a b", "https://doi.org/10.1/a%20b")
    # A DOI cannot smuggle a scheme: the resolver stays the host.
    assert doi_parts("javascript:alert(1)")[1].startswith("https://doi.org/")


def test_references_links_and_paragraphs_are_read_from_loose_yaml():
    assert reference_parts({"doi": "10.1/a", "bibtex": ["@article{key1, title={T}}", "no key"]}) == (
        ["10.1/a"], [("key1", "@article{key1, title={T}}"), ("", "no key")])
    assert reference_parts("not a block") == ([], [])
    assert link_parts({"repository": "https://x.org", "documentation": [], "issue_tracker": ["a", ""]}) == [
        ("Repository", ["https://x.org"]), ("Issue tracker", ["a"])]
    assert paragraph_blocks("one\n\n  two \n\n\n") == ["one", "two"] and paragraph_blocks(None) == []
