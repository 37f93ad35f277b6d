"""Fixtures of the adversarial suite (see ``hostile.py`` for what every test checks)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def clean(group_mean_run) -> dict:
    """The clean run's results: the honest components only (group_mean and the controls, metric ``errors``)."""
    return group_mean_run.results
