"""A task's own functions run in a child process: answers come back as JSON, failures as one error."""

from __future__ import annotations

import sys

import pytest

from openpert.run.task_code import TaskCodeError, call_task_function


def test_the_answer_comes_back_and_the_task_is_never_imported_here(tmp_path):
    (tmp_path / "stats_of_task.py").write_text(
        "import numpy as np\n"
        "def count(outdir, scale=1):\n"
        "    print('chatter on stdout is not the answer')\n"
        "    return {'n': np.int64(len(list(outdir.iterdir()))) * scale, 'kind': type(outdir).__name__}\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.txt").write_text("x")
    path_before = list(sys.path)
    assert call_task_function(tmp_path, "stats_of_task", "count", [tmp_path / "out"], {"scale": 3}) == {"n": 3, "kind": "PosixPath"}
    assert "stats_of_task" not in sys.modules and sys.path == path_before


def test_a_failure_or_a_broken_import_is_one_error_with_its_last_line(tmp_path):
    (tmp_path / "broken_task.py").write_text("raise ImportError('the library is broken on purpose')\n")
    with pytest.raises(TaskCodeError, match="ImportError: the library is broken on purpose"):
        call_task_function(tmp_path, "broken_task", "anything")
    (tmp_path / "slow_task.py").write_text("import time\ndef wait():\n    time.sleep(30)\n")
    with pytest.raises(TaskCodeError, match="no answer within 1 s"):
        call_task_function(tmp_path, "slow_task", "wait", timeout_s=1)
