"""The Reproduction section of a task page: published numbers beside the run's, rendered from results.json."""

from __future__ import annotations

import csv
import json
import textwrap
from pathlib import Path

import pytest
from report_fixture import HOSTILE, build_results, write_results_dir
from test_site import parse

from openpert.report import MISSING, render_site
from openpert.report.reproduction import reproduction_section
from openpert.report.task_results import TaskResults
from openpert.results.reproduction import report_amendment


def _declarations(measured_mlp: float) -> str:
    return textwrap.dedent(f"""
    sources:
      - id: table1
        label: {json.dumps("Paper Table 1 " + HOSTILE)}
        citation: "Someone et al. (2025)."
        doi: 10.1000/paper
        where: Table 1
        spread: "± one standard deviation over 3 runs"
        decimals: 2
        metric: AUROC
        metrics: {{AUROC: macro_auroc}}
        datasets:
          K562: k562
          RPE1: rpe1
          HepG2: {{dataset_id: hepg2, not_run: "HepG2's labels are not shipped."}}
        methods:
          MLP: {{method_id: mlp, differences: "A **smaller** graph."}}
          GAT: gat
          LLM: {{method_id: big_llm, reported: "A language model: its model is not the paper's."}}
        values:
          MLP: {{K562: {measured_mlp:.2f} ± .01, RPE1: 0.10 ± .01, HepG2: 0.5}}
          LLM: {{K562: 0.70 ± .00}}
    """)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    base = tmp_path_factory.mktemp("reproduction")
    results_dir = write_results_dir(base / "results" / "perturbqa")
    data = json.loads((results_dir / "results.json").read_text())
    mlp = next(s["raw"] for s in data["scores"]
               if (s["dataset_id"], s["method_id"], s["metric_id"]) == ("k562", "mlp", "macro_auroc"))
    project = base / "project"
    (project / "src" / "perturbqa" / "api").mkdir(parents=True)
    (project / "src" / "perturbqa" / "api" / "published_results.yaml").write_text(_declarations(mlp))
    render_site([results_dir], base / "site", amend=report_amendment(project))
    return base / "site", results_dir, mlp


def _rows(section, table_id: str = "table-reproduction-0") -> dict[str, list[str]]:
    """Rows of a table by their first cell's published name (the text before the benchmark's)."""
    out = {}
    for tr in section.find("table", id=table_id).find("tbody").find_all("tr"):
        cells = [" ".join(c.text().split()) for c in tr.elements()]
        out[cells[0].split("→")[0].strip()] = cells
    return out


def test_the_section_shows_published_and_measured_values(site):
    root, _, mlp = site
    page = parse(root / "perturbqa" / "index.html")
    section = page.find("section", id="reproduction")
    assert any(a.attrs.get("href") == "#reproduction" for a in page.find("nav", class_="toc").find_all("a"))
    compared = section.find("table", id="table-reproduction-0")
    # One metric in the source: named in the caption, no column of its own.
    assert "(AUROC)" in compared.find("caption").text()
    assert [" ".join(th.text().split()) for th in compared.find("thead").find_all("th")][:4] == \
        ["Dataset", "Method", "Published", "Measured [95% CI]"]
    rows = {(cells[0].split("→")[0].strip(), i): cells for i, cells in enumerate(_rows(section).values())}
    (k562,) = [c for (d, _), c in rows.items() if d == "K562"]
    assert k562[2] == f"{mlp:.2f} ± 0.01" and k562[3].startswith(f"{mlp:.3f}")
    assert k562[5] == "yes" and k562[6] == "reproduced" and k562[7] == MISSING  # no cause shown where it reproduces
    (rpe1,) = [c for (d, _), c in rows.items() if d == "RPE1"]
    assert rpe1[5] == "no; outside our 95% CI" and rpe1[6] == "differs" and rpe1[4].startswith("+")
    # The method's differences once, below the table, linked from each row that differs.
    assert rpe1[7] == "See how MLP differs."
    link = [a for a in compared.find_all("a") if a.text() == "how MLP differs"][0]
    target = section.find("dt", id=link.attrs["href"][1:])
    assert target.text().startswith("MLP") and "smaller graph" in target.parent.text()
    # The benchmark's dataset label under the published name.
    assert "→ K562 essential" in k562[0]
    # Values not compared: grouped by method and reason, with their published values.
    not_run = _rows(section, "table-reproduction-0-not-run")
    assert not_run["MLP"][1:] == ["1", "HepG2: 0.50", "HepG2's labels are not shipped."]
    reported = _rows(section, "table-reproduction-0-reported")
    assert reported["LLM"][2] == "K562: 0.70 ± 0.00" and reported["LLM"][3].startswith("A language model")
    # At a glance: counts per status.
    assert "1 reproduced, 1 differ, 1 not run here, 1 reported only (every difference with its cause)." in \
        " ".join(section.text().split())


