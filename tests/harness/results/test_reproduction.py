"""openpert.results.reproduction: published results beside a run's, on synthetic declarations and runs."""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest

from openpert.config.viash import ConfigError
from openpert.results.reproduction import (
    RunItems,
    collect_reproduction,
    compare_items,
    declaration_problems,
    load_declarations,
    parse_value,
    report_amendment,
    reproduction_section,
)

DECLARATIONS = """
sources:
  - id: table1
    label: Toy paper, Table 1
    citation: "Someone et al. (2025). <b>Toy</b>."
    decimals: 2
    metric: AUROC
    metrics: {AUROC: auroc}
    datasets:
      A: ds_a
      B: {dataset_id: ds_b, not_run: "B is a large dataset, fetched with --include-large."}
      C: {dataset_id: ds_c, note: "C has few items."}
    methods:
      Inside: {method_id: inside, differences: "Inside differs in its graph."}
      Outside: {method_id: outside, differences: "Outside uses another graph."}
      Bare: bare
      Skipped: skipped_method
      Broken: broken
      Missing: {method_id: null, not_run: "Not implemented here."}
      Talker: {method_id: talker, reported: "A language model: shown as the paper reports it."}
    values:
      Inside: {A: 0.55 ± .02, B: 0.60 ± .01}
      Outside: {A: "0.55 ± 0.02"}
      Bare: {A: 0.53, C: {value: 0.70, note: "Row-level cause."}}
      Skipped: {A: 0.5 ± .01}
      Broken: {A: 0.5 ± .01}
      Missing: {A: 0.61 ± .01}
      Talker: {A: 0.60 ± .00}
      Unknown: {A: 0.52 ± .01}
"""


def _task(tmp_path: Path, declarations: str = DECLARATIONS, name: str = "toy") -> Path:
    task_dir = tmp_path / "src" / name
    (task_dir / "api").mkdir(parents=True)
    (task_dir / "api" / "published_results.yaml").write_text(textwrap.dedent(declarations))
    return task_dir


def _results(scores: dict[tuple[str, str], float], **extra) -> dict:
    return {
        "task": {"name": "toy"},
        "datasets": [{"dataset_id": "ds_a", "made_by": "loader"}, {"dataset_id": "ds_c", "made_by": "loader"}],
        "methods": [{"id": m} for m in ("inside", "outside", "bare", "broken", "talker")],
        "metrics": [{"id": "auroc"}],
        "scores": [{"dataset_id": d, "method_id": m, "metric_id": "auroc", "raw": v, "ci_low": v - 0.01,
                    "ci_high": v + 0.01, "n_seeds": 1, "raw_sd": None} for (d, m), v in scores.items()],
        "skipped": [{"id": "skipped_method", "type": "method", "reason": "needs a language model"}],
        "failures": [{"dataset_id": "ds_a", "method_id": "broken", "exit_code": 137, "reason": "memory limit exceeded"}],
        **extra,
    }


def _row(section: dict, dataset: str, method: str) -> dict:
    (row,) = [r for r in section["rows"] if r["published_dataset"] == dataset and r["published_method"] == method]
    return row


@pytest.fixture
def section(tmp_path):
    task_dir = _task(tmp_path)
    results = _results({("ds_a", "inside"): 0.568, ("ds_a", "outside"): 0.51, ("ds_a", "bare"): 0.534,
                        ("ds_c", "bare"): 0.66})
    return reproduction_section(results, task_dir)


def test_a_value_inside_its_spread_reproduces(section):
    row = _row(section, "A", "Inside")
    assert row["status"] == "reproduced" and row["within_spread"] is True
    assert row["published"] == 0.55 and row["spread"] == 0.02
    # The tolerance is the spread plus half a unit of the printed precision (2 decimals).
    assert math.isclose(row["tolerance"], 0.025) and math.isclose(row["difference"], 0.018)
    assert (row["measured"], row["ci_low"], row["ci_high"], row["dataset_id"], row["method_id"]) == \
        (0.568, pytest.approx(0.558), pytest.approx(0.578), "ds_a", "inside")


