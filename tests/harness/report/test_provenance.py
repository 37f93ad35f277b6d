"""The provenance line and section of a task page: every field shown, hostile text kept inert."""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup
from report_fixture import HOSTILE, build_results
from test_site import norm, parse

from openpert.report.formatting import format_memory
from openpert.report.provenance import provenance_line, provenance_section
from openpert.report.task_results import TaskResults


def _doc(tmp_path: Path, html: str):
    page = tmp_path / "page.html"
    page.write_text(f"<html><body>{html}</body></html>")
    return parse(page)


def _hostile_results() -> TaskResults:
    data = build_results()
    data["engine"] = f"local{HOSTILE}"
    data["provenance"]["packages"][f"evil{HOSTILE}"] = f"1{HOSTILE}"
    data["provenance"]["host"]["platform"] = f"linux{HOSTILE}"
    data["provenance"]["component_digests"] = {"mlp": "sha256:1", f"x{HOSTILE}": "sha256:2"}
    data["provenance"]["dataset_digests"] = {"k562": {"train.h5ad": "sha256:3", f"f{HOSTILE}": "sha256:4"}}
    for job in data["resources"][:2]:
        job["sandbox"] = f"bwrap{HOSTILE}"
    for job in data["resources"][2:]:
        job.pop("sandbox", None)
    return TaskResults(data, Path("."))


def test_line_names_time_code_engine_and_sandbox(tmp_path: Path) -> None:
    results = _hostile_results()
    html = provenance_line(results)
    assert isinstance(html, Markup) and HOSTILE not in html
    line = _doc(tmp_path, html).find("p", class_="run-meta")
    text = norm(line.text())
    commit = results.provenance["commit"]
    assert f"commit {commit[:10]} (modified)" in text
    assert f"engine local{HOSTILE}" in text and f"sandbox bwrap{HOSTILE}" in text
    assert line.find("code").attrs["title"] == commit
    assert line.find("time").attrs["datetime"] == results.data["created"]
    assert line.find("a").attrs["href"] == "#provenance" and text.endswith("· provenance")


def test_line_says_what_was_not_recorded(tmp_path: Path) -> None:
    text = norm(_doc(tmp_path, provenance_line(TaskResults({"task": {"name": "t"}}, Path(".")))).text())
    assert text == "Run time not recorded · openpert version not recorded · engine not recorded · provenance"


def test_section_lists_every_fact_escaped(tmp_path: Path) -> None:
    html = provenance_section(_hostile_results())
    assert isinstance(html, Markup) and HOSTILE not in html
    doc = _doc(tmp_path, html)
    facts = dict(zip([norm(t.text()) for t in doc.find_all("dt")], doc.find_all("dd")))
    assert list(facts)[:6] == ["Ran", "openpert version", "Commit", "Engine", "Sandbox", "Host"]
    assert norm(facts["Sandbox"].text()).startswith(f"bwrap{HOSTILE} (2 jobs), not recorded for ")
    assert norm(facts["Host"].text()) == f"2 CPUs, {format_memory(7940.2)} memory, linux{HOSTILE}"
    assert facts["Commit"].find_all("span", class_="badge-warn")
    packages = doc.find("table", id="table-packages")
    assert f"evil{HOSTILE}" in [norm(r.elements()[0].text()) for r in packages.find("tbody").find_all("tr")]
    assert norm(facts["Packages"].find("summary").text()) == "4 packages"
    datasets = [norm(r.elements()[0].text()) for r in doc.find("table", id="table-dataset-digests").find_all("tr")[1:]]
    assert datasets == ["K562 essential / train.h5ad", f"K562 essential / f{HOSTILE}"]
    assert norm(facts["Component digests"].find("summary").text()) == "2 digests"


def test_section_of_a_clean_tree_and_a_bare_host(tmp_path: Path) -> None:
    data = build_results()
    data["provenance"]["dirty"] = False
    data["provenance"]["host"] = {"cpu_count": 1}
    doc = _doc(tmp_path, provenance_section(TaskResults(data, Path("."))))
    facts = dict(zip([norm(t.text()) for t in doc.find_all("dt")], doc.find_all("dd")))
    assert norm(facts["Commit"].find("span", class_="badge-ok").text()) == "clean working tree"
    assert norm(facts["Host"].text()) == "1 CPUs"
