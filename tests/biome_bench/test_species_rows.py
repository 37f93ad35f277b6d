"""biome_bench_lib.species_rows: the Task B file of human and mouse, made from the original TASK-B.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from biome_bench_lib.species_rows import task_b_rows

from openpert.data.manifest import task_manifest

ROOT = Path(__file__).resolve().parents[2]


def _rows(*species: str) -> list[dict]:
    return [{"messages": [{"role": "user", "content": f"pathway of {s} – 2²"}], "pathway_id": f"{s}0{i}",
             "pubmed_id": str(i), "species": s} for i, s in enumerate(species)]


def test_rows_of_the_species_are_kept_in_order_as_json_dumps_writes_them(tmp_path):
    original = tmp_path / "TASK-B.jsonl"
    original.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows("hsa", "rno", "mmu", "hsa")),
                        encoding="utf-8")
    task_b_rows({"task_b": original}, tmp_path / "out.jsonl", species=["hsa", "mmu"])
    lines = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["pathway_id"] for line in lines] == ["hsa00", "mmu02", "hsa03"]
    assert "\\u00b2" in lines[0] and "²" not in lines[0], "non-ASCII is escaped, as in the shared file"


def test_a_line_that_is_not_an_item_names_the_file_and_line(tmp_path):
    original = tmp_path / "TASK-B.jsonl"
    original.write_text(json.dumps(_rows("hsa")[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"TASK-B.jsonl: line 2 is not valid JSON"):
        task_b_rows({"task_b": original}, tmp_path / "out.jsonl", species=["hsa"])
    original.write_text(json.dumps(_rows("rno")[0]) + "\n")
    with pytest.raises(ValueError, match="no Task B item of species hsa"):
        task_b_rows({"task_b": original}, tmp_path / "out.jsonl", species=["hsa"])
    assert not (tmp_path / "out.jsonl").exists()


def _manifest_entry():
    (entry,) = [f for f in task_manifest(ROOT / "src" / "biome_bench") if f.path == "biome_bench/task_b_hsa_mmu.jsonl"]
    return entry


def test_the_manifest_derives_the_shared_file_with_this_function():
    entry = _manifest_entry()
    assert entry.derive.function == "biome_bench_lib.species_rows:task_b_rows"
    assert entry.derive.args == {"species": ["hsa", "mmu"]}