def test_the_index_card_says_what_reproduces(site):
    root, _, _ = site
    card = parse(root / "index.html").find("li", class_="task-card")
    link = [a for a in card.find_all("a") if a.attrs.get("href") == "perturbqa/index.html#reproduction"]
    assert link and " ".join(link[0].text().split()).startswith("1 reproduced, 1 differ")


def test_causes_are_markdown_and_text_is_escaped(site):
    root, _, _ = site
    html_text = (root / "perturbqa" / "index.html").read_text()
    assert HOSTILE not in html_text and "&lt;script&gt;" in html_text
    section = parse(root / "perturbqa" / "index.html").find("section", id="reproduction")
    assert any(s.text() == "smaller" for s in section.find_all("strong"))


def test_the_site_copy_of_results_json_and_the_csv_hold_the_section(site):
    root, results_dir, _ = site
    copied = json.loads((root / "perturbqa" / "results.json").read_text())
    assert copied["reproduction"]["counts"] == {"reproduced": 1, "differs": 1, "not_run": 1, "reported": 1}
    assert "reproduction" not in json.loads((results_dir / "results.json").read_text())  # the run is not touched
    with open(root / "perturbqa" / "reproduction.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["status"] for r in rows] == ["reproduced", "reported", "differs", "not_run"]
    assert float(rows[2]["published"]) == 0.10 and rows[2]["method_differences"] == "A **smaller** graph."
    assert "reproduction.csv" in (root / "perturbqa" / "index.html").read_text()


def test_results_without_declarations_have_no_section(tmp_path):
    results_dir = write_results_dir(tmp_path / "results" / "perturbqa")
    render_site([results_dir], tmp_path / "site", amend=report_amendment(tmp_path / "no_project"))
    page = (tmp_path / "site" / "perturbqa" / "index.html").read_text()
    assert 'id="reproduction"' not in page and not (tmp_path / "site" / "perturbqa" / "reproduction.csv").exists()


def test_a_section_written_by_the_run_renders_without_the_project(tmp_path, site):
    root, _, _ = site
    copied = json.loads((root / "perturbqa" / "results.json").read_text())
    results_dir = Path(tmp_path / "results" / "perturbqa")
    results_dir.mkdir(parents=True)
    (results_dir / "results.json").write_text(json.dumps(copied))
    render_site([results_dir], tmp_path / "site")
    page = parse(tmp_path / "site" / "perturbqa" / "index.html")
    assert len(_rows(page.find("section", id="reproduction"))) == 2


@pytest.mark.browser
def test_the_section_in_chromium(site, chromium, tmp_path):
    """The page with its Reproduction section loads cleanly and keeps the layout rules on a desktop and a phone."""
    from test_browser import WIDTHS, Watched, check_layout, screenshot_dir, shoot

    root, _, _ = site
    folder = screenshot_dir(tmp_path)
    watched = Watched(chromium)
    page = watched.open((root / "perturbqa" / "index.html").as_uri())
    assert page.locator("#reproduction table.sortable").count() == 3
    for label, width in WIDTHS.items():
        check_layout(page, width, task_page=True)
        section = page.locator("section#reproduction")
        assert section.bounding_box()["width"] <= width
        shoot(page, folder, f"reproduction-{label}")
    assert watched.problems == []
    page.close()


def test_a_reported_method_run_here_with_another_model_shows_those_values_in_a_column_of_their_own(tmp_path):
    data = build_results()
    reported = {"source_id": "t2", "published_dataset": "Paper set", "published_method": "Qwen3-14B",
                "published_metric": "Acc", "method_id": "big_llm", "metric_id": "macro_auroc", "published": 0.47,
                "status": "reported", "reason": "An open-weights model.", "spread": None,
                "other_model": {"model": "smollm2-135m", "max_tokens": 32,
                                "values": [{"dataset_id": "k562", "measured": 0.3125}]}}
    data["reproduction"] = {"sources": [{"id": "t2", "label": "Table 2", "citation": "", "where": ""}],
                            "rows": [reported, {**reported, "published_method": "GPT", "other_model": None}],
                            "counts": {"reported": 2}}
    page = tmp_path / "page.html"
    page.write_text(f"<html><body>{reproduction_section(TaskResults(data, tmp_path))}</body></html>")
    rows = _rows(parse(page), "table-reproduction-0-reported")
    assert rows["Qwen3-14B"][3] == "K562 essential 0.312 (another model: smollm2-135m, completions capped at 32 tokens)"
    assert rows["GPT"][3] == MISSING and rows["GPT"][4] == "An open-weights model."