def test_a_value_outside_its_spread_differs_with_its_cause(section):
    row = _row(section, "A", "Outside")
    assert row["status"] == "differs" and row["within_spread"] is False
    assert math.isclose(row["difference"], -0.04)
    assert row["note"] == "" and row["method_differences"] == "Outside uses another graph."
    assert row["within_ci"] is False  # 0.55 is outside the run's interval [0.50, 0.52] too
    # A value's own note comes before the method's differences.
    assert _row(section, "C", "Bare")["note"] == "Row-level cause. C has few items."
    assert _row(section, "C", "Bare")["status"] == "differs"


def test_the_runs_own_interval_is_said_beside_the_spread(tmp_path):
    results = _results({("ds_a", "outside"): 0.51})
    results["scores"][0].update(ci_low=0.45, ci_high=0.58)
    row = _row(reproduction_section(results, _task(tmp_path)), "A", "Outside")
    assert row["status"] == "differs" and row["within_spread"] is False and row["within_ci"] is True
    results["scores"][0].update(ci_low=None, ci_high=None)
    assert _row(reproduction_section(results, _task(tmp_path / "b")), "A", "Outside")["within_ci"] is None


def test_a_value_without_spread_is_compared_to_its_printed_precision(section):
    row = _row(section, "A", "Bare")
    assert row["spread"] is None and row["within_spread"] is None
    assert row["status"] == "reproduced" and math.isclose(row["tolerance"], 0.005)  # 0.534 prints as 0.53
    assert _row(section, "C", "Bare")["within_spread"] is None


def test_the_edge_of_a_spread_counts_as_within(tmp_path):
    # 0.55 + 0.02 + 0.005 = 0.575 exactly, whatever binary floating point makes of the sum.
    section = reproduction_section(_results({("ds_a", "inside"): 0.575}), _task(tmp_path))
    assert _row(section, "A", "Inside")["status"] == "reproduced"
    section = reproduction_section(_results({("ds_a", "inside"): 0.5751}), _task(tmp_path / "again"))
    assert _row(section, "A", "Inside")["status"] == "differs"


def test_rows_not_run_say_why(section):
    assert _row(section, "B", "Inside")["status"] == "not_run"
    assert _row(section, "B", "Inside")["reason"] == "B is a large dataset, fetched with --include-large."
    assert _row(section, "A", "Missing")["reason"] == "Not implemented here."
    assert _row(section, "A", "Skipped")["reason"] == "skipped_method was skipped by this run: needs a language model"
    assert _row(section, "A", "Broken")["reason"] == "broken failed on ds_a: memory limit exceeded"
    assert _row(section, "A", "Unknown")["reason"] == "no counterpart of this method in the benchmark"
    for row in section["rows"]:
        if row["status"] == "not_run":
            assert row["measured"] is None and row["difference"] is None and row["reason"]


def test_a_dataset_the_run_did_not_have(tmp_path):
    task_dir = _task(tmp_path)
    results = _results({("ds_a", "inside"): 0.55})
    results["datasets"] = [{"dataset_id": "ds_a", "made_by": "loader"}]
    section = reproduction_section(results, task_dir)
    assert _row(section, "C", "Bare")["reason"] == "the dataset ds_c is not in this run"


def test_a_ready_made_dataset_is_never_compared(tmp_path):
    # The bundled test resources carry the real datasets' ids but hold a small subset of them.
    task_dir = _task(tmp_path)
    results = _results({("ds_a", "inside"): 0.55})
    results["datasets"] = [{"dataset_id": "ds_a"}, {"dataset_id": "ds_c", "made_by": "loader"}]
    row = _row(reproduction_section(results, task_dir), "A", "Inside")
    assert row["status"] == "not_run" and row["measured"] is None
    assert "ds_a is a ready-made dataset (--input" in row["reason"]


def test_language_model_rows_are_reported_without_a_measurement(section):
    row = _row(section, "A", "Talker")
    assert row["status"] == "reported" and row["measured"] is None and row["published"] == 0.60
    assert row["reason"] == "A language model: shown as the paper reports it."
    assert row["other_model"] is None  # the run asked no model of its own


