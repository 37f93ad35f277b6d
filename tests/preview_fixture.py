"""A git checkout of the fixture project on a branch that changes a method: group_mean predicts zeros and falls."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

#: Components of the fixture's task left out so that a preview stays small (each run of it is 8 jobs): the
#: methods that fail, wait or need a server, the baseline control (the scores are scaled between the positive
#: and the negative one) and the second metric (one metric is enough to rank by).
LEFT_OUT = [*(f"methods/{name}" for name in ("fail_invalid", "fail_memory", "fail_raise", "fail_timeout", "llm_constant",
                                             "reads_solution", "spy_workdir")),
            "control_methods/train_mean", "metrics/correlation"]


def git(root: Path, *args: str) -> str:
    """Run git in ``root`` (as a test committer) and return its output."""
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout


def change_checkout(root: Path) -> Path:
    """Make ``root`` (a copy of the fixture project) a checkout: ``main``, and a branch ``change`` checked out.

    On ``change`` group_mean predicts zeros, so it falls below shrunk_mean. ``origin/main`` names ``main``,
    as on a CI runner.
    """
    for folder in LEFT_OUT:
        shutil.rmtree(root / "src/tiny" / folder)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    git(root, "update-ref", "refs/remotes/origin/main", "main")
    git(root, "checkout", "-q", "-b", "change")
    script = root / "src/tiny/methods/group_mean/script.py"
    text = script.read_text()
    assert "pred = np.stack(" in text, f"{script}: the line the change edits is gone"
    script.write_text(text.replace("pred = np.stack(", "pred = 0 * np.stack("))
    git(root, "commit", "-qam", "group_mean predicts zeros")
    return root
