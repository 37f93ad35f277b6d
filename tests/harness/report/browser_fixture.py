"""The headless Chromium the website's browser tests share: one per test process, started when a test first needs it.

Needs Debian's ``chromium`` on PATH and the ``playwright`` Python package; Playwright only drives
that binary (no browser download). Starting Chromium costs seconds, so the test files of the website
(``test_browser.py``, ``test_real_run.py``, ...) share one browser context through the ``chromium``
fixture of this folder's ``conftest.py``, each test opening and closing its own pages.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
#: The viewport a page opens with (tests that need another set it).
VIEWPORT = {"width": 1280, "height": 900}


def playwright_sync_api() -> Any:
    """Playwright's sync API, or a skip of the test that asked when Chromium or Playwright is missing."""
    if CHROMIUM is None:
        pytest.skip("chromium is not on PATH (apt-get install chromium)")
    return pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")


@contextmanager
def chromium_context(profile: Path) -> Iterator[Any]:
    """A Chromium browser context (a persistent profile in ``profile``), closed on exit."""
    sync_api = playwright_sync_api()
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT,
        )
        try:
            yield context
        finally:
            context.close()
