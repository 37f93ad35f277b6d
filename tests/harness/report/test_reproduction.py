"""The Reproduction section rendered from results.json's reproduction: sources, compared rows, groups, hostile text inert."""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup
from report_fixture import HOSTILE, build_results
from test_site import norm, parse

from openpert.report.formatting import MISSING
from openpert.report.reproduction import reproduction_section
from openpert.report.task_results import TaskResults


def _row(method: str, status: str, **extra) -> dict:
    row = {"source_id": "s1", "published_dataset": "K562", "dataset_id": "k562", "published_method": method,
           "method_id": "mlp", "published_metric": "AUROC", "metric_id": "macro_auroc", "published": 0.8,
           "spread": 0.01, "status": status}
    return {**row, **extra}


def _results() -> TaskResults:
    data = build_results()
    data["reproduction"] = {
        "description": f"Published numbers {HOSTILE}",
        "sources": [{"id": "s1", "label": f"Paper {HOSTILE}", "citation": f"Someone {HOSTILE}", "doi": "10.1/x",
                     "where": "Table 1", "spread": "sd", "file": {"path": f"t{HOSTILE}.csv", "source": "supp"},
                     "problem": f"unreadable {HOSTILE}"}],
        "rows": [
            _row(f"MLP {HOSTILE}", "differs", measured=0.6, difference=-0.2, within_spread=False,
                 note=f"Smaller *graph* {HOSTILE}", method_differences="Fewer layers."),
            _row("Other", "reproduced", measured=0.805, difference=0.005, within_spread=True,
                 items={"available": True, "n_within": 3, "n_matched": 4}),
            _row("Absent", "not_run", reason=f"no labels {HOSTILE}"),
            _row("Absent", "not_run", published_dataset="RPE1", reason=f"no labels {HOSTILE}"),
        ],
        "counts": {"reproduced": 1, "differs": 1, "not_run": 2},
        "unexplained_differences": 0,
    }
    return TaskResults(data, Path("."))


def test_section_shows_sources_rows_and_groups_escaped(tmp_path: Path) -> None:
    html = reproduction_section(_results())
    assert isinstance(html, Markup) and HOSTILE not in html
    page = tmp_path / "page.html"
    page.write_text(f"<html><body>{html}</body></html>")
    doc = parse(page)
    assert norm(doc.find("p", class_="lead-small").text()) == (
        "1 reproduced, 1 differ, 2 not run here (every difference with its cause).")
    assert norm(doc.find("h3").text()) == f"Paper {HOSTILE}"
    facts = [norm(li.text()) for li in doc.find("ul", class_="source-facts").find_all("li")]
    assert facts == [f"Someone {HOSTILE} doi:10.1/x", "Where: Table 1", "Spread: sd", f"File: t{HOSTILE}.csv — supp"]
    assert norm(doc.find("p", class_="empty").text()) == f"not read unreadable {HOSTILE}"
    compared = doc.find("table", id="table-reproduction-0")
    rows = {norm(r.elements()[1].text()).split("→")[0].strip(): r.elements() for r in compared.find("tbody").find_all("tr")}
    differs = rows[f"MLP {HOSTILE}"]
    assert differs[-2].attrs["data-sort"] == "differs" and norm(differs[-2].text()) == "differs"
    cause = differs[-1]
    assert norm(cause.find("em").text()) == "graph"
    assert cause.find("a").attrs["href"] == "#reproduction-0-method-0"
    assert norm(doc.find("dt", id="reproduction-0-method-0").text()).startswith(f"MLP {HOSTILE}")
    other = rows["Other"]
    assert norm(other[-1].find("span", class_="detail").text()) == "3 of 4 items agree"
    group = doc.find("table", id="table-reproduction-0-not-run")
    cells = [norm(c.text()) for c in group.find("tbody").find("tr").elements()]
    assert cells[1] == "2" and cells[2] == "K562: 0.80 ± 0.01; RPE1: 0.80 ± 0.01" and cells[3] == f"no labels {HOSTILE}"


def test_a_row_without_a_cause_shows_a_dash(tmp_path: Path) -> None:
    results = _results()
    results.data["reproduction"]["rows"] = [_row("Bare", "reproduced", measured=0.8, difference=0.0, within_spread=True)]
    page = tmp_path / "page.html"
    page.write_text(f"<html><body>{reproduction_section(results)}</body></html>")
    row = parse(page).find("table", id="table-reproduction-0").find("tbody").find("tr").elements()
    assert norm(row[-1].text()) == MISSING and not row[-1].find_all("span")
