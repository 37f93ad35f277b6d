"""Tests of the results website: content, numbers, downloads, component pages, safety."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pandas as pd
import pytest
from report_fixture import DIAGNOSTIC, HOSTILE, LONG_DATASET_NAME, METHODS, METRICS, write_results_dir  # noqa: E402

from openpert.report import (  # noqa: E402
    describe_failure,
    failure_label,
    format_ci,
    format_duration,
    format_memory,
    format_number,
    format_timestamp,
    render_site,
)
from openpert.report.formatting import (  # noqa: E402
    format_bool,
    format_count,
    format_p_value,
    format_parameter,
    format_rank,
    format_value,
    value_kind,
)
from openpert.report.paths import slugify  # noqa: E402
from openpert.report.task_results import TaskResults  # noqa: E402
from openpert.results.model import TIERS  # noqa: E402

# -- a minimal DOM, enough to read tables and attributes -------------------------------------

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class Node:
    """An element with its attributes and children (elements and text)."""

    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> Iterator[Node]:
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def find_all(self, tag: str | None = None, **attrs: str) -> list[Node]:
        def match(n: Node) -> bool:
            if tag is not None and n.tag != tag:
                return False
            for key, value in attrs.items():
                have = n.attrs.get(key.rstrip("_").replace("_", "-"))
                if key == "class_":
                    if value not in (have or "").split():
                        return False
                elif have != value:
                    return False
            return True

        return [n for n in self.iter() if match(n)]

    def find(self, tag: str | None = None, **attrs: str) -> Node:
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag}> with {attrs}"
        return found[0]

    def elements(self) -> list[Node]:
        return [c for c in self.children if isinstance(c, Node)]

    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs), self.current)
        self.current.children.append(node)
        if tag not in _VOID:
            self.current = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.current.children.append(Node(tag, dict(attrs), self.current))

    def handle_endtag(self, tag: str) -> None:
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None and node.parent is not None, f"unmatched </{tag}>"
        self.current = node.parent

    def handle_data(self, data: str) -> None:
        self.current.children.append(data)


def parse(path: Path) -> Node:
    builder = _Builder()
    builder.feed(path.read_text(encoding="utf-8"))
    builder.close()
    assert builder.current is builder.root, f"{path}: unclosed <{builder.current.tag}>"
    return builder.root


def norm(text: str) -> str:
    return " ".join(text.split())


# -- the site under test ---------------------------------------------------------------------


@dataclass
class Site:
    root: Path
    results_dirs: list[Path]
    data: dict[str, dict[str, Any]]  # task name -> results.json
    pages: dict[str, Node] = field(default_factory=dict)  # task name -> its parsed page (tests only read it)

    def task_page(self, task: str = "perturbqa") -> Node:
        if task not in self.pages:
            self.pages[task] = parse(self.root / task / "index.html")
        return self.pages[task]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    base = tmp_path_factory.mktemp("report")
    dirs = [
        write_results_dir(base / "results" / "perturbqa"),
        write_results_dir(
            base / "results" / "perturbseq", task_name="perturbseq", label="Perturb-seq expression", seed=3,
            provenance=False,
        ),
    ]
    index = render_site(dirs, base / "site")
    assert index == base / "site" / "index.html"
    data = {d.name: json.loads((d / "results.json").read_text()) for d in dirs}
    return Site(base / "site", dirs, data)


def _methods(data: dict[str, Any], control: bool) -> list[dict[str, Any]]:
    """The controls that do not rank (``control=True``), or the methods and baselines that do."""
    unranked = ("positive", "negative", "adversarial", "ceiling")
    return [m for m in data["methods"] if (m.get("control") in unranked) == control]


def _score(data: dict[str, Any], dataset: str, method: str, metric: str) -> dict[str, Any] | None:
    for s in data["scores"]:
        if (s["dataset_id"], s["method_id"], s["metric_id"]) == (dataset, method, metric):
            return s
    return None


def _row_cells(table: Node, method_id: str) -> list[Node]:
    row = table.find("tr", data_method=method_id)
    return row.elements()


# -- formatting ------------------------------------------------------------------------------


def test_formatting_functions() -> None:
    assert format_number(0.61234) == "0.612"
    assert format_number(-0.0) == "0.00"
    assert format_number(None) == "–"
    assert format_number(1.234e-5) == "1.23e-05"
    assert format_number(123456.0) == "1.23e+05"
    # Scores keep three significant digits whatever their magnitude, trailing zeros included.
    assert [format_number(x) for x in (0.5, 24.4271, 4.84, 0.0123456, 100.0, -1.79)] == [
        "0.500", "24.4", "4.84", "0.0123", "100", "-1.79"]
    assert format_ci(0.612, 0.59, 0.634) == "0.612 [0.590, 0.634]"
    assert format_ci(0.612, None, 0.634) == "0.612"
    assert format_duration(12.34) == "12.3 s"
    assert format_duration(125) == "2 min 05 s"
    assert format_duration(3725) == "1 h 02 min"
    assert format_memory(812.4) == "812 MB"
    assert format_memory(2100) == "2.1 GB"
    assert describe_failure(137, "whatever") == "memory limit exceeded"
    assert describe_failure(143, None) == "time limit exceeded"
    assert describe_failure(1, "ValueError: bad") == "ValueError: bad"
    assert failure_label(137, "") == "memory limit exceeded (exit 137)"
    assert format_timestamp("2026-11-21T11:00:00+01:00") == "2026-11-21 10:00 UTC"


def test_numbers_are_formatted_by_kind() -> None:
    # Counts and ranks as integers (results.json may store them as floats), p-values in scientific
    # notation, booleans as marks.
    assert format_count(21.0) == "21" and format_count(10000) == "10,000" and format_count(2.5) == "2.50"
    assert format_rank(1.0) == "1" and format_rank(None) == "–"
    assert format_p_value(0.24887) == "2.49e-01" and format_p_value(1e-6) == "1.00e-06"
    assert (format_bool(True), format_bool(False), format_bool(None)) == ("✓", "✗", "–")
    kinds = {
        ("n_items", (21.0, 30.0)): "count",
        ("n_permutations", (10000,)): "count",
        ("p_value", (0.2, 1.0)): "p_value",
        ("slope_p_value", (0.2,)): "p_value",
        ("significant", (True, False)): "bool",
        ("rank", (1.0, 2.0)): "rank",
        ("slope", (-0.1, 2.0)): "score",
        ("top_k", (5, 10)): "count",
        ("note", ("a", None)): "text",
    }
    for (column, values), kind in kinds.items():
        assert value_kind(column, values) == kind, column
    assert format_value(21.0, "count") == "21"
    assert format_value(True, "bool") == "✓"
    assert format_value(0.003, "p_value") == "3.00e-03"
    assert format_value(-0.1213, "score") == "-0.121"


# -- index -----------------------------------------------------------------------------------


def test_index_has_one_card_per_task(site: Site) -> None:
    doc = parse(site.root / "index.html")
    assert doc.find("html").attrs.get("lang") == "en"
    cards = doc.find_all("li", class_="task-card")
    assert len(cards) == 2
    for card, name in zip(cards, ["perturbqa", "perturbseq"]):
        data = site.data[name]
        link = card.find("a")
        assert link.attrs["href"] == f"{name}/index.html"
        assert norm(link.text()) == data["task"]["label"]
        assert norm(data["task"]["summary"]) in norm(card.text())
        stats = {norm(s.find("dt").text()): norm(s.find("dd").text()) for s in card.find_all("div", class_="stat")}
        assert stats == {
            "Datasets": str(len(data["datasets"])),
            "Methods": str(len(_methods(data, False))),
            "Controls": str(len(_methods(data, True))),
            "Metrics": str(len(data["metrics"])),
        }
        meta = norm(card.find("p", class_="run-meta").text())
        assert format_timestamp(data["created"]) in meta
        assert data["openpert_version"] in meta
        # The top method links to its page, with its margin over the next and the paired tests' verdict.
        results = TaskResults(data, site.root / name)
        top = results.lead
        leader = card.find_all("p", class_="leader")[0]
        assert leader.find_all("a")[0].attrs["href"] == f"{name}/methods/{top.top_method_id}.html"
        text = norm(leader.text())
        other = results.method_label(top.runner_up_method_id)
        assert f"ahead of {other} by {format_number(top.margin)}" in text
        assert (f"significantly better in {top.significant} of {top.compared}" in text if top.significant
                else "not significantly better" in text or "no paired test" in text)


# -- task page -------------------------------------------------------------------------------


def test_task_page_names_every_method_metric_and_dataset(site: Site) -> None:
    data = site.data["perturbqa"]
    doc = site.task_page()
    text = norm(doc.text())
    for m in data["methods"] + data["metrics"]:
        assert norm(m["label"]) in text
    for d in data["datasets"]:
        assert doc.find("section", id=f"dataset-{slugify(d['dataset_id'])}")
    assert norm(data["task"]["motivation"]) in text
    doi = data["task"]["references"]["doi"][0]
    assert doc.find("a", href=f"https://doi.org/{doi}")
    bibtex = doc.find("details", class_="bibtex")
    assert data["task"]["references"]["bibtex"][0] in bibtex.find("pre").text()


def test_dataset_tables_show_results_json_numbers(site: Site) -> None:
    data = site.data["perturbqa"]
    doc = site.task_page()
    metrics = data["metrics"]
    checked = 0
    for d in data["datasets"]:
        did = d["dataset_id"]
        table = doc.find("table", id=f"table-{slugify(did)}")
        for ds in (s for s in data["dataset_scores"] if s["dataset_id"] == did):
            cells = _row_cells(table, ds["method_id"])
            assert len(cells) == 4 + 2 * len(metrics)
            assert norm(cells[2].text()) == format_number(ds["score"])
            for k, metric in enumerate(metrics):
                score = _score(data, did, ds["method_id"], metric["id"])
                raw, scaled = cells[3 + 2 * k], cells[4 + 2 * k]
                if score is None:
                    assert raw.attrs.get("data-sort") == ""
                    continue
                assert format_ci(score["raw"], score["ci_low"], score["ci_high"]) in norm(raw.text())
                assert float(raw.attrs["data-sort"]) == score["raw"]
                assert norm(scaled.text()) == format_number(score["scaled"])
                checked += 1
    assert checked == len(data["scores"])


def test_dataset_sections_list_their_public_files(site: Site) -> None:
    doc = site.task_page()
    section = doc.find("section", id="dataset-k562")
    table = next(t for t in section.find_all("table") if "file(s), fetched and verified" in t.find("caption").text())
    text = norm(table.text())
    assert "perturbqa/k562-de.csv" in text and "3.2 MB" in text and "(non-commercial)" in text
    assert "derived by pertsci.rda_tables:dorothea_regulons" in text and "unpinned" in text
    hrefs = [a.attrs.get("href", "") for a in table.find_all("a")]
    assert any(h.startswith("https://raw.githubusercontent.com/o/r/") for h in hrefs)
    assert not any(h.startswith("javascript:") for h in hrefs), "an origin is linked only when it is a safe URL"
    assert not any("file(s), fetched" in (t.find("caption").text()) for t in doc.find("section", id="dataset-rpe1").find_all("table")
                   if t.find_all("caption"))


def test_dataset_ranks_follow_scores(site: Site) -> None:
    data = site.data["perturbqa"]
    table = site.task_page().find("table", id="table-k562")
    band = table.find("tbody", class_="band-methods")
    rows = [r for r in band.elements() if "band" not in r.classes()]
    scores = {s["method_id"]: s["score"] for s in data["dataset_scores"] if s["dataset_id"] == "k562"}
    order = [r.attrs["data-method"] for r in rows]
    assert order == sorted(order, key=lambda m: -scores[m])
    assert [norm(r.elements()[0].text()) for r in rows] == [str(k + 1) for k in range(len(_methods(data, False)))]


def _overview_rows(table: Node) -> dict[str, list[Node]]:
    return {r.attrs["data-method"]: r.elements() for r in table.find_all("tr") if "data-method" in r.attrs}


def test_overview_shows_scores_ranks_and_tiers(site: Site) -> None:
    data = site.data["perturbqa"]
    doc = site.task_page()
    # The overview opens the page: it is the first section.
    first = next(n for n in doc.find("main").elements() if n.tag == "section")
    assert first.attrs["id"] == "overview"
    table = doc.find("table", id="table-overview")
    rows = _overview_rows(table)
    assert set(rows) == {m["id"] for m in data["methods"]}
    dataset_ids = [d["dataset_id"] for d in data["datasets"]]
    methods = {m["id"] for m in _methods(data, False)}
    results = TaskResults(data, site.results_dirs[0])
    for row in data["overall"]:
        cells = rows[row["method_id"]]
        rank = cells[0].find_all("span", class_="rk")
        if row["method_id"] in methods:
            # Ranked among methods: results.json also ranks the controls.
            expected = 1 + sum(o["score"] > row["score"] for o in data["overall"] if o["method_id"] in methods)
            assert norm(rank[0].text()) == str(expected)
        else:
            assert rank == []
        assert norm(cells[1].text()).startswith(format_number(row["score"]))
        for i, did in enumerate(dataset_ids):
            ds = next(s for s in data["dataset_scores"] if (s["dataset_id"], s["method_id"]) == (did, row["method_id"]))
            cell = cells[2 + i]
            if ds["status"] == "failed":
                assert "failed" in cell.classes() and norm(cell.text()) == "✕failed"
            else:
                assert norm(cell.text()).startswith(format_number(ds["score"]))
                assert cell.attrs["style"].startswith("background:#")
    # Metric columns (the headline metrics only): the mean over datasets of the clipped scaled
    # value, a failure counting 0.
    headline = [m for m in data["metrics"] if results.is_headline(m["id"])]
    assert headline and len(headline) < len(data["metrics"])  # the fixture has diagnostic metrics
    header = norm(table.find("thead").text())
    assert all(m["label"] in header for m in headline)
    assert not any(m["label"] in header for m in data["metrics"] if m not in headline)
    for k, metric in enumerate(headline):
        for mid in methods:
            values = []
            for did in dataset_ids:
                s = _score(data, did, mid, metric["id"])
                values.append(min(1.0, max(0.0, s["scaled"])) if s else 0.0)
            cell = rows[mid][2 + len(dataset_ids) + k]
            assert norm(cell.text()).startswith(format_number(sum(values) / len(values)))
    # Tiers: each methods band holds the methods of one tier, in rank order.
    titles = dict((key, title) for key, title, _ in TIERS)
    seen = set()
    for band in table.find_all("tbody"):
        members = [r.attrs["data-method"] for r in band.find_all("tr") if "data-method" in r.attrs]
        heading = norm(band.find("tr", class_="band").text())
        if "band-controls" in band.classes():
            assert set(members) == {m["id"] for m in _methods(data, True)}
            continue
        tier = next(k for k in band.classes() if k.startswith("tier-"))[5:]
        assert heading.startswith(titles[tier].upper()) or heading.startswith(titles[tier])
        for m in members:
            # Each band holds the methods of the tier the results model gave them.
            assert results.standing(m).tier == tier
        ranks = [int(norm(rows[m][0].find("span", class_="rk").text())) for m in members]
        assert ranks == sorted(ranks)
        seen.update(members)
    assert seen == methods
    # The controls band comes last and the legend explains the marks.
    assert "band-controls" in table.find_all("tbody")[-1].classes()
    legend = norm(doc.find("section", id="overview").text())
    assert "failed" in legend and "scaled score" in legend


def test_marks_follow_comparisons(site: Site) -> None:
    data = site.data["perturbqa"]
    doc = site.task_page()
    metric_index = {m["id"]: k for k, m in enumerate(data["metrics"])}
    not_significant = 0
    for c in data["comparisons"]:
        table = doc.find("table", id=f"table-{slugify(c['dataset_id'])}")
        k = metric_index[c["metric_id"]]
        cell = _row_cells(table, c["method_id"])[3 + 2 * k]
        best = _row_cells(table, c["best_method_id"])[3 + 2 * k]
        assert "best" in best.classes()
        assert "≈" not in best.text()
        if c["significant"]:
            assert "≈" not in cell.text()
        else:
            not_significant += 1
            mark = cell.find("span", class_="mark")
            assert norm(mark.text()) == "≈"
            assert f"p = {format_p_value(c['p_value'])}" in mark.attrs["title"]
    assert not_significant > 0, "the fixture should hold a non-significant comparison"
    assert "not significantly different" in norm(doc.find("p", class_="legend").text())


def test_failures_shown_with_exit_code_and_reason(site: Site) -> None:
    data = site.data["perturbqa"]
    doc = site.task_page()
    table = doc.find("table", id="table-failures")
    rows = {norm(r.elements()[0].text()): r for r in table.find("tbody").elements()}
    assert len(rows) == len(data["failures"]) == 3
    for f in data["failures"]:
        text = norm(rows[f["job_id"]].text())
        assert str(f["exit_code"]) in text
        assert describe_failure(f["exit_code"], f["reason"]) in text
    assert "memory limit exceeded" in norm(rows["k562/big_llm"].text())
    assert "time limit exceeded" in norm(rows["rpe1/gat"].text())
    # The failure log is copied and linked.
    link = rows["k562/big_llm"].find("a")
    assert (site.root / "perturbqa" / link.attrs["href"]).read_text().endswith(
        "memory limit exceeded (peak 2.1 GB > 2.0 GB)\n"
    )
    # In the leaderboards too, next to the method that failed.
    k562 = doc.find("table", id="table-k562")
    status = norm(_row_cells(k562, "big_llm")[-1].text())
    assert failure_label(137, "memory limit exceeded (peak 2.1 GB > 2.0 GB)") in status
    assert norm(_row_cells(k562, "big_llm")[3].text()) == "failed"
    rpe1 = doc.find("table", id="table-rpe1")
    assert "time limit exceeded (exit 143)" in norm(_row_cells(rpe1, "gat")[-1].text())
    # The overview marks the failed cell and counts the failure in the status column.
    overview = _overview_rows(doc.find("table", id="table-overview"))
    failed = overview["big_llm"][2]
    assert "failed" in failed.classes() and "memory limit exceeded (exit 137)" in failed.attrs["title"]
    status = overview["big_llm"][-1]
    assert "K562 essential: method memory limit exceeded (exit 137)" in status.attrs["title"]
    assert norm(status.text()).startswith("✕ 1")


def test_controls_sit_in_their_own_band(site: Site) -> None:
    data = site.data["perturbqa"]
    controls = {m["id"] for m in _methods(data, True)}
    methods = {m["id"] for m in _methods(data, False)}
    doc = site.task_page()
    tables = doc.find_all("table", class_="leaderboard")
    assert len(tables) == len(data["datasets"])
    tables.append(doc.find("table", id="table-overview"))
    for table in tables:
        band = table.find("tbody", data_band="controls")
        heading = band.elements()[0]
        assert "band" in heading.classes() and norm(heading.text()).startswith("Controls")
        assert heading.find("th").attrs["scope"] == "rowgroup"
        assert {r.attrs["data-method"] for r in band.find_all("tr") if "data-method" in r.attrs} == controls
        rest = table.find_all("tbody", class_="band-methods")
        assert {r.attrs["data-method"] for b in rest for r in b.find_all("tr") if "data-method" in r.attrs} == methods
        # The toggle exists, points at the table, and is hidden until the script shows it.
        toggle = doc.find("input", data_controls_for=table.attrs["id"])
        assert "hidden" in toggle.parent.attrs


def test_qc_flags_listed(site: Site) -> None:
    data = site.data["perturbqa"]
    text = norm(site.task_page().find("table", id="table-qc").text())
    for q in data["qc"]:
        assert q["flag"] in text and norm(q["message"]) in text


def test_csv_downloads_match_results(site: Site) -> None:
    data = site.data["perturbqa"]
    task = site.root / "perturbqa"
    doc = site.task_page()
    hrefs = {a.attrs["href"] for a in doc.find("section", id="downloads").find_all("a")}
    assert hrefs == {"results.json", "leaderboard_overall.csv", "leaderboard_k562.csv", "leaderboard_rpe1.csv",
                     "statistic_hardness.csv", "statistic_pairwise.csv"}
    assert (task / "results.json").read_bytes() == (site.results_dirs[0] / "results.json").read_bytes()

    overall = pd.read_csv(task / "leaderboard_overall.csv", float_precision="round_trip")
    assert set(overall["method_id"]) == {m["id"] for m in data["methods"]}
    overview = _overview_rows(doc.find("table", id="table-overview"))
    page_ranks = {m: norm("".join(n.text() for n in overview[m][0].find_all("span", class_="rk"))) or "–"
                  for m in overall["method_id"]}
    for row in data["overall"]:
        line = overall.set_index("method_id").loc[row["method_id"]]
        assert line["score"] == row["score"]
        assert page_ranks[row["method_id"]] == ("–" if pd.isna(line["rank"]) else str(int(line["rank"])))
        for ds in (s for s in data["dataset_scores"] if s["method_id"] == row["method_id"]):
            assert line[f"score_{ds['dataset_id']}"] == ds["score"]
    assert "exit 137" in overall.set_index("method_id").loc["big_llm", "failures"]
    assert set(overall["tier"].dropna()) <= {key for key, _, _ in TIERS}
    stats = pd.read_csv(task / "statistic_pairwise.csv")
    assert len(stats) == len(data["statistics"]["pairwise"]["table"])
    assert set(stats["significant"]) <= {True, False}

    for d in data["datasets"]:
        did = d["dataset_id"]
        table = pd.read_csv(task / f"leaderboard_{did}.csv", float_precision="round_trip").set_index("method_id")
        for s in (s for s in data["scores"] if s["dataset_id"] == did):
            line = table.loc[s["method_id"]]
            m = s["metric_id"]
            assert (line[f"{m}_raw"], line[f"{m}_scaled"]) == (s["raw"], s["scaled"])
            assert (line[f"{m}_ci_low"], line[f"{m}_ci_high"]) == (s["ci_low"], s["ci_high"])
            assert line[f"{m}_n_items"] == s["n_items"]
        for ds in (s for s in data["dataset_scores"] if s["dataset_id"] == did):
            assert table.loc[ds["method_id"], "score"] == ds["score"]
    rpe1 = pd.read_csv(task / "leaderboard_rpe1.csv").set_index("method_id")
    assert rpe1.loc["gat", "status"] == "failed"
    assert "time limit exceeded (exit 143)" in rpe1.loc["gat", "failures"]
    assert pd.isna(rpe1.loc["gat", "macro_auroc_raw"])


def test_component_pages(site: Site) -> None:
    data = site.data["perturbqa"]
    task = site.root / "perturbqa"
    doc = site.task_page()
    for m in data["methods"]:
        folder = "control_methods" if m["type"] == "control_method" else "methods"
        path = task / folder / f"{m['id']}.html"
        assert doc.find("a", href=f"{folder}/{m['id']}.html")
        page = parse(path)
        assert norm(page.find("h1").text()) == m["label"]
        params = {norm(r.elements()[0].text()): norm(r.elements()[1].text())
                  for r in page.find("table", id="table-parameters").find("tbody").elements()} \
            if m["parameters"] else {}
        assert params == {k: format_parameter(v) for k, v in m["parameters"].items()}
        images = [norm(c.text()) for c in page.find_all("code", class_="image")]
        assert images == [e["image"] for e in m["engines"] if "image" in e]
        setup = norm(page.find("ul", class_="setup").text())
        assert "numpy, scikit-learn" in setup
        jobs = norm(page.find("table", id="table-resources").text())
        for r in (r for r in data["resources"] if r["stage"] == "method" and r["method_id"] == m["id"]):
            assert r["job_id"] in jobs and format_duration(r["duration_s"]) in jobs
            assert format_memory(r["peak_memory_mb"]) in jobs
    big = norm(parse(task / "methods" / "big_llm.html").find("section", id="failures").text())
    assert "memory limit exceeded (exit 137)" in big
    for metric in data["metrics"]:
        page = parse(task / "metrics" / f"{metric['id']}.html")
        assert norm(page.find("h1").text()) == metric["label"]
        direction = "higher is better" if metric["maximize"] else "lower is better"
        assert direction in norm(page.find("header", class_="page-header").text())
        scores = page.find("table", id="table-scores")
        for s in (s for s in data["scores"] if s["metric_id"] == metric["id"]):
            assert format_ci(s["raw"], s["ci_low"], s["ci_high"]) in norm(scores.text())


def test_figures_are_labelled(site: Site) -> None:
    data = site.data["perturbqa"]
    doc = site.task_page()
    svgs = doc.find_all("svg")
    assert len(svgs) == len(data["datasets"]) + 1
    for svg in svgs:
        assert svg.attrs["role"] == "img"
        title_id, desc_id = svg.attrs["aria-labelledby"].split()
        assert norm(svg.find("title", id=title_id).text())
        assert len(norm(svg.find("desc", id=desc_id).text())) > 40
    heat = doc.find("section", id="dataset-k562").find("svg")
    tips = [norm(t.text()) for t in heat.find_all("title")]
    s = _score(data, "k562", "mlp", "accuracy")
    assert f"MLP · Accuracy: scaled {format_number(s['scaled'])} (raw {format_number(s['raw'])})" in tips
    assert any(t.startswith("Big LLM & co · Accuracy: failed") for t in tips)
    resources = doc.find("section", id="resources").find("svg")
    tips = [norm(t.text()) for t in resources.find_all("title")]
    assert any("Big LLM & co on K562 essential" in t and "exit 137" in t for t in tips)


def test_assets_are_local_and_links_resolve(site: Site) -> None:
    pages = sorted(site.root.rglob("*.html"))
    assert len(pages) == 2 * (1 + len(METHODS) + len(METRICS)) + 1
    for path in pages:
        doc = parse(path)
        all_ids = [n.attrs["id"] for n in doc.iter() if "id" in n.attrs]
        ids = set(all_ids)
        assert len(ids) == len(all_ids), f"{path}: duplicate ids"
        scripts = doc.find_all("script")
        assert [s.attrs.get("src") for s in scripts] == [
            "../" * (len(path.relative_to(site.root).parts) - 1) + "static/report.js"
        ]
        for node in doc.iter():
            for attr in ("src", "href"):
                url = node.attrs.get(attr)
                if url is None:
                    continue
                parsed = urlparse(url)
                assert not parsed.scheme.lower().startswith("javascript"), f"{path}: {url}"
                if node.tag in ("script", "link", "img"):
                    assert not parsed.scheme and not parsed.netloc and not url.startswith("/"), f"{path}: {url}"
                if parsed.scheme or parsed.netloc:
                    continue
                if url.startswith("#"):
                    assert url[1:] in ids, f"{path}: dangling anchor {url}"
                    continue
                target = (path.parent / parsed.path).resolve()
                assert target.is_file(), f"{path}: broken link {url}"


def test_text_from_results_is_escaped(site: Site) -> None:
    for path in sorted(site.root.rglob("*.html")):
        source = path.read_text(encoding="utf-8")
        assert "<script>alert" not in source, path
        assert 'href="javascript:' not in source
        assert "<b>markup</b>" not in source
    escaped = html.escape(HOSTILE, quote=True)
    assert escaped in (site.root / "perturbqa" / "index.html").read_text(encoding="utf-8")
    page = parse(site.root / "perturbqa" / "methods" / "gat.html")
    assert HOSTILE in page.find("p", class_="lead").text()  # shown as text, not run


def test_tables_are_accessible(site: Site) -> None:
    for path in [site.root / "perturbqa" / "index.html", site.root / "perturbqa" / "methods" / "mlp.html"]:
        doc = parse(path)
        for table in doc.find_all("table"):
            assert norm(table.find("caption").text())
            for th in table.find_all("th"):
                assert th.attrs.get("scope") in {"col", "row", "colgroup", "rowgroup"}, path


def test_output_is_deterministic(site: Site, tmp_path: Path) -> None:
    again = render_site(site.results_dirs, tmp_path / "again").parent
    first = sorted(p.relative_to(site.root) for p in site.root.rglob("*") if p.is_file())
    second = sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert first == second
    for rel in first:
        assert (site.root / rel).read_bytes() == (again / rel).read_bytes(), rel


def test_parent_folder_and_rerender_prune(site: Site, tmp_path: Path) -> None:
    out = tmp_path / "site"
    render_site([site.results_dirs[0].parent], out)  # results/ stands for every task in it
    assert (out / "perturbqa" / "index.html").is_file() and (out / "perturbseq" / "index.html").is_file()
    (out / "keep.txt").write_text("not ours")
    render_site([site.results_dirs[0]], out)
    assert not (out / "perturbseq").exists()
    assert (out / "keep.txt").read_text() == "not ours"
    assert len(parse(out / "index.html").find_all("li", class_="task-card")) == 1


def test_sparse_results_render(tmp_path: Path) -> None:
    folder = tmp_path / "bare"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"schema_version": 1, "task": {"name": "bare"}}))
    render_site([folder], tmp_path / "site")
    doc = parse(tmp_path / "site" / "bare" / "index.html")
    assert norm(doc.find("h1").text()) == "bare"
    assert "No job failed." in norm(doc.text())
    with pytest.raises(FileNotFoundError):
        render_site([tmp_path / "missing"], tmp_path / "site2")


def test_skipped_components_are_listed(tmp_path: Path) -> None:
    results_dir = write_results_dir(tmp_path / "results" / "perturbqa")
    data = json.loads((results_dir / "results.json").read_text())
    data["skipped"] = [{"id": "summer", "type": "method", "reason": "needs a language model: set OPENPERT_LLM_BASE_URL"}]
    (results_dir / "results.json").write_text(json.dumps(data))
    render_site([results_dir], tmp_path / "site")
    page = (tmp_path / "site" / "perturbqa" / "index.html").read_text()
    assert 'id="table-skipped"' in page and "summer" in page and "needs a language model" in page


# -- descriptions, labels, statistics, provenance --------------------------------------------


def test_markdown_in_descriptions_is_rendered_safely(site: Site) -> None:
    doc = site.task_page()
    about = doc.find("section", id="about")
    # A lead line (the description's first paragraph); the rest is collapsed under "More about the task".
    lead, rest = about.find_all("div", class_="md")[:2]
    assert norm(lead.text()).startswith("Given a perturbation") and lead.find_all("ul") == []
    assert rest.find_all("ul") and about.find_all("details", class_="about-more")
    assert norm(about.find("strong").text()) == "perturbation"
    assert [norm(c.text()) for c in rest.find_all("code")] == ["de", "dir"]
    assert len(about.find("ul").find_all("li")) == 2
    assert about.find("a", href="https://doi.org/10.1016/j.cell.2022.05.013").attrs["rel"] == "noopener noreferrer"
    text = norm(lead.text() + " " + rest.text())
    # The javascript: link keeps its text and loses its target; raw HTML shows as text.
    assert "a crafted link" in text and "javascript" not in text
    assert "<b>markup</b> & ampersands" in text
    for marker in ("**", "`", "](", "- `"):
        assert marker not in text, marker
    # Summaries are rendered inline (here in a tooltip-free card list and on the method page).
    mlp = parse(site.root / "perturbqa" / "methods" / "mlp.html")
    lead = mlp.find("p", class_="lead")
    assert norm(lead.find("strong").text()) == "multilayer" and "**" not in lead.text()
    assert mlp.find("section", id="about").find("ol")
    # Tooltips and the meta description carry plain text.
    assert mlp.find("meta", name="description").attrs["content"] == "A multilayer perceptron on gene embeddings."


def test_markdown_safety_rules() -> None:
    from openpert.report.markdown import allowed_href, plain_text, render_inline, render_markdown

    for bad in ("javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,x", "//evil.example/x", "file:///etc/passwd",
                "vbscript:x", "/\\evil.example"):
        assert not allowed_href(bad), bad
    for good in ("https://a.example/x", "http://a.example", "mailto:a@b.example", "docs/page.html", "#anchor", "../x"):
        assert allowed_href(good), good
    out = render_markdown("[x](javascript:alert(1)) [y](&#106;avascript:alert(1)) <img src=x onerror=alert(1)> "
                          "![pic](https://img.example/p.png) [ok](https://ok.example)")
    assert "javascript" not in out.replace("&#106;", "") and "<img" not in out and "onerror=alert(1)>" not in out
    assert '<a href="https://img.example/p.png" rel="noopener noreferrer">pic</a>' in out
    assert '<a href="https://ok.example" rel="noopener noreferrer">ok</a>' in out
    assert "&lt;img" in out
    assert render_markdown("# Title") == '<div class="md"><h4>Title</h4></div>'
    assert "<th scope=\"col\">" in render_markdown("| a |\n|---|\n| 1 |")
    assert render_inline("**a**\nb") == "<strong>a</strong> b"
    assert plain_text("**a** `b` [c](https://x.example)") == "a b c"
    assert render_markdown("") == "" and render_inline(None) == ""


def test_long_labels_are_cut_with_the_full_text_on_hover(site: Site) -> None:
    doc = site.task_page()
    overview = doc.find("table", id="table-overview")
    heads = [h for h in overview.find_all("th") if "v" in h.classes()]
    spans = [s for h in heads for s in h.find_all("span") if LONG_DATASET_NAME in (s.attrs.get("title") or "")]
    assert spans, "the long dataset name is on hover"
    shown = norm(spans[0].text())
    assert len(shown) <= 30 and shown.endswith("…") and LONG_DATASET_NAME.startswith(shown[:-1])
    # The leaderboard headers and the on-page navigation are cut too; the dataset's section says it whole.
    toc = norm(doc.find("nav", class_="toc").text())
    assert LONG_DATASET_NAME not in toc
    section = doc.find("section", id="dataset-rpe1")
    assert LONG_DATASET_NAME in norm(section.find("dl", class_="facts").text())
    # Metric headers carry the metric's summary on hover.
    macro = next(s for h in heads for s in h.find_all("span") if norm(s.text()) == "Macro AUROC" and "title" in s.attrs)
    assert "Macro AUROC of the predicted classes" in macro.attrs["title"]


def test_statistics_format_numbers_by_kind(site: Site) -> None:
    doc = site.task_page()
    table = doc.find("table", id="table-stat-hardness")
    header = [norm(th.text()) for th in table.find("thead").find_all("th")]
    assert header == ["Method", "Slope", "p-value", "Items", "Significant"]
    first = [norm(td.text()) for td in table.find("tbody").find_all("tr")[0].elements()]
    assert first == ["MLP", "-0.121", "3.00e-03", "412", "✓yes"]


def test_pairwise_tests_as_a_matrix_without_controls(site: Site) -> None:
    data = site.data["perturbqa"]
    section = site.task_page().find("section", id="stat-pairwise")
    matrix = section.find("table", class_="pairwise")
    methods = [m for m in _methods(data, False)]
    row_labels = [norm(r.find("th").text()) for r in matrix.find("tbody").find_all("tr")]
    assert sorted(row_labels) == sorted(m["label"] for m in methods)
    assert len(matrix.find_all("td")) == len(methods) ** 2
    cells = [c for c in matrix.find_all("td") if "pm-self" not in c.classes()]
    # MLP vs Graph attention differ by less than the threshold: not significant; Big LLM beats both.
    tips = {c.attrs["title"].split(":")[0]: c for c in cells}
    assert "pm-tie" in tips["MLP is not significantly different from Graph attention"].classes()
    assert "pm-better" in tips["Big LLM & co is significantly better than MLP"].classes()
    assert "pm-worse" in tips["MLP is significantly worse than Big LLM & co"].classes()
    assert "p = 1.00e-04" in tips["MLP is significantly worse than Big LLM & co"].attrs["title"]
    # The full table, controls included, is one click away.
    details = [d for d in section.find_all("details") if d.find_all("table")]
    full = details[0].find("table")
    assert len(full.find("tbody").find_all("tr")) == len(data["statistics"]["pairwise"]["table"])
    assert "Ground truth" in norm(full.text())


def test_provenance_on_every_task_page(site: Site) -> None:
    doc = site.task_page("perturbqa")
    header = norm(doc.find("header", class_="page-header").find("p", class_="run-meta").text())
    assert "commit 4234136e0c (modified)" in header and "engine local" in header and "sandbox bubblewrap" in header
    facts = doc.find("section", id="provenance").find("dl", class_="facts")
    values = dict(zip([norm(t.text()) for t in facts.find_all("dt")], [norm(d.text()) for d in facts.find_all("dd")]))
    assert values["Commit"] == "4234136e0c1f2b3a4d5e6f708192a3b4c5d6e7f8 uncommitted changes"
    assert values["openpert version"] == "0.1.0" and values["Engine"] == "local"
    assert values["Ran"].startswith("2026-11-21 10:00 UTC")
    n_jobs = len(site.data["perturbqa"]["resources"])
    assert values["Sandbox"] == f"bubblewrap ({n_jobs} jobs)"
    digests = doc.find("table", id="table-dataset-digests")
    assert "train.h5ad" in norm(digests.text()) and f"sha256:{100:064x}" in norm(digests.text())
    assert len(doc.find("table", id="table-component-digests").find("tbody").find_all("tr")) == len(METHODS)
    assert values["Host"].startswith("2 CPUs, ") and "Linux-6.8-x86_64" in values["Host"]
    packages = norm(doc.find("table", id="table-packages").text())
    assert "numpy" in packages and "2.1.3" in packages
    # A run that recorded no provenance says so for each field.
    other = site.task_page("perturbseq").find("section", id="provenance")
    values = dict(zip([norm(t.text()) for t in other.find_all("dt")], [norm(d.text()) for d in other.find_all("dd")]))
    assert values["Commit"] == values["Dataset digests"] == values["Component digests"] == "not recorded"
    bare = TaskResults({"task": {"name": "x"}}, Path("."))
    from openpert.report.provenance import provenance_section

    assert provenance_section(bare).count("not recorded") == 9  # every fact of the section: time, version, commit, engine, sandbox, host, packages, digests


def test_method_page_numbers(site: Site) -> None:
    data = site.data["perturbqa"]
    page = parse(site.root / "perturbqa" / "methods" / "mlp.html")
    facts = page.find("header", class_="page-header").find("dl", class_="facts")
    values = dict(zip([norm(t.text()) for t in facts.find_all("dt")], [norm(d.text()) for d in facts.find_all("dd")]))
    assert values["Overall rank"] == f"1 of {len(_methods(data, False))}"
    assert values["Mean score"] == format_number(next(o["score"] for o in data["overall"] if o["method_id"] == "mlp"))
    versus = norm(page.find("table", id="table-scores").text())
    assert "(p = 4.10e-01)" in versus or "(p = 2.00e-03)" in versus


def test_config_errors_are_listed(tmp_path: Path) -> None:
    results_dir = write_results_dir(tmp_path / "results" / "perturbqa")
    data = json.loads((results_dir / "results.json").read_text())
    data["config_errors"] = [{"config": "src/perturbqa/methods/broken/config.vsh.yaml", "component": "broken",
                              "type": "method", "reason": "invalid YAML: <oops>"}]
    (results_dir / "results.json").write_text(json.dumps(data))
    render_site([results_dir], tmp_path / "site")
    table = parse(tmp_path / "site" / "perturbqa" / "index.html").find("table", id="table-config-errors")
    assert "invalid YAML: <oops>" in norm(table.text()) and "broken" in norm(table.text())


def test_page_weight_stays_small(site: Site) -> None:
    from openpert.report.site import PAGE_WEIGHT_LIMIT, page_weight

    for task in site.data:
        weight = page_weight(site.root / task / "index.html")
        html_size = (site.root / task / "index.html").stat().st_size
        assert html_size < weight < PAGE_WEIGHT_LIMIT
    bad = site.root / "bad.html"
    bad.write_text('<link rel="stylesheet" href="https://cdn.example/x.css">')
    with pytest.raises(ValueError, match="outside the site"):
        page_weight(bad)
    bad.unlink()


def test_scale_sentence_and_headline_metrics(site: Site) -> None:
    data = site.data["perturbqa"]
    doc = site.task_page()
    overview = doc.find("section", id="overview")
    assert norm(data["scale"]["description"]) in norm(overview.text())
    scale = doc.find("section", id="scale")
    text = norm(scale.text())
    assert "Headline metrics (in the score)" in text and "Diagnostic metrics (shown only)" in text
    bounds = scale.find("table", id="table-scale").find("tbody").find_all("tr")
    assert len(bounds) == len(data["scale"]["bounds"])
    # diagnostic metrics carry a tag on every leaderboard, headline metrics none
    table = doc.find("table", id="table-k562")
    heads = [th for th in table.find_all("th") if "metric-head" in th.classes()]
    assert len(heads) == len(METRICS)
    for (metric_id, *_), head in zip(METRICS, heads):
        tags = [t for t in head.find_all("span") if "tag-diagnostic" in t.classes()]
        assert bool(tags) == (metric_id in DIAGNOSTIC), metric_id


def test_adversarial_and_ceiling_controls_never_rank(site: Site) -> None:
    doc = site.task_page()
    table = doc.find("table", id="table-k562")
    band = table.find("tbody", data_band="controls")
    in_band = {r.attrs["data-method"] for r in band.find_all("tr") if "data-method" in r.attrs}
    assert {"prevalence_game", "half_cells", "ground_truth", "random_guess"} <= in_band
    assert "mean_baseline" not in in_band  # a baseline ranks among the methods
    for row in band.find_all("tr"):
        if "data-method" in row.attrs:
            assert norm(row.elements()[0].text()) in ("", "–")


def test_gameability_and_dynamic_range_are_shown_and_flagged(site: Site) -> None:
    data = site.data["perturbqa"]
    doc = site.task_page()
    rows = doc.find("table", id="table-gameability").find("tbody").find_all("tr")
    assert len(rows) == len(data["gameability"])
    flagged = [r for r in rows if "gameable" in norm(r.elements()[-1].text())]
    assert len(flagged) == sum(bool(g["gameable"]) for g in data["gameability"]) > 0
    # the leaderboard of a dataset marks the gameable metrics in their column heads
    for did, _, _ in [(d["dataset_id"], None, None) for d in data["datasets"]]:
        table = doc.find("table", id=f"table-{did}")
        marked = sum(1 for t in table.find_all("span") if "tag-gameable" in t.classes())
        assert marked == sum(1 for g in data["gameability"] if g["dataset_id"] == did and g["gameable"])
    ranges = doc.find("table", id="table-dynamic-range").find("tbody").find_all("tr")
    assert len(ranges) == len(data["dynamic_range"])
    small = [r for r in ranges if norm(r.elements()[-1].text()) == "small"]
    assert len(small) == sum(bool(r["small"]) for r in data["dynamic_range"]) > 0


def test_language_model_use_and_its_flags(tmp_path: Path) -> None:
    folder = write_results_dir(tmp_path / "results" / "perturbqa")
    data = json.loads((folder / "results.json").read_text())
    counts = {"questions": 40, "samples": 120, "prompts": 200, "generated": 180, "cache_hits": 20, "requests": 181,
              "retries": 1, "prompt_tokens": 123456, "completion_tokens": 7890, "unmetered": 0, "failed": 0,
              "context_window": 0}
    data["llm_usage"] = [
        {"dataset_id": "k562", "method_id": "big_llm", "component": "big_llm", "stage": "method", "n_jobs": 1, **counts,
         "abstentions": 90, "fallbacks": 30, "abstention_rate": 0.75, "fallback_rate": 0.75, "failed": 3,
         "context_window": 4096},
        {"dataset_id": "rpe1", "method_id": "mlp", "component": "judge", "stage": "metric", "n_jobs": 1, **counts,
         "abstentions": 60, "fallbacks": 20, "abstention_rate": 0.5, "fallback_rate": 0.5, "unmetered": 3},
    ]
    data["llm_abstention_threshold"] = 0.1
    data["qc"] += [
        {"flag": "llm_abstentions", "dataset_id": "k562", "method_id": "big_llm", "metric_id": None,
         "message": f"big_llm on k562: 90 of 120 answers (75.0%) {HOSTILE}; its score is mostly the fallback's, not the model's"},
        {"flag": "llm_judge_abstentions", "dataset_id": "rpe1", "method_id": "mlp", "metric_id": None,
         "message": "The judge judge on mlp's outputs, dataset rpe1: 60 of 120 answers (50.0%)"},
        {"flag": "llm_prompt_too_long", "dataset_id": "k562", "method_id": "big_llm", "metric_id": None,
         "message": "big_llm on k562: 3 of 200 prompts were longer than the model's context window of 4,096 tokens"},
    ]
    (folder / "results.json").write_text(json.dumps(data))
    render_site([folder], tmp_path / "site")
    doc = parse(tmp_path / "site" / "perturbqa" / "index.html")
    assert HOSTILE not in (tmp_path / "site" / "perturbqa" / "index.html").read_text()
    usage = doc.find("table", id="table-llm-usage")
    rows = [[norm(c.text()) for c in r.elements()] for r in usage.find("tbody").find_all("tr")]
    assert rows[0] == ["Big LLM & co", "K562 essential", "big_llm", "40", "120", "90", "75.0% flagged", "30", "3 flagged",
                       "181", "1", "20", "123,456", "7,890"]
    assert rows[1][2:] == ["judge (judge)", "40", "120", "60", "50.0% flagged", "20", "0", "181", "1", "20", "123,456 *",
                           "7,890 *"]
    assert "lower bounds" in norm(doc.find("section", id="llm-usage").text()) and "above 10%" in norm(doc.text())
    # Beside the method on its dataset's leaderboard; a judge's unreadable gradings do not mark the judged method.
    big = doc.find("table", id="table-k562").find("tr", data_method="big_llm")
    assert [norm(t.text()) for t in big.find_all("span", class_="tag-abstains")] == ["score mostly fallback",
                                                                                      "prompts too long"]
    assert not doc.find("table", id="table-rpe1").find("tr", data_method="mlp").find_all("span", class_="tag-abstains")
    assert not doc.find("table", id="table-k562").find("tr", data_method="mlp").find_all("span", class_="tag-abstains")
    # Each method's page shows its own rows (the judge's row of mlp on mlp's page).
    pages = {m: parse(next((tmp_path / "site" / "perturbqa").rglob(f"{m}.html"))) for m in ("big_llm", "mlp", "gat")}
    assert [len(p.find_all("table", id="table-llm-usage")) for p in pages.values()] == [1, 1, 0]
    assert "75.0% flagged" in norm(pages["big_llm"].find("table", id="table-llm-usage").text())


def test_scores_say_how_many_headline_metrics_they_average(tmp_path: Path) -> None:
    folder = write_results_dir(tmp_path / "results" / "perturbqa")
    data = json.loads((folder / "results.json").read_text())
    # Accuracy was skipped (its judge needs a language model): no method has a value of it.
    data["scores"] = [s for s in data["scores"] if s["metric_id"] != "accuracy"]
    data["skipped"] = [{"id": "accuracy", "type": "metric", "reason": "needs a language-model server " + HOSTILE}]
    (folder / "results.json").write_text(json.dumps(data))
    page_path = render_site([folder], tmp_path / "site").parent / "perturbqa" / "index.html"
    page_html = page_path.read_text()
    doc = parse(page_path)
    n_headline = len(data["headline_metrics"])
    note = norm(doc.find("p", class_="coverage-note").text())
    assert f"The scores average {n_headline - 1} of {n_headline} headline metrics" in note
    assert "Accuracy (needs a language-model server" in note
    assert "of " + str(n_headline) in norm(doc.find("section", id="qc").find("p", class_="qc-note").text())
    assert HOSTILE not in page_html


def test_every_headline_metric_averaged_needs_no_note(site: Site) -> None:
    assert "coverage-note" not in (site.root / "perturbqa" / "index.html").read_text()


# -- a task page over its weight limit -------------------------------------------------------


@pytest.fixture
def crowded_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A task with 40 methods more than the fixture's: tables, matrix and job list grow with them."""
    import report_fixture

    extra = [(f"method_{i:02d}", f"Method {i}", None, 0.3 + 0.01 * i) for i in range(40)]
    monkeypatch.setattr(report_fixture, "METHODS", [*report_fixture.METHODS, *extra])
    original = report_fixture._method

    def method(mid: str, label: str, control: str | None) -> dict[str, Any]:
        # The fixture's methods have parameters of their own; the added ones run like the MLP.
        if not mid.startswith("method_"):
            return original(mid, label, control)
        return {**original("mlp", label, control), "id": mid, "label": label}

    monkeypatch.setattr(report_fixture, "_method", method)
    return write_results_dir(tmp_path / "results" / "perturbqa")


