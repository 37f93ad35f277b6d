"""Values made once per test run (``openpert.testing.once_per_run``), in a run folder of the test's own (``own_run``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openpert.testing.once_per_run import once_per_test_run


def test_the_value_is_made_once_and_the_next_caller_reads_it(own_run):
    run, made = own_run, []

    def make(folder: Path) -> dict:
        made.append(folder)
        (folder / "made.txt").write_text("x")
        return {"folder": folder, "n": len(made)}

    first = once_per_test_run(run, "value", make)
    second = once_per_test_run(run, "value", make)
    assert len(made) == 1
    assert first == second == {"folder": made[0], "n": 1}
    assert (made[0] / "made.txt").read_text() == "x"


def test_a_failed_make_leaves_nothing_and_the_next_caller_makes_it_afresh(own_run):
    run = own_run

    def fails(folder: Path) -> None:
        (folder / "half-made").write_text("")
        raise RuntimeError("on purpose")

    with pytest.raises(RuntimeError, match="on purpose"):
        once_per_test_run(run, "value", fails)
    assert once_per_test_run(run, "value", lambda folder: sorted(p.name for p in folder.iterdir())) == []
