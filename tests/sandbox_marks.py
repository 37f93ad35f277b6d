"""The mark of tests that need the job sandbox: skipped where bubblewrap cannot run, failed where it is required.

``$OPENPERT_SANDBOX=on`` (CI sets it) says that this machine must have a working sandbox: there a
sandbox test must not pass as skipped, or a runner without user namespaces would report green while
the sandbox went untested. The mark then makes the test error out with the probe's reason.
"""

from __future__ import annotations

import pytest

from openpert.run import sandbox as sandboxing

#: The fixture (tests/conftest.py) that fails a test needing a sandbox the machine must have but lacks.
REQUIRED_BUT_UNAVAILABLE = "required_sandbox_unavailable"


def reset_sandbox_probe() -> None:
    """Forget the sandbox's cached probe and environment (tests that change ``PATH`` or the interpreter)."""
    sandboxing._probe.cache_clear()
    sandboxing.python_environment.cache_clear()
    sandboxing._system_args.cache_clear()


def sandbox_required() -> bool:
    """Whether ``$OPENPERT_SANDBOX`` is ``on`` (a wrong value is an error of the test run itself)."""
    return sandboxing.sandbox_setting() == "on"


def needs_sandbox(reason: str = "bubblewrap cannot be used here") -> pytest.MarkDecorator:
    """The mark: nothing where the sandbox works; a skip where it does not; a failure where it is required."""
    if sandboxing.available():
        return pytest.mark.skipif(False, reason="bubblewrap works here")
    why = f"{reason}: {sandboxing.unavailable_reason()}"
    if sandbox_required():
        return pytest.mark.usefixtures(REQUIRED_BUT_UNAVAILABLE)
    return pytest.mark.skip(reason=why)