def test_a_reported_method_run_with_another_model_shows_that_models_values_beside_never_compared(tmp_path):
    results = _results({("ds_c", "talker"): 0.31, ("ds_a", "inside"): 0.55},
                       provenance={"llm": {"model": "smollm2-135m", "max_tokens": 32, "datasets": ["*c"]}})
    row = _row(reproduction_section(results, _task(tmp_path)), "A", "Talker")
    assert row["status"] == "reported" and row["measured"] is None and row["difference"] is None
    assert row["other_model"] == {"model": "smollm2-135m", "max_tokens": 32,
                                  "values": [{"dataset_id": "ds_c", "measured": 0.31}]}


def test_counts_and_order(section):
    assert section["counts"] == {"reproduced": 2, "differs": 2, "not_run": 5, "reported": 1}
    assert section["unexplained_differences"] == 0
    # Datasets in declared order, then methods in declared order, undeclared ones last.
    order = [(r["published_dataset"], r["published_method"]) for r in section["rows"]]
    assert order[:3] == [("A", "Inside"), ("A", "Outside"), ("A", "Bare")] and order[7] == ("A", "Unknown")
    assert order[-2:] == [("B", "Inside"), ("C", "Bare")]
    assert section["sources"][0]["available"] and section["sources"][0]["n_values"] == 10
    json.dumps(section, allow_nan=False)


def test_a_difference_without_cause_is_counted(tmp_path):
    declarations = DECLARATIONS.replace('Outside: {method_id: outside, differences: "Outside uses another graph."}',
                                        "Outside: outside")
    section = reproduction_section(_results({("ds_a", "outside"): 0.40}), _task(tmp_path, declarations))
    assert _row(section, "A", "Outside")["note"] == _row(section, "A", "Outside")["method_differences"] == ""
    assert section["unexplained_differences"] == 1


def test_value_syntax():
    assert parse_value("0.55 ± .02", "x") == (0.55, 0.02, "")
    assert parse_value("0.55 +/- 0.02", "x") == (0.55, 0.02, "")
    assert parse_value(0.53, "x") == (0.53, None, "")
    assert parse_value({"value": 0.5, "spread": 0.0, "note": "n"}, "x") == (0.5, 0.0, "n")
    for bad in ("0.55 ± ", "about 0.5", True, {"value": 0.5, "spread": -1}, {"spread": 0.1}, {"value": 1, "sd": 1}):
        with pytest.raises(ConfigError, match="x"):
            parse_value(bad, "x")


@pytest.mark.parametrize("edit, message", [
    (("id: table1", "id: 'table one'"), "id must be a word"),
    (("label: Toy paper, Table 1", "citation: x"), "label is required"),
    (("Missing: {method_id: null, not_run: \"Not implemented here.\"}", "Missing: {method_id: null}"), "must say why"),
    (("decimals: 2", "decimals: -1"), "decimals"),
    (("metric: AUROC", "metric: AUROC\n    reader: toy_lib.x:y"), "a reader and a file go together"),
    (("metric: AUROC", "metric: AUROC\n    colour: red"), "unknown keys"),
    (("metric: AUROC", "metric: AUROC\n    reader: toy_lib.x:y\n    file: {path: a.json, sha256: 0}"), "64 lower-case hex"),
    (("metric: AUROC", "metric: AUROC\n    reader: toy_lib.x:y\n    file: {path: ../a.json}"), "without '..'"),
])
def test_malformed_declarations_name_the_file(tmp_path, edit, message):
    task_dir = _task(tmp_path, DECLARATIONS.replace(*edit))
    with pytest.raises(ConfigError, match=message) as err:
        load_declarations(task_dir)
    assert "published_results.yaml" in str(err.value)


def test_declaration_problems_name_what_the_task_lacks(tmp_path):
    task_dir = _task(tmp_path)
    problems = declaration_problems(task_dir, method_ids={"inside", "outside", "bare", "broken", "talker"},
                                    metric_ids={"auroc"}, dataset_ids={"ds_a"})
    text = "\n".join(problems)
    assert "'skipped_method', no component of the task" in text
    # ds_b says how a run gets it; ds_c does not.
    assert "'ds_c', no info.datasets id" in text and "ds_b" not in text
    assert "values name the method 'Unknown'" in text
    assert declaration_problems(tmp_path / "nowhere", method_ids=set(), metric_ids=set(), dataset_ids=set()) == []


