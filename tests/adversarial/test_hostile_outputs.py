"""Hostile outputs that are small on disk and huge once read cannot exhaust the harness (issue 35).

Jobs run with memory limits, but their outputs are read by the harness, in its own process. The
attacks (``output_bombs.py``), each next to the honest components:

* ``huge_layer``: a layer declared 12 x 16,000,000 float64 (1.4 GB) with a fill value, no chunk written;
* ``compressed_bomb``: an obsm matrix of 1.1 GB of gzip-compressed zeros (1 MB on disk);
* ``huge_index``: an obs index of 16.8 million names (gzip; 1 GB once read);
* ``huge_log``: a job whose log is a 1 GB sparse hole and a last line, which then fails;
* ``parquet_bomb``: a dataset loader whose parquet output holds 67 million rows of one int64 value
  (512 MB), with validation limited to 256 MB (``$OPENPERT_VALIDATION_MEMORY_MB``); run twice, the
  second time with ``resume``.

Each is refused (or its log cut) with a reason that names what it declared; the rest of the
benchmark finishes; and the harness's resident memory, measured from a reset high-water mark
(``/proc/self/clear_refs``), rises by at most :data:`PEAK_RISE_MB` over a whole run. Before the
fix each attack alone raised it by its declared size (1 to 5 GB at the issue's sizes:
``benchmarks/hostile_outputs.py``).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

import pytest
from adversarial.hostile import assert_honest_unchanged, copy_project, failed_ids, raw_scores, run
from adversarial.output_bombs import add_output_bombs, add_parquet_loader

from openpert.config.task import Task
from openpert.engines.benchmark import run_benchmark
from openpert.engines.local import LOG_HEAD_BYTES, LOG_TAIL_BYTES

LAYER_WIDTH = 16_000_000
BOMB_WIDTH = 12_000_000
INDEX_NAMES = 16 * 2**20
LOG_BYTES = 2**30
PARQUET_GROUPS = 16
VALIDATION_MB = 256
#: The most the harness's resident memory may rise while a hostile run reads these files (MB).
PEAK_RISE_MB = 300


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(key + ":")) / 1024


@contextlib.contextmanager
def resident_rise() -> Iterator[dict]:
    """How far this process's resident memory rises above its level on entry: ``{"mb": ...}`` on exit."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets the high-water mark (VmHWM) to the resident size now
    except OSError as err:
        pytest.skip(f"cannot reset this process's peak memory to measure it: {err}")
    before = _status_mb("VmRSS")
    measured: dict = {}
    yield measured
    measured["mb"] = _status_mb("VmHWM") - before


@pytest.fixture(scope="module")
def hostile_run(tiny_project, tmp_path_factory):
    """One benchmark run with the hostile methods next to the honest components, and its peak memory."""
    tmp = tmp_path_factory.mktemp("hostile_outputs")
    root = copy_project(tiny_project, tmp / "project")
    methods = add_output_bombs(root, layer_width=LAYER_WIDTH, bomb_width=BOMB_WIDTH, index_names=INDEX_NAMES,
                               log_bytes=LOG_BYTES)
    with resident_rise() as rise:
        results = run(root, tmp / "out", methods=["group_mean", *methods])
    return {"results": results, "out": tmp / "out", "rise_mb": rise["mb"], "tmp": tmp}


@pytest.fixture(scope="module")
def parquet_runs(tiny_project, tmp_path_factory):
    """The dataset stage with the parquet bomb's loader beside an honest one, run, then resumed."""
    tmp = tmp_path_factory.mktemp("parquet_bomb")
    root = copy_project(tiny_project, tmp / "project")
    add_parquet_loader(root, groups=PARQUET_GROUPS)
    previous = os.environ.get("OPENPERT_VALIDATION_MEMORY_MB")
    os.environ["OPENPERT_VALIDATION_MEMORY_MB"] = str(VALIDATION_MB)
    try:
        with resident_rise() as rise:
            runs = [run_benchmark(Task(root / "src" / "tiny"), tmp / "out", datasets=["syn_a", "bomb"], methods=["group_mean"],
                                  controls=["truth", "zeros"], metrics=["errors"], progress=False, jobs=2, resume=resume) for resume in (False, True)]
    finally:
        if previous is None:
            os.environ.pop("OPENPERT_VALIDATION_MEMORY_MB", None)
        else:
            os.environ["OPENPERT_VALIDATION_MEMORY_MB"] = previous
    return {"runs": runs, "rise_mb": rise["mb"]}


