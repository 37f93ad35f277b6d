"""The GitHub workflows: valid for actionlint, and the schema fetcher they rely on."""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from project_paths import ROOT

from openpert.config.viash_schema import VIASH_SCHEMA_VERSION, schema_dir

WORKFLOWS = ROOT / ".github" / "workflows"


def _actionlint() -> str | None:
    return shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which("actionlint")


@pytest.mark.skipif(_actionlint() is None, reason="actionlint is not installed (pip install -e .[test])")
def test_actionlint_passes():
    proc = subprocess.run([_actionlint()], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pull_requests_run_lint_tests_and_the_changed_components():
    flow = yaml.safe_load((WORKFLOWS / "pull_request.yml").read_text())
    assert set(flow[True]["pull_request"]["branches"]) == {"main"}  # YAML 1.1 reads `on` as True
    runs = "\n".join(step.get("run", "") for job in flow["jobs"].values() for step in job["steps"])
    for command in ("ruff check .", "openpert lint", "actionlint", "bash scripts/test.sh", "openpert changed --base",
                    "scripts/test_images.sh"):
        assert command in runs, command


def test_images_are_pushed_from_main_and_the_site_published_by_hand_or_weekly():
    images = yaml.safe_load((WORKFLOWS / "main.yml").read_text())
    assert images[True]["push"]["branches"] == ["main"] and images["permissions"]["packages"] == "write"
    site = yaml.safe_load((WORKFLOWS / "benchmark.yml").read_text())
    assert "workflow_dispatch" in site[True] and site[True]["schedule"]
    assert site["jobs"]["deploy"]["permissions"]["pages"] == "write"


def test_the_published_benchmark_fetches_its_public_data_itself():
    steps = yaml.safe_load((WORKFLOWS / "benchmark.yml").read_text())["jobs"]["benchmark"]["steps"]
    runs = [s.get("run", "") for s in steps]
    fetch = next(i for i, r in enumerate(runs) if "openpert data fetch" in r)
    bench = next(i for i, r in enumerate(runs) if "openpert benchmark" in r)
    assert fetch < bench, "the data is fetched (and its licences said) before any job"
    cache = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache"))
    assert cache["with"]["path"] == "~/.cache/openpert/data" and "data_manifest.yaml" in cache["with"]["key"]
    assert not any("shared" in r for r in runs), "no step may need the ../shared folder a runner does not have"


@pytest.mark.skipif(not (schema_dir(ROOT) / "config.schema.json").is_file(), reason="no local Viash schemas to serve")
def test_fetch_viash_schemas_downloads_and_checks_them(tmp_path):
    served = tmp_path / "served"
    shutil.copytree(schema_dir(ROOT), served / VIASH_SCHEMA_VERSION)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        run = functools.partial(subprocess.run, ["bash", str(ROOT / "scripts/fetch_viash_schemas.sh"), str(tmp_path / "out")],
                                capture_output=True, text=True)
        assert run(env={"PATH": "/usr/bin:/bin", "VIASH_SCHEMAS_URL": url}).returncode == 0
        fetched = tmp_path / "out" / VIASH_SCHEMA_VERSION / "config.schema.json"
        assert fetched.read_bytes() == (schema_dir(ROOT) / "config.schema.json").read_bytes()
        (served / VIASH_SCHEMA_VERSION / "package.schema.json").write_text("{}")
        bad = run(env={"PATH": "/usr/bin:/bin", "VIASH_SCHEMAS_URL": url})
        assert bad.returncode == 1 and "package.schema.json has sha256" in bad.stderr
    finally:
        server.shutdown()