def test_tasks_of_the_project_declare_what_they_have():
    from project_paths import ROOT

    from openpert.config.lint import published_results_problems
    from openpert.config.task import Task

    for name in ("perturbqa", "perturbation_prediction", "perturbation_effect"):
        task = Task(ROOT / "src" / name)
        assert load_declarations(task.dir), name
        assert published_results_problems(task) == [], name


# -- sources read from a file, compared item by item ------------------------------------------------

READER = '''
import json
import math


def read(path, scale=1.0):
    out = []
    for key, items in json.loads(path.read_text()).items():
        dataset, method = key.split("/")
        defined = [v for v in items.values() if not math.isnan(v)]
        out.append({"dataset": dataset, "method": method, "metric": "err", "value": sum(defined) / len(defined) * scale,
                    "n": len(defined), "items": items})
    return out
'''

FILE_DECLARATIONS = """
sources:
  - id: items
    label: Toy source data
    file: {path: published/toy.json, source: someone/repo @ abc, sha256: '%s'}
    reader: toy_lib.published:read
    args: {scale: 1.0}
    tolerance: 0.001
    metrics: {err: err}
    datasets: {D: ds_a, E: {dataset_id: ds_e, not_run: "E needs its large files."}}
    methods: {det: det}
"""


def _file_source(tmp_path: Path, published: dict, sha: str | None = None) -> tuple[Path, Path]:
    import hashlib

    data_dir = tmp_path / "data"
    (data_dir / "published").mkdir(parents=True)
    path = data_dir / "published" / "toy.json"
    path.write_text(json.dumps(published))
    sha = sha or hashlib.sha256(path.read_bytes()).hexdigest()
    task_dir = _task(tmp_path, FILE_DECLARATIONS % sha, name="toyfile")
    (task_dir / "toy_lib").mkdir()
    (task_dir / "toy_lib" / "__init__.py").write_text("")
    (task_dir / "toy_lib" / "published.py").write_text(READER)
    return task_dir, data_dir


def _run_dir(tmp_path: Path, values: dict[str, float], seeds: tuple[int, ...] = ()) -> Path:
    run = tmp_path / "run"
    plan = {"methods": [{"id": "det", "seeds": list(seeds)}],
            "metrics": [{"id": "err_metric", "output_names": {"output": "score.h5ad"}}]}
    run.mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps(plan))
    for k, name in enumerate([f"det@seed{s}" for s in seeds] or ["det"]):
        folder = run / "outputs" / "ds_a" / name / "err_metric"
        folder.mkdir(parents=True)
        obs = pd.DataFrame({"err": [v + k for v in values.values()]}, index=list(values))
        score = ad.AnnData(obs=obs, uns={"metric_ids": ["err"], "metric_values": [float(obs["err"].mean())]})
        score.write_h5ad(folder / "score.h5ad")
    return run


PUBLISHED = {"D/det": {"P1": 1.0, "P2": 2.0, "P3": float("nan")}, "E/det": {"P1": 3.0}}


def _file_results(raw: float) -> dict:
    return {"task": {"name": "toyfile"}, "datasets": [{"dataset_id": "ds_a", "made_by": "loader"}], "methods": [{"id": "det"}],
            "metrics": [{"id": "err"}], "scores": [{"dataset_id": "ds_a", "method_id": "det", "metric_id": "err", "raw": raw}]}


def test_a_reader_source_compares_item_by_item(tmp_path):
    task_dir, data_dir = _file_source(tmp_path, PUBLISHED)
    run = _run_dir(tmp_path, {"P1": 1.0, "P2": 2.0004, "P3": float("nan")})
    section = reproduction_section(_file_results(1.5002), task_dir, run_dir=run, data_dir=data_dir)
    row = _row(section, "D", "det")
    assert row["status"] == "reproduced" and row["n_published"] == 2
    items = row["items"]
    assert items["available"] and items["agree"] and items["n_matched"] == 3 and items["n_within"] == 3
    assert items["max_abs_difference"] == pytest.approx(0.0004)
    assert _row(section, "E", "det")["reason"] == "E needs its large files."


