"""The task page's What changed and History sections, from the run archive."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from archive_fixture import write_archive
from report_fixture import HOSTILE, build_results, write_results_dir

from openpert.cli import main
from openpert.report import render_site
from openpert.report.formatting import MISSING
from openpert.report.history import archive_sections, task_history
from openpert.report.task_results import load_results
from openpert.results.archive import add_record, list_records


def _section(html: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}".*?</section>', html, re.S)
    assert match, f"no section {section_id}"
    return match.group(0)


def _row(section: str, label: str) -> list[str]:
    for row in re.findall(r"<tr>(.*?)</tr>", section, re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        if cells and cells[0] == label:
            return cells
    raise AssertionError(f"no row {label!r}")


@pytest.fixture()
def site_with_archive(tmp_path: Path) -> Path:
    archive = write_archive(tmp_path)
    results = write_results_dir(tmp_path / "results" / "perturbqa")
    assert main(["report", str(results), "-o", str(tmp_path / "site"), "--archive", str(archive)]) == 0
    return tmp_path / "site" / "perturbqa" / "index.html"


def test_what_changed_names_the_previous_record_and_what_moved(site_with_archive: Path) -> None:
    html = site_with_archive.read_text()
    changed = _section(html, "what-changed")
    assert "2026-11-11T0830Z-1111111" in changed  # the newer of the two earlier runs, not the oldest
    assert "Methods added: gat." in changed and "Components whose code changed: mlp." in changed
    mlp = _row(changed, "MLP")
    assert mlp[1] == "code changed" and mlp[2] == "2 → 1 (up 1)"
    assert mlp[5] == "+0.400"
    gat = _row(changed, "Graph attention")
    assert gat[1] == "new" and gat[2] == f"{MISSING} → 3"
    assert _row(changed, "Big LLM &amp; co")[2] == "1 → 2 (down 1)"
    # The toc links to both sections, placed after the overview.
    assert html.index('href="#what-changed"') < html.index('href="#history"') < html.index('href="#scale"')


def test_history_shows_each_methods_overall_score_over_the_runs(site_with_archive: Path) -> None:
    history = _section(site_with_archive.read_text(), "history")
    header = re.findall(r'<th scope="col"[^>]*>(.*?)</th>', history, re.S)
    assert [re.sub(r"<[^>]+>", "", h).strip() for h in header] == ["Method", "2026-11-10 1010101", "2026-11-11 1111111",
                                                                   "This run", "Trend"]
    current = {r["method_id"]: r["score"] for r in build_results()["overall"]}
    mlp = _row(history, "MLP")
    assert mlp[1:4] == [f"{current['mlp'] - 0.5:.3f}", f"{current['mlp'] - 0.4:.3f}", f"{current['mlp']:.3f}"]
    assert _row(history, "Graph attention")[1:3] == [MISSING, MISSING]
    assert history.count('class="sparkline"') == len(re.findall(r"<tr>", history)) - 1


def test_a_task_without_earlier_records_says_so(tmp_path: Path) -> None:
    results_dir = write_results_dir(tmp_path / "results" / "perturbqa")
    archive = tmp_path / "archive"
    add_record(results_dir, archive)  # only this very run is archived
    results = load_results(results_dir / "results.json")
    earlier, archived = task_history(list_records(archive), results)
    assert earlier == [] and archived
    sections = dict((s[0], s[2]) for s in archive_sections(list_records(archive), results))
    assert "No earlier run of this task is archived" in sections["what-changed"]
    assert "This run" in sections["history"]


def test_later_records_are_not_compared_with(tmp_path: Path) -> None:
    archive = write_archive(tmp_path)
    data = build_results()
    data["created"] = "2026-11-10T12:00:00+00:00"  # between the two archived runs
    folder = tmp_path / "mid" / "perturbqa"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(data))
    earlier, archived = task_history(list_records(archive), load_results(folder / "results.json"))
    assert [rid for rid, _ in earlier] == ["2026-11-10T0830Z-1010101"] and not archived


def test_without_an_archive_the_page_has_neither_section(tmp_path: Path) -> None:
    results = write_results_dir(tmp_path / "results" / "perturbqa")
    html = (render_site([results], tmp_path / "site").parent / "perturbqa" / "index.html").read_text()
    assert 'id="what-changed"' not in html and 'id="history"' not in html


def test_sparkline_draws_each_run_and_leaves_gaps() -> None:
    from openpert.report.history import _sparkline

    svg = _sparkline("history-0", HOSTILE, [0.5, None, 0.2, 1.4])
    assert HOSTILE not in svg and "&lt;script&gt;" in svg
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" class="sparkline" viewBox="0 0 96 24"')
    assert 'aria-labelledby="history-0-title history-0-desc"' in svg
    # The run without a score breaks the line: one line through the last two points, a dot on each of three.
    assert re.findall(r'<polyline points="([^"]*)"', svg) == ["63.0,17.4 93.0,3.0"]  # 1.4 is drawn at the top
    assert re.findall(r'<circle cx="([^"]*)" cy="([^"]*)"', svg) == [("3.0", "12.0"), ("63.0", "17.4"), ("93.0", "3.0")]
    assert re.search(r'<desc id="history-0-desc">([^<]*)</desc>', svg).group(1) == f"0.500, {MISSING}, 0.200, 1.40"  # three significant digits
