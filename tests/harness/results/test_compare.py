"""openpert compare: two runs with known differences, reported correctly in text, Markdown and JSON."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from run_pair_fixture import DATASETS, write_run

from openpert.cli import main
from openpert.results.archive import ArchiveError, read_run, resolve_run
from openpert.results.compare import compare_runs, format_markdown, format_text


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("runs")
    return write_run(base / "old", "old"), write_run(base / "new", "new")


@pytest.fixture(scope="module")
def comparison(runs: tuple[Path, Path]) -> dict:
    return compare_runs(read_run(runs[0]), read_run(runs[1]), n_permutations=2000)


def _task(comparison: dict) -> dict:
    (task,) = comparison["tasks"]
    return task


def _method(comparison: dict, method_id: str) -> dict:
    (row,) = [m for m in _task(comparison)["methods"] if m["method_id"] == method_id]
    return row


def _scores(comparison: dict, method_id: str) -> list[dict]:
    return [r for r in _task(comparison)["scores"] if r["method_id"] == method_id]


def test_added_method_and_changed_digest_are_found(comparison: dict) -> None:
    task = _task(comparison)
    assert task["methods_added"] == ["delta"] and task["methods_removed"] == []
    assert task["components"] == {"changed": ["alpha"], "added": ["delta"], "removed": [], "recorded": True}
    assert task["datasets_added"] == task["datasets_removed"] == task["metrics_added"] == task["metrics_removed"] == []
    delta = _method(comparison, "delta")
    assert delta["status"] == "added" and delta["old_rank"] is None and delta["new_rank"] == 3
    assert [r["status"] for r in _scores(comparison, "delta")] == ["added"] * len(DATASETS)


def test_rank_swap_is_beyond_noise(comparison: dict) -> None:
    alpha, beta = _method(comparison, "alpha"), _method(comparison, "beta")
    assert (alpha["old_rank"], alpha["new_rank"], alpha["rank_move"]) == (2, 1, 1)
    assert (beta["old_rank"], beta["new_rank"], beta["rank_move"]) == (1, 2, -1)
    assert alpha["digest_changed"] and not beta["digest_changed"]
    # Six datasets all up: the sign-flip test over datasets gives 2/64 at best, under 0.05.
    assert alpha["n_datasets"] == len(DATASETS) and alpha["beyond_noise"] and alpha["better"]
    for row in _scores(comparison, "alpha"):
        assert row["test"] == "items" and row["n_paired"] == 40
        assert row["difference"] == pytest.approx(0.3) and row["p_value"] < 0.001
        assert row["beyond_noise"] and row["better"]
    assert all(r["status"] == "unchanged" and r["beyond_noise"] is False for r in _scores(comparison, "beta"))


def test_change_within_noise_is_not_called_real(comparison: dict) -> None:
    rows = _scores(comparison, "gamma")
    assert all(r["status"] == "changed" and r["difference"] != 0 for r in rows)
    assert all(r["test"] == "items" and r["p_value"] > 0.5 and r["beyond_noise"] is False for r in rows)
    gamma = _method(comparison, "gamma")
    assert gamma["difference"] != 0 and gamma["beyond_noise"] is False
    assert (gamma["old_rank"], gamma["new_rank"]) == (3, 4)  # pushed down by delta, not by its own change


def test_focus_on_changed_methods_keeps_what_a_pull_request_touches_and_whom_it_displaced(runs: tuple[Path, Path]) -> None:
    result = compare_runs(read_run(runs[0]), read_run(runs[1]), focus="changed", n_permutations=500)
    task = _task(result)
    # alpha's code changed and delta is new; beta (1 -> 2) and gamma (3 -> 4) moved because of them.
    assert sorted(m["method_id"] for m in task["methods"]) == ["alpha", "beta", "delta", "gamma"]
    assert task["methods_displaced"] == ["beta", "gamma"]
    assert {m["method_id"]: m["displaced"] for m in task["methods"]} == {
        "alpha": False, "beta": True, "delta": False, "gamma": True}
    assert {r["method_id"] for r in task["scores"]} == {"alpha", "beta", "delta", "gamma"}
    beta_line = next(line for line in format_text(result).splitlines() if line.startswith("beta "))
    assert "displaced" in beta_line and "1 → 2 (down 1)" in beta_line
    assert "Methods displaced (same code, rank moved): `beta`, `gamma`" in format_markdown(result)


def test_a_method_whose_rank_did_not_move_is_not_displaced(runs: tuple[Path, Path]) -> None:
    same = compare_runs(read_run(runs[0]), read_run(runs[0]), focus="changed", n_permutations=100)
    assert _task(same)["methods_displaced"] == [] and _task(same)["methods"] == []
    everyone = compare_runs(read_run(runs[0]), read_run(runs[0]), n_permutations=100)
    assert not any(m["displaced"] for m in _task(everyone)["methods"])


def _cli(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_text_format(runs: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    code, out, _ = _cli(["compare", str(runs[0]), str(runs[1]), "--permutations", "2000"], capsys)
    assert code == 0
    assert "Methods added: delta" in out and "Components whose code changed: alpha" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line and not line.startswith((" ", "=", "M", "C"))}
    assert "2 → 1 (up 1)" in lines["alpha"] and "code changed" in lines["alpha"] and "better, beyond noise" in lines["alpha"]
    assert "1 → 2 (down 1)" in lines["beta"] and lines["beta"].endswith("unchanged")
    assert "— → 3" in lines["delta"] and lines["delta"].endswith("added")
    assert lines["gamma"].endswith("within noise")
    gamma_rows = [line for line in out.splitlines() if "/gamma/accuracy" in line]
    assert len(gamma_rows) == len(DATASETS) and all(r.endswith("within noise") for r in gamma_rows)
    alpha_rows = [line for line in out.splitlines() if "/alpha/accuracy" in line]
    assert all("[items, n=40]" in r and r.endswith("better, beyond noise") for r in alpha_rows)
    assert not [line for line in out.splitlines() if "/beta/" in line]  # unchanged rows are counted, not listed


def _markdown_table(text: str, first_header: str) -> list[dict[str, str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, [c.strip() for c in re.split(r"(?<!\\)\|", line.strip("|"))], strict=True)))
    return rows


def test_markdown_format(runs: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    code, out, _ = _cli(["compare", str(runs[0]), str(runs[1]), "--format", "markdown", "--permutations", "2000"], capsys)
    assert code == 0
    assert "- Methods added: `delta`" in out and "- Components whose code changed: `alpha`" in out
    methods = {r["Method"]: r for r in _markdown_table(out, "Method")}
    assert methods["Alpha"]["Rank"] == "2 → 1 (up 1)" and methods["Alpha"]["Verdict"] == "better, beyond noise"
    assert methods["Beta"]["Rank"] == "1 → 2 (down 1)" and methods["Beta"]["Verdict"] == "unchanged"
    assert methods["Delta"]["Status"] == "added" and methods["Delta"]["Overall before"] == "—"
    assert methods["Gamma"]["Verdict"] == "within noise"
    scores = _markdown_table(out, "Dataset")
    by = {(r["Dataset"], r["Method"]): r for r in scores}
    assert by["d1", "alpha"]["Paired over"] == "40 items" and by["d1", "alpha"]["Change"] == "+0.300"
    assert by["d3", "gamma"]["Verdict"] == "within noise"
    assert by["d2", "delta"]["Before"] == "—" and by["d2", "delta"]["Verdict"] == "added"


def test_json_format(runs: tuple[Path, Path], capsys: pytest.CaptureFixture, comparison: dict) -> None:
    code, out, _ = _cli(["compare", str(runs[0]), str(runs[1]), "--format", "json", "--permutations", "2000"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["old"] == str(runs[0]) and data["new"] == str(runs[1])
    assert data["tasks"] == json.loads(json.dumps(comparison["tasks"]))


def test_output_file_is_appended_to(runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# Earlier step\n")
    assert main(["compare", str(runs[0]), str(runs[1]), "--format", "markdown", "-o", str(summary),
                 "--permutations", "200"]) == 0
    text = summary.read_text()
    assert text.startswith("# Earlier step\n## What changed") and capsys.readouterr().out == ""


def test_without_items_seeds_are_paired_or_the_change_is_untested(tmp_path: Path) -> None:
    old, new = write_run(tmp_path / "old", "old", with_items=False), write_run(tmp_path / "new", "new", with_items=False)
    path = new / "toy" / "results.json"
    data = json.loads(path.read_text())
    old_data = json.loads((old / "toy" / "results.json").read_text())
    for rows, shift in ((old_data["scores"], 0.0), (data["scores"], 0.25)):
        for row in rows:
            if row["method_id"] == "alpha" and row["dataset_id"] == "d1":
                row["raw_seeds"] = [0.40 + shift, 0.45 + shift, 0.50 + shift, 0.42 + shift, 0.47 + shift]
    path.write_text(json.dumps(data))
    (old / "toy" / "results.json").write_text(json.dumps(old_data))
    task = _task(compare_runs(read_run(old), read_run(new), n_permutations=500))
    by = {(r["dataset_id"], r["method_id"]): r for r in task["scores"]}
    assert by["d1", "alpha"]["test"] == "seeds" and by["d1", "alpha"]["n_paired"] == 5
    # Five seeds all up: 2/32 is the smallest two-sided p, not under 0.05; the test says so honestly.
    assert by["d1", "alpha"]["p_value"] == pytest.approx(2 / 32, abs=0.03) and by["d1", "alpha"]["beyond_noise"] is False
    assert by["d2", "alpha"]["test"] is None and by["d2", "alpha"]["beyond_noise"] is None
    assert "not tested" in by["d2", "alpha"]["note"]
    assert "not tested" in format_text({"old": "a", "new": "b", "tasks_added": [], "tasks_removed": [],
                                        "focus": "all", "alpha": 0.05, "tasks": [task]})


def test_datasets_and_metrics_added_and_removed(runs: tuple[Path, Path], tmp_path: Path) -> None:
    new = tmp_path / "new"
    (new / "toy").mkdir(parents=True)
    data = json.loads((runs[1] / "toy" / "results.json").read_text())
    data["datasets"] = [d for d in data["datasets"] if d["dataset_id"] != "d6"] + [{"dataset_id": "d7"}]
    data["metrics"].append({"id": "recall", "maximize": True})
    data["provenance"]["dataset_digests"]["d1"] = "sha256:changed"
    (new / "toy" / "results.json").write_text(json.dumps(data))
    task = _task(compare_runs(read_run(runs[0]), read_run(new), n_permutations=200))
    assert task["datasets_added"] == ["d7"] and task["datasets_removed"] == ["d6"]
    assert task["metrics_added"] == ["recall"] and task["metrics_removed"] == []
    assert task["datasets_changed"] == ["d1"]
    text = format_markdown(compare_runs(read_run(runs[0]), read_run(new), n_permutations=200))
    assert "- Datasets added: `d7`" in text and "- Datasets removed: `d6`" in text
    assert "- Metrics added: `recall`" in text and "- Datasets whose files changed: `d1`" in text


def test_hostile_inputs_fail_with_one_clear_error(tmp_path: Path, runs: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    broken = tmp_path / "broken" / "toy"
    broken.mkdir(parents=True)
    (broken / "results.json").write_text("{not json")
    with pytest.raises(ArchiveError, match=r"broken/toy/results\.json: not a readable results file"):
        read_run(broken.parent)
    (broken / "results.json").write_text(json.dumps({"scores": "nope"}))
    code, _, err = _cli(["compare", str(runs[0]), str(broken.parent)], capsys)
    assert code == 2 and "results.json: not a results file" in err
    with pytest.raises(ArchiveError, match="give --archive"):
        resolve_run("2026-01-01T0000Z-abc1234", None)
    code, _, err = _cli(["compare", "2026-01-01T0000Z-abc1234", str(runs[1]), "--archive", str(tmp_path)], capsys)
    assert code == 2 and "no record '2026-01-01T0000Z-abc1234'" in err


def test_markup_in_names_cannot_break_the_markdown(tmp_path: Path, runs: tuple[Path, Path]) -> None:
    new = tmp_path / "new"
    (new / "toy").mkdir(parents=True)
    data = json.loads((runs[1] / "toy" / "results.json").read_text())
    for m in data["methods"]:
        if m["id"] == "delta":
            m["label"] = "Delta | <script>x</script>"
    (new / "toy" / "results.json").write_text(json.dumps(data))
    text = format_markdown(compare_runs(read_run(runs[0]), read_run(new), n_permutations=200))
    assert "<script>" not in text and "Delta \\| &lt;script&gt;" in text
    rows = {r["Method"]: r for r in _markdown_table(text, "Method")}
    assert rows["Delta \\| &lt;script&gt;x&lt;/script&gt;"]["Status"] == "added"


def test_a_score_without_value_in_either_run_is_unchanged_and_one_lost_is_said(runs: tuple[Path, Path], tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    shutil.copytree(runs[0], old)
    shutil.copytree(runs[1], new)
    for folder, rows in ((old, ("d1", "d2")), (new, ("d1",))):
        path = folder / "toy" / "results.json"
        data = json.loads(path.read_text())
        for row in data["scores"]:
            if row["method_id"] == "beta" and row["dataset_id"] in rows:
                row["raw"] = None
        path.write_text(json.dumps(data))
    task = _task(compare_runs(read_run(old), read_run(new), n_permutations=200))
    by = {(r["dataset_id"], r["method_id"]): r for r in task["scores"]}
    assert by["d1", "beta"]["status"] == "unchanged" and by["d1", "beta"]["note"] == "no value in either run"
    assert by["d2", "beta"]["status"] == "changed" and by["d2", "beta"]["note"] == "no value in the old run"
    assert by["d2", "beta"]["beyond_noise"] is None


def test_the_text_format_shows_long_method_and_metric_names_in_full(comparison: dict) -> None:
    """Three metrics sharing a 24-character prefix stay three metrics; a long method name stays whole."""
    import copy

    renamed = copy.deepcopy(comparison)
    task = _task(renamed)
    long_method = "a_method_with_a_long_descriptive_name"
    metrics = sorted({r["metric_id"] for r in task["scores"]})
    names = {m: f"pearson_specific_top100_{m}_variant" for m in metrics}
    for m in task["methods"]:
        if m["method_id"] == "delta":
            m["method_id"] = long_method
    for r in task["scores"]:
        r["metric_id"] = names[r["metric_id"]]
        r["method_id"] = long_method if r["method_id"] == "delta" else r["method_id"]
    text = format_text(renamed)
    assert any(line.startswith(long_method + " ") for line in text.splitlines())
    for name in names.values():
        assert f"/{long_method}/{name} " in text