def test_items_that_disagree_make_the_row_differ_even_when_the_means_agree(tmp_path):
    task_dir, data_dir = _file_source(tmp_path, PUBLISHED)
    # Same mean over the source's items, but P1 and P2 each off by 0.5 and P3 defined here only.
    run = _run_dir(tmp_path, {"P1": 1.5, "P2": 1.5, "P3": 1.5})
    row = _row(reproduction_section(_file_results(1.5), task_dir, run_dir=run, data_dir=data_dir), "D", "det")
    assert row["status"] == "differs" and row["difference"] == 0.0
    assert row["items"]["n_within"] == 0 and row["items"]["n_undefined_one_side"] == 1


def test_the_sources_items_are_its_test_set(tmp_path):
    task_dir, data_dir = _file_source(tmp_path, PUBLISHED)
    # Items scored here only (P4) are counted and leave the comparison alone: it is on the source's items,
    # and the measured value is the run's mean over them, not the run's mean over all of its own.
    run = _run_dir(tmp_path, {"P1": 1.0, "P2": 2.0, "P3": float("nan"), "P4": 9.0})
    row = _row(reproduction_section(_file_results(4.0), task_dir, run_dir=run, data_dir=data_dir), "D", "det")
    assert row["status"] == "reproduced" and row["items"]["extra"] == ["P4"] and row["items"]["n_extra"] == 1
    assert row["measured"] == 1.5 and row["measured_run"] == 4.0 and row["difference"] == 0.0
    # An item of the source the run did not score makes it differ.
    run = _run_dir(tmp_path / "again", {"P1": 1.0, "P3": float("nan")})
    row = _row(reproduction_section(_file_results(1.0), task_dir, run_dir=run, data_dir=data_dir), "D", "det")
    assert row["status"] == "differs" and row["items"]["missing"] == ["P2"]


def test_without_the_run_folder_items_are_not_compared_and_the_row_says_so(tmp_path):
    task_dir, data_dir = _file_source(tmp_path, PUBLISHED)
    row = _row(reproduction_section(_file_results(1.5), task_dir, run_dir=tmp_path / "absent", data_dir=data_dir), "D", "det")
    assert row["status"] == "reproduced" and row["items"]["available"] is False
    assert "compared on the means" in row["items"]["reason"]


def test_a_copied_results_file_keeps_its_item_comparisons(tmp_path, monkeypatch):
    from openpert.results.reproduction import amend_results

    task_dir, data_dir = _file_source(tmp_path, PUBLISHED)
    monkeypatch.setenv("OPENPERT_SHARED_DATA", str(data_dir))
    run = _run_dir(tmp_path, {"P1": 1.0, "P2": 2.0, "P3": float("nan"), "P4": 9.0})
    results = _file_results(4.0)
    results["reproduction"] = reproduction_section(results, task_dir, run_dir=run, data_dir=data_dir)
    # Rendered again from a copy of results.json, without the score files beside it:
    copy = tmp_path / "site" / "toyfile"
    copy.mkdir(parents=True)
    again = amend_results(results, copy, tmp_path)["reproduction"]
    row = _row(again, "D", "det")
    assert row["status"] == "reproduced" and row["items"]["available"] and row["measured"] == 1.5
    # Without the run's own comparison, only the means are compared (4.0 against 1.5).
    lost = _row(amend_results({**results, "reproduction": None}, copy, tmp_path)["reproduction"], "D", "det")
    assert lost["status"] == "differs" and lost["items"]["available"] is False


def test_seeded_items_are_averaged_over_seeds(tmp_path):
    run = _run_dir(tmp_path, {"P1": 1.0, "P2": 2.0}, seeds=(0, 1))
    values = RunItems(run).values("ds_a", "det", "err")
    assert values.to_dict() == {"P1": 1.5, "P2": 2.5}
    assert RunItems(run).values("ds_a", "det", "other") is None
    assert RunItems(run).values("ds_a", "nobody", "err") is None


