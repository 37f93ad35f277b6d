"""Tests of the site's front page: one card per task, its leader, margin and significance, escaping."""

from __future__ import annotations

import copy
import html
import re
from pathlib import Path
from typing import Any

from report_fixture import HOSTILE, build_results  # noqa: E402

from openpert.report.index_page import render_index
from openpert.report.paths import TaskPaths
from openpert.report.task_results import TaskResults


def site_tasks(*datas: dict[str, Any]) -> list[tuple[TaskResults, TaskPaths]]:
    tasks = []
    for data in datas:
        results = TaskResults(data, Path("/nonexistent"))
        tasks.append((results, TaskPaths(results, data["task"]["name"])))
    return tasks


def test_each_card_names_its_leader_margin_and_significance() -> None:
    first, second = build_results(), build_results(task_name="perturbseq", label="Perturb-seq", seed=3,
                                                   provenance=False)
    tasks = site_tasks(first, second)
    page = str(render_index(tasks))
    cards = re.findall(r'<li class="card task-card">.*?</li>\s*(?=<li class="card|</ul>)', page, re.S)
    assert len(cards) == 2
    assert "2 tasks. Each method is scored on every dataset" in page
    for card, (results, paths) in zip(cards, tasks):
        top = results.lead
        assert top is not None and top.runner_up_method_id is not None
        method = results.method(top.top_method_id)
        name = html.escape(method.get("label"), quote=False)
        assert f'<h2><a href="{paths.slug}/index.html">{results.label}</a></h2>' in card
        assert f'<a href="{paths.slug}/{paths.method_page(method)}"><strong>{name}</strong></a>' in card
        runner_up = html.escape(results.method_label(top.runner_up_method_id), quote=False)
        assert f"ahead of {runner_up} by " in card
        verdict = re.search(r'<span class="margin">(.*?)</span>', card).group(1).rsplit("; ", 1)[1]
        if top.compared == 0:
            assert verdict == "no paired test between them"
        elif top.significant == 0:
            assert verdict == f"not significantly better in any of {top.compared} paired tests"
        else:
            assert verdict == f"significantly better in {top.significant} of {top.compared} paired tests (p &lt; 0.05)"
    assert 'commit <code title="4234136e0c1f2b3a4d5e6f708192a3b4c5d6e7f8">4234136e0c</code>' in cards[0]
    assert "commit" not in cards[1]


def test_a_task_without_results_has_a_bare_card() -> None:
    page = str(render_index(site_tasks({"schema_version": 1, "task": {"name": "bare"}})))
    assert "1 task. Each method" in page
    assert 'class="leader"' not in page
    assert '<p class="run-meta">Run <time datetime="">–</time> · openpert –</p>' in page


def test_hostile_text_on_the_index_is_inert() -> None:
    data = copy.deepcopy(build_results())
    data["task"]["label"] = HOSTILE
    data["task"]["summary"] = HOSTILE + " [x](javascript:alert(1))"
    data["openpert_version"] = HOSTILE
    data["created"] = '"><script>alert(1)</script>'
    for method in data["methods"]:
        method["label"] = HOSTILE
    page = str(render_index(site_tasks(data)))
    assert page.count("<script") == 1  # the page's own script
    assert "javascript:" not in page
    assert page.count("&lt;script&gt;") >= 4