@pytest.mark.parametrize(("method", "element"), [("huge_layer", "layers/extra: 12 x 16,000,000 float64"),
                                                 ("compressed_bomb", "obsm/bomb: 12 x 12,000,000 float64"),
                                                 ("huge_index", "obs/_index: 16,777,216 |S10")])
def test_declared_sizes_are_refused_unread(hostile_run, method, element):
    """A layer, a compressed matrix and an index far beyond the test file's rows x genes: refused, naming them."""
    failure = failed_ids(hostile_run["results"])[method]
    reason = failure["reason"]
    assert f"largest: {element}" in reason, reason
    assert "a file_prediction of these inputs may declare at most" in reason, reason
    assert "(4 x the larger of file_test's 12 rows x file_train's 10 columns x 8 bytes (960 bytes) and file_test's" in reason
    assert reason.endswith("+ 64 MB): refused without reading it"), reason


def test_a_huge_log_is_cut_and_shown(hostile_run, tmp_path):
    """A 1 GB log: the failure names its last line; the published log keeps its start and end; the site shows it."""
    from openpert.report.site import render_site

    failure = failed_ids(hostile_run["results"])["huge_log"]
    assert failure["exit_code"] == 3 and failure["reason"].endswith("hostile: the last line of a huge log"), failure
    log = hostile_run["out"] / failure["log"]
    assert log.stat().st_size <= LOG_HEAD_BYTES + LOG_TAIL_BYTES + 4096
    assert log.stat().st_blocks * 512 <= 4 * (LOG_HEAD_BYTES + LOG_TAIL_BYTES), "the published log fills the disk"
    text = log.read_bytes()
    assert b"hostile: making the log huge" in text[:LOG_HEAD_BYTES]
    assert re.search(rb"\n\[openpert\] 1,07[0-9,]+ bytes of this log left out \(it had 1,073,74[0-9,]+\)", text)
    assert text.rstrip().endswith(b"hostile: the last line of a huge log")
    render_site([hostile_run["out"]], tmp_path / "site")
    shown = [p for p in (tmp_path / "site").rglob("logs/**/huge_log*") if p.is_file()]
    assert shown and all(p.read_bytes() == text for p in shown), shown


def test_the_harness_memory_stays_bounded(hostile_run):
    """The whole run raised the harness's resident memory by at most PEAK_RISE_MB (each attack: GBs before)."""
    assert hostile_run["rise_mb"] <= PEAK_RISE_MB, f"the harness's memory rose by {hostile_run['rise_mb']:.0f} MB"


def test_honest_scores_unchanged(hostile_run, clean):
    """The rest of the benchmark finished: the honest components score as in the clean run."""
    assert_honest_unchanged(hostile_run["results"], clean)
    assert set(failed_ids(hostile_run["results"])) >= {"huge_layer", "compressed_bomb", "huge_index", "huge_log"}


def test_a_parquet_bomb_fails_its_dataset_and_a_resume_refuses_it_again(parquet_runs):
    """The loader's parquet output declares 512 MB (validation may use 256): its dataset fails, the other runs; resumed, the same."""
    for results in parquet_runs["runs"]:
        failure = failed_ids(results)["parquet_bomb"]
        reason = failure["reason"]
        assert "invalid output --output_extra" in reason and "extra.parquet (file_extra)" in reason, reason
        assert "largest: column value: 67,108,864 int64 (512 MB)" in reason, reason
        assert "reading it may take at most 256 MB" in reason and "refused without reading it" in reason, reason
        scored = raw_scores(results, ("truth", "zeros", "group_mean"))
        assert {m for m, _ in scored} == {"truth", "zeros", "group_mean"}, scored
        assert {s["dataset_id"] for s in results["scores"]} == {"syn_a"}
    assert parquet_runs["rise_mb"] <= PEAK_RISE_MB, f"the harness's memory rose by {parquet_runs['rise_mb']:.0f} MB"
