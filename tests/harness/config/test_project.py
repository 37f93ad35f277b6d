"""The project's settings file, read in one place."""

from __future__ import annotations

import pytest

from openpert.config.project import project_file
from openpert.config.viash import ConfigError


def test_project_file_is_read_once_per_version_and_copied(tmp_path):
    (tmp_path / "_viash.yaml").write_text("name: p\nlinks: {repository: https://example.org/p}\n")
    first = project_file(tmp_path)
    first["links"]["repository"] = "changed by a caller"
    assert project_file(tmp_path)["links"]["repository"] == "https://example.org/p"
    (tmp_path / "_viash.yaml").write_text("name: renamed\n")
    assert project_file(tmp_path) == {"name": "renamed"}


@pytest.mark.parametrize(("text", "message"), [(None, "not found"), ("name: [\n", "invalid YAML"),
                                                ("- a\n- b\n", "expected a mapping of project settings")])
def test_project_file_errors_name_the_file(tmp_path, text, message):
    if text is not None:
        (tmp_path / "_viash.yaml").write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        project_file(tmp_path)
    assert str(tmp_path / "_viash.yaml") in str(info.value)