def _local_targets(page: Path) -> list[Path]:
    """The files a page's local links and assets point at."""
    targets = []
    for url in re.findall(r'(?:href|src)="([^"]*)"', page.read_text(encoding="utf-8")):
        parsed = urlparse(html.unescape(url))
        if not parsed.scheme and parsed.path:
            targets.append((page.parent / parsed.path).resolve())
    return targets


def test_a_heavy_task_page_hands_its_datasets_and_heaviest_sections_to_pages_of_their_own(
        crowded_results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    import openpert.report.site as site_module
    from openpert.report.site import page_weight

    inline = render_site([crowded_results], tmp_path / "inline").parent / "perturbqa"
    whole = page_weight(inline / "index.html")
    assert not (inline / "datasets").exists()  # under the limit, the task is one page
    limit = whole // 3
    monkeypatch.setattr(site_module, "PAGE_WEIGHT_LIMIT", limit)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a page still over the limit would warn
        task_dir = render_site([crowded_results], tmp_path / "split").parent / "perturbqa"
    data = json.loads((crowded_results / "results.json").read_text())
    index = task_dir / "index.html"
    assert page_weight(index) <= limit < whole
    doc = parse(index)
    # The overview stays, its test matrix linked; the datasets are listed with links to their pages.
    assert doc.find("table", id="table-overview")
    assert not doc.find_all("table", id="table-tests")
    assert doc.find("p", class_="tests-link").find("a").attrs["href"] == "#datasets"
    # Every job is on its dataset's page, the task page keeps the chart.
    assert not doc.find_all("table", id="table-resources")
    assert doc.find("p", class_="jobs-elsewhere")
    n_jobs = 0
    links = [a.attrs["href"] for a in doc.find("section", id="datasets").find_all("a")]
    assert links == [f"datasets/{slugify(d['dataset_id'])}.html" for d in data["datasets"]]
    for d in data["datasets"]:
        did = slugify(d["dataset_id"])
        assert not doc.find_all("section", id=f"dataset-{did}")
        page = task_dir / "datasets" / f"{did}.html"
        ds = parse(page)
        assert ds.find("section", id=f"dataset-{did}").find("table", id=f"table-{did}")
        crumbs = [a.attrs["href"] for a in ds.find("nav", class_="breadcrumbs").find_all("a")]
        assert crumbs == ["../../index.html", "../index.html"]
        assert ds.find("a", class_="download").attrs["href"] == f"../leaderboard_{did}.csv"
        row = ds.find("table", id=f"table-{did}").find("tr", data_method="mlp")
        assert row.find("a").attrs["href"] == "../methods/mlp.html"
        assert HOSTILE not in page.read_text()  # the source files' citation stays inert here too
        assert page_weight(page) <= limit
        # The dataset's columns of the test matrix, every method's row against the dataset's best.
        matrix = ds.find("table", id="table-tests")
        pairs = [c for c in data["comparisons"] if c["dataset_id"] == d["dataset_id"]]
        heads = matrix.find_all("th", class_="v")
        assert 0 < len(heads) <= len({c["metric_id"] for c in pairs})
        assert matrix.find("tr", data_method="mlp")
        jobs = [norm(r.find("th").text()) for r in ds.find("table", id="table-resources").find("tbody").find_all("tr")]
        assert sorted(jobs) == sorted(r["job_id"] for r in data["resources"] if r["dataset_id"] == d["dataset_id"])
        n_jobs += len(jobs)
    assert n_jobs == len(data["resources"])
    # The heaviest other section (the 48 x 48 pairwise-test matrix) moved, its heading left with a
    # link; the lighter ones stayed.
    moved = {s.attrs["id"]: s.find("p", class_="moved-section").find("a").attrs["href"]
             for s in doc.find_all("section") if s.find_all("p", class_="moved-section")}
    assert "stat-pairwise" in moved and "overview" not in moved
    for section_id, href in moved.items():
        assert href == f"{section_id}.html"
        assert parse(task_dir / href).find("section", id=section_id).find_all("table")
    assert doc.find("section", id="components").find_all("ul", class_="component-list")
    # Every page of the task resolves its local links; the same results give the same bytes.
    for page in task_dir.rglob("*.html"):
        missing = [t for t in _local_targets(page) if not t.exists()]
        assert not missing, f"{page}: {missing}"
    again = render_site([crowded_results], tmp_path / "again").parent / "perturbqa"
    for page in task_dir.rglob("*.html"):
        assert (again / page.relative_to(task_dir)).read_bytes() == page.read_bytes()


def test_a_task_page_over_the_limit_however_split_still_renders_with_a_warning(
        crowded_results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import openpert.report.site as site_module

    monkeypatch.setattr(site_module, "PAGE_WEIGHT_LIMIT", 50_000)  # less than the overview alone
    with pytest.warns(UserWarning, match="over 50,000"):
        task_dir = render_site([crowded_results], tmp_path / "site").parent / "perturbqa"
    doc = parse(task_dir / "index.html")
    assert doc.find("table", id="table-overview")  # the overview never moves
    # Everything but the overview and the list of datasets went to pages of its own, in the page's order.
    kept = [s.attrs["id"] for s in doc.find_all("section") if not s.find_all("p", class_="moved-section")]
    assert kept == ["overview", "datasets"]
    assert (task_dir / "provenance.html").is_file() and (task_dir / "downloads.html").is_file()


def test_pages_split_off_a_task_page_keep_hostile_names_inert(
        crowded_results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import openpert.report.site as site_module

    data = json.loads((crowded_results / "results.json").read_text())
    data["datasets"][0]["dataset_name"] = "K562 " + HOSTILE
    data["datasets"][0]["dataset_summary"] = "A screen [click](javascript:alert(1))."
    data["statistics"]["pairwise"]["label"] = "Paired tests " + HOSTILE
    (crowded_results / "results.json").write_text(json.dumps(data))
    monkeypatch.setattr(site_module, "PAGE_WEIGHT_LIMIT", 50_000)
    with pytest.warns(UserWarning):
        task_dir = render_site([crowded_results], tmp_path / "site").parent / "perturbqa"
    pages = [task_dir / "index.html", task_dir / "stat-pairwise.html",
             task_dir / "datasets" / f"{slugify(data['datasets'][0]['dataset_id'])}.html"]
    for page in pages:
        text = page.read_text()
        assert HOSTILE not in text and 'href="javascript:' not in text.lower(), page
    # The names reach the pages as text (their headings read them back whole).
    assert norm(parse(pages[2]).find("h1").text()) == "K562 " + HOSTILE
    assert norm(parse(pages[1]).find("h1").text()) == "Paired tests " + HOSTILE
