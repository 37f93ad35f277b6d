"""Job records: seed replicates and provenance survive a write and a read; malformed fields are refused."""

from __future__ import annotations

import json

import pytest

from openpert.run.records import JobRecord


def record(**extra) -> JobRecord:
    return JobRecord(job_id="k562/random@seed3", stage="method", component="random", component_type="control_method",
                     dataset_id="k562", method_id="random", status="succeeded", exit_code=0, **extra)


def test_seed_and_provenance_round_trip(tmp_path):
    rec = record(seed=3, params={"seed": 3, "alpha": 0.5}, component_digest="sha256:ab", dataset_digest="sha256:cd",
                 engine="local", provenance={"commit": "0123", "dirty": False, "packages": {"numpy": "2.0"},
                                             "host": {"cpu_count": 2, "memory_mb": 1024.0}})
    rec.write(tmp_path / "record.json")
    back = JobRecord.read(tmp_path / "record.json")
    assert back == rec
    assert back.method_id == "random" and back.seed == 3


def test_records_of_older_runs_read_with_defaults(tmp_path):
    data = record().to_dict()
    for key in ("seed", "params", "component_digest", "dataset_digest", "engine", "provenance"):
        data.pop(key)
    (tmp_path / "record.json").write_text(json.dumps(data))
    back = JobRecord.read(tmp_path / "record.json")
    assert back.seed is None and back.params == {} and back.provenance == {}


@pytest.mark.parametrize(("field", "value", "message"), [
    ("seed", "3", "seed must be an integer or null"),
    ("seed", True, "seed must be an integer or null"),
    ("params", [1], "params must be a JSON object"),
    ("provenance", "x", "provenance must be a JSON object"),
])
def test_malformed_fields_name_the_file(tmp_path, field, value, message):
    data = record().to_dict()
    data[field] = value
    path = tmp_path / "record.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message) as err:
        JobRecord.read(path)
    assert str(path) in str(err.value)


def test_a_record_too_large_to_be_one_is_refused_unread(tmp_path):
    path = tmp_path / "record.json"
    record().write(path)
    with open(path, "r+b") as fh:
        fh.truncate(64 * 2**20)  # a sparse tail: what a record is not
    with pytest.raises(ValueError, match=r"record.json: 67,108,864 bytes; a job record is at most 16,777,216"):
        JobRecord.read(path)
