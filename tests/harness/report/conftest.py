"""Fixtures of the website's tests: one Chromium shared by the test files that drive a browser."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_fixture import chromium_context


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A browser context of headless Chromium (skips without Chromium or Playwright), started once per test process.

    Tests open their own pages in it and close them; none changes the context itself.
    """
    with chromium_context(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context