def test_a_missing_or_altered_published_file_costs_its_source_only(tmp_path):
    task_dir, data_dir = _file_source(tmp_path, PUBLISHED, sha="0" * 64)
    section = reproduction_section(_file_results(1.5), task_dir, data_dir=data_dir)
    assert section["rows"] == [] and "sha256 differs" in section["sources"][0]["problem"]
    section = reproduction_section(_file_results(1.5), task_dir, data_dir=tmp_path / "empty")
    assert "published/toy.json: not found" in section["sources"][0]["problem"]
    section = reproduction_section(_file_results(1.5), task_dir, data_dir=None)
    assert "no data folder" in section["sources"][0]["problem"]


def test_a_failing_reader_is_reported(tmp_path):
    task_dir, data_dir = _file_source(tmp_path, {"D/det": "not a mapping"})
    section = reproduction_section(_file_results(1.5), task_dir, data_dir=data_dir)
    assert section["rows"] == [] and section["sources"][0]["problem"].startswith("toy_lib.published:read could not read")


def test_a_reader_runs_in_a_child_process_never_in_the_harness(tmp_path):
    """The task's library is imported by a child: the harness's modules and path stay as they were."""
    task_dir, data_dir = _file_source(tmp_path, PUBLISHED)
    path_before, modules_before = list(sys.path), set(sys.modules)
    section = reproduction_section(_file_results(1.5), task_dir, data_dir=data_dir)
    assert section["sources"][0]["problem"] == "" and section["rows"]
    assert sys.path == path_before
    assert not [m for m in set(sys.modules) - modules_before if m.split(".")[0] == "toy_lib"]


def test_a_reader_that_raises_at_import_is_reported_without_the_harness_importing_it(tmp_path):
    task_dir, data_dir = _file_source(tmp_path, PUBLISHED)
    (task_dir / "toy_lib" / "__init__.py").write_text("raise ImportError('the library is broken on purpose')\n")
    section = reproduction_section(_file_results(1.5), task_dir, data_dir=data_dir)
    problem = section["sources"][0]["problem"]
    assert section["rows"] == [] and problem.startswith("toy_lib.published:read could not read")
    assert "ImportError: the library is broken on purpose" in problem
    assert "toy_lib" not in sys.modules and str(task_dir) not in sys.path


def test_compare_items():
    got = compare_items({"a": 1.0, "b": np.nan, "c": 2.0}, pd.Series({"a": 1.0005, "b": np.nan, "d": 0.0}), 0.001)
    assert (got["n_matched"], got["n_within"], got["missing"], got["extra"], got["agree"]) == (2, 2, ["c"], ["d"], False)
    assert got["measured_mean"] == 1.0005
    assert compare_items({"a": 1.0}, pd.Series({"a": 1.0005, "d": 0.0}), 0.001)["agree"]
    assert not compare_items({"a": 1.0}, pd.Series({"a": 1.01}), 0.001)["agree"]
    got = compare_items({"a": 1.0}, pd.Series({"a": 1.0}), 0.0)
    assert got["agree"] and got["max_abs_difference"] == 0.0


# -- in results.json and for old runs ------------------------------------------------------------------


def test_collect_adds_the_section_or_a_qc_row(tmp_path):
    task_dir = _task(tmp_path)
    results = _results({("ds_a", "inside"): 0.55}, qc=[])
    assert collect_reproduction(results, task_dir, tmp_path)["reproduction"]["counts"]["reproduced"] == 1
    (task_dir / "api" / "published_results.yaml").write_text("sources: [{id: x}]")
    extra = collect_reproduction(results, task_dir, tmp_path)
    assert "reproduction" not in extra and extra["qc"][0]["flag"] == "reproduction_failed"
    assert collect_reproduction(results, tmp_path / "src" / "other", tmp_path) == {}


def test_report_amendment_recomputes_with_current_declarations(tmp_path):
    task_dir = _task(tmp_path)
    results = _results({("ds_a", "inside"): 0.55})
    amend = report_amendment(tmp_path)
    assert amend(results, tmp_path)["reproduction"]["counts"]["reproduced"] == 1
    assert amend({**results, "task": {"name": "../elsewhere"}}, tmp_path) == {}
    (task_dir / "api" / "published_results.yaml").write_text("sources: 3")
    with pytest.warns(UserWarning, match="Reproduction not recomputed"):
        assert amend(results, tmp_path) == {}
