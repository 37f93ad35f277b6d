"""results.json says where its results come from: the commit, the tree's state, the digests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from openpert.config.task import Task
from openpert.engines.benchmark import run_benchmark
from openpert.engines.cache_keys import component_digest


def _git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True, capture_output=True)


def _run(root, out):
    task = Task(root / "src" / "tiny")
    return run_benchmark(task, out, input_dir=root / "resources_test" / "tiny", methods=["group_mean"], controls=[],
                         metrics=["errors"], progress=False)


def test_provenance_names_the_commit_and_the_digests(project_copy, tmp_path):
    _git(project_copy, "init", "-q")
    _git(project_copy, "add", "-A")
    _git(project_copy, "commit", "-qm", "base")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project_copy, capture_output=True, text=True).stdout.strip()
    provenance = _run(project_copy, tmp_path / "clean")["provenance"]
    assert (provenance["commit"], provenance["dirty"]) == (head, False)
    config = Task(project_copy / "src" / "tiny").component("group_mean")
    assert provenance["component_digests"]["group_mean"] == "sha256:" + component_digest(config)
    assert set(provenance["dataset_digests"]) == {"syn"} and provenance["dataset_digests"]["syn"].startswith("sha256:")
    script = project_copy / "src/tiny/methods/group_mean/script.py"
    script.write_text(script.read_text() + "\n# edited\n")
    edited = _run(project_copy, tmp_path / "dirty")["provenance"]
    assert edited["dirty"] is True and edited["component_digests"]["group_mean"] != provenance["component_digests"]["group_mean"]
    assert edited["dataset_digests"] == provenance["dataset_digests"]


def test_an_untracked_component_makes_the_tree_dirty(project_copy):
    from openpert.results.provenance import git_state

    _git(project_copy, "init", "-q")
    _git(project_copy, "add", "-A")
    _git(project_copy, "commit", "-qm", "base")
    assert git_state(project_copy)[1] is False
    (project_copy / "notes.txt").write_text("outside the code: not the results' concern\n")
    (project_copy / "src/tiny/methods/group_mean/__pycache__").mkdir()
    (project_copy / "src/tiny/methods/group_mean/__pycache__/script.cpython-311.pyc").write_bytes(b"\0")
    assert git_state(project_copy)[1] is False
    new = project_copy / "src/tiny/methods/knn"
    new.mkdir()
    (new / "script.py").write_text("print('not committed')\n")
    assert git_state(project_copy)[1] is True


def test_outside_a_checkout_the_commit_is_not_recorded(group_mean_run):
    from openpert.results.provenance import git_state

    assert git_state(group_mean_run.task.root) == (None, None), "the shared run's project lies outside any checkout"
    provenance = group_mean_run.results["provenance"]
    assert provenance["commit"] is None and provenance["dirty"] is None


def test_package_versions_and_host_are_read_cheaply():
    import importlib.metadata
    import os

    from openpert.results.provenance import environment_provenance, host_info, package_versions

    versions = package_versions(("numpy", "surely-not-an-installed-distribution"))
    assert versions["numpy"] == importlib.metadata.version("numpy")
    assert "surely-not-an-installed-distribution" not in versions and versions["python"]
    host = host_info()
    assert host["cpu_count"] == os.cpu_count() and host["memory_mb"] > 0
    # numpy's and scipy's OpenBLAS, each with the kernel it chose for this CPU
    assert len(host["blas"]) >= 2 and all(b["kernel"] for b in host["blas"]), host["blas"]
    assert host["openblas_coretype"] == (os.environ.get("OPENBLAS_CORETYPE") or None)
    env = environment_provenance(Path(__file__).resolve().parents[3])
    assert set(env) == {"code_version", "commit", "dirty", "packages", "host"}
    assert env["packages"]["numpy"] == versions["numpy"]


def test_the_tracked_packages_are_installed_ones_among_those_the_code_imports():
    """Each tracked distribution is imported by the harness, pertsci or a task (so declared, by the
    dependency rule); the packages list holds the installed ones with their installed versions."""
    import importlib.metadata

    from project_paths import ROOT
    from tooling.imported import imported_distributions

    from openpert.images.requirements import canonical_name
    from openpert.results.provenance import TRACKED_PACKAGES, package_versions

    imported = imported_distributions(ROOT)
    assert [p for p in TRACKED_PACKAGES if canonical_name(p) not in imported] == []
    assert {"numpy", "scipy", "pandas", "anndata", "h5py", "torch", "tokenizers", "safetensors"} <= set(TRACKED_PACKAGES)

    def installed(name):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    expected = {name: installed(name) for name in TRACKED_PACKAGES if installed(name) is not None}
    versions = package_versions()
    assert {k: v for k, v in versions.items() if k != "python"} == expected
