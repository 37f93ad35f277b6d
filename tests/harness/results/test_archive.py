"""The run archive: records with a stable id that round-trip, list in order and refuse tampering."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from run_pair_fixture import build_run, write_run

from openpert.cli import main
from openpert.results.archive import (
    ArchiveError,
    add_record,
    list_records,
    read_record,
    read_run,
    record_id,
    resolve_run,
)
from openpert.results.item_scores import ITEM_SCORES, read_item_scores
from openpert.results.model import complete

OLD_ID, NEW_ID = "2026-11-20T0905Z-aaaaaaa", "2026-11-27T2212Z-bbbbbbb"


def test_a_record_round_trips(tmp_path: Path) -> None:
    run = write_run(tmp_path / "results", "old")
    record, added = add_record(run, tmp_path / "archive")
    assert added and record.id == OLD_ID and record.path == tmp_path / "archive" / OLD_ID
    assert (record.created, record.commit, record.dirty) == ("2026-11-20T09:05:31Z", "a" * 40, False)
    back = read_record(tmp_path / "archive", OLD_ID)
    assert back.summary() == record.summary() == {"id": OLD_ID, "created": "2026-11-20T09:05:31Z",
                                                   "commit": "a" * 40, "dirty": False, "tasks": ["toy"]}
    original, items = build_run("old")
    # Read back as written, completed by the results model (the fixture's file is of the older schema).
    assert back.tasks["toy"].results == complete(json.loads(json.dumps(original)))
    assert back.tasks["toy"].results["provenance"]["component_digests"]["alpha"] == "sha256:alpha-v1"
    kept = read_item_scores(back.tasks["toy"].items_path)
    assert kept.keys() == items.keys()
    for key, values in items.items():
        assert kept[key].to_numpy().tolist() == values.to_numpy().tolist()
        assert kept[key].index.tolist() == values.index.tolist()
    # The record reads back as a run too: by folder and by id.
    assert read_run(record.path)["toy"].results == back.tasks["toy"].results
    assert resolve_run(OLD_ID, tmp_path / "archive")[0] == OLD_ID


def test_ids_are_utc_minute_and_commit(tmp_path: Path) -> None:
    import datetime as dt

    when = dt.datetime.fromisoformat("2026-11-28T05:12:59+01:00")
    assert record_id(when, "fb79450c0ffee", False) == "2026-11-28T0412Z-fb79450"
    assert record_id(when, "FB79450C0FFEE", True) == "2026-11-28T0412Z-fb79450-dirty"
    assert record_id(when, None, None) == "2026-11-28T0412Z-nocommit"
    # The later run's time has a +01:00 offset: its id is in UTC.
    record, _ = add_record(write_run(tmp_path / "new", "new") / "toy", tmp_path / "archive")
    assert record.id == NEW_ID


def test_list_is_oldest_first_and_adding_twice_is_a_no_op(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    add_record(write_run(tmp_path / "new", "new"), archive)
    add_record(write_run(tmp_path / "old", "old"), archive)
    record, added = add_record(tmp_path / "old", archive)
    assert not added and record.id == OLD_ID
    assert [r.id for r in list_records(archive)] == [OLD_ID, NEW_ID]
    assert read_record(archive, "latest").id == NEW_ID


def test_another_run_with_the_same_id_gets_a_suffix(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    run = write_run(tmp_path / "old", "old")
    add_record(run, archive)
    path = run / "toy" / "results.json"
    data = json.loads(path.read_text())
    data["scores"][0]["raw"] = 0.5
    path.write_text(json.dumps(data))
    record, added = add_record(run, archive)
    assert added and record.id == OLD_ID + "-2"
    assert read_record(archive, OLD_ID).tasks["toy"].results["scores"][0]["raw"] != 0.5


def test_a_record_without_items_still_round_trips(tmp_path: Path) -> None:
    record, _ = add_record(write_run(tmp_path / "old", "old", with_items=False), tmp_path / "archive")
    assert record.tasks["toy"].items_path is None
    assert not (record.path / "toy" / ITEM_SCORES).exists()


def test_tampering_and_bad_runs_are_refused(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    record, _ = add_record(write_run(tmp_path / "old", "old"), archive)
    results = record.path / "toy" / "results.json"
    results.write_text(results.read_text().replace("0.", "1.", 1))
    with pytest.raises(ArchiveError, match=r"toy/results\.json: altered since it was archived"):
        read_record(archive, OLD_ID)
    (record.path / "record.json").write_text("[]")
    with pytest.raises(ArchiveError, match=r"record\.json: not a record index"):
        list_records(archive)
    shutil.rmtree(record.path)
    with pytest.raises(ArchiveError, match="no record"):
        read_record(archive, OLD_ID)
    with pytest.raises(ArchiveError, match="is not a record id"):
        read_record(archive, "../elsewhere")
    with pytest.raises(ArchiveError, match="no such archive folder"):
        list_records(tmp_path / "nowhere")

    run = write_run(tmp_path / "undated", "old")
    path = run / "toy" / "results.json"
    data = json.loads(path.read_text())
    data["created"] = "2026-11-20T09:05:31"
    path.write_text(json.dumps(data))
    with pytest.raises(ArchiveError, match="has no UTC offset"):
        add_record(run, archive)
    # Two tasks of one run at different commits are not one run.
    mixed = tmp_path / "mixed"
    shutil.copytree(write_run(tmp_path / "a", "old") / "toy", mixed / "toy")
    other = json.loads((tmp_path / "a" / "toy" / "results.json").read_text())
    other["task"]["name"] = "toy2"
    other["provenance"]["commit"] = "c" * 40
    (mixed / "toy2").mkdir()
    (mixed / "toy2" / "results.json").write_text(json.dumps(other))
    with pytest.raises(ArchiveError, match="different commits"):
        add_record(mixed, archive)
    assert not [p for p in archive.iterdir() if p.name.startswith(".")]  # no half-written record left


def test_cli_add_list_show(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    archive = str(tmp_path / "archive")
    assert main(["archive", "add", str(write_run(tmp_path / "old", "old")), "--archive", archive]) == 0
    assert main(["archive", "add", str(write_run(tmp_path / "new", "new")), "--archive", archive]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith(f"added: {NEW_ID} (toy)")
    assert main(["archive", "list", "--archive", archive, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in listed] == [OLD_ID, NEW_ID] and listed[0]["tasks"] == ["toy"]
    assert main(["archive", "show", "latest", "--archive", archive]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"{NEW_ID}  2026-11-27T22:12:04Z  bbbbbbbbbb  toy") and "with per-item values" in shown
    # compare by ids, found through $OPENPERT_ARCHIVE
    assert main(["compare", OLD_ID, NEW_ID, "--archive", archive, "--permutations", "200"]) == 0
    assert f"{OLD_ID} -> {NEW_ID}" in capsys.readouterr().out
    assert main(["archive", "show", "2020-01-01T0000Z-0000000", "--archive", archive]) == 2
    assert "no record" in capsys.readouterr().err
