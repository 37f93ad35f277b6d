"""Fixtures of the adversarial suite (see ``hostile.py`` for what every test checks)."""

from __future__ import annotations

import pytest
from adversarial.hostile import clean_run


@pytest.fixture(scope="session")
def clean(tiny_project, tmp_path_factory) -> dict:
    """The clean run's results (honest components only), computed once per test process and read by every module."""
    return clean_run(tiny_project, tmp_path_factory.mktemp("clean"))
