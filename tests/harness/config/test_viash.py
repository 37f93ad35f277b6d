"""The config reader: Viash's __merge__ semantics, arguments, and errors that name file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from openpert.config.viash import ConfigError, config_files, deep_merge, load_yaml, read_config


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture()
def project(tmp_path) -> Path:
    write(tmp_path / "_viash.yaml", "name: p\nviash_version: 0.9.0\n")
    write(tmp_path / "src/t/api/file_x.yaml",
          "type: file\nexample: resources_test/t/d/x.h5ad\ninfo:\n  format:\n    type: h5ad\n    uns:\n      - {name: dataset_id, type: string}\n")
    write(tmp_path / "src/t/api/comp_base.yaml",
          "info:\n  type: method\n  extra: base\n  nested: {a: 1, b: 2}\narguments:\n  - {name: --input, __merge__: file_x.yaml, direction: input, required: true}\n")
    write(tmp_path / "src/t/api/comp_method.yaml",
          "__merge__: comp_base.yaml\ninfo:\n  nested: {b: 3}\narguments:\n  - {name: --output, __merge__: /src/t/api/file_x.yaml, direction: output}\n")
    return tmp_path


def test_merge_semantics_nested_lists_and_precedence(project):
    cfg = write(project / "src/t/methods/m/config.vsh.yaml",
                "__merge__: ../../api/comp_method.yaml\nname: m\ninfo:\n  extra: own\narguments:\n  - {name: --k, type: integer, default: 3}\n")
    config = read_config(cfg)
    # lists concatenate in merge order: base, method, own
    assert [a.name for a in config.arguments] == ["input", "output", "k"]
    # mappings merge key by key; the including file wins
    assert config.info["extra"] == "own"
    assert config.info["nested"] == {"a": 1, "b": 3}
    assert config.type == "method"
    # file arguments know their format (relative and project-root-absolute merges alike)
    assert config.argument("input").format_id == "file_x"
    assert config.argument("output").format_id == "file_x"
    assert config.argument("input").file_format.type == "h5ad"
    assert config.argument("k").default == 3
    assert "__openpert_merged_from__" not in str(config.public_dict())


def test_argument_groups(project):
    cfg = write(project / "src/t/methods/g/config.vsh.yaml",
                "name: g\nargument_groups:\n  - name: Params\n    arguments:\n      - {name: --alpha, type: double, default: 0.5}\n      - {name: --flag, type: boolean_true}\n")
    config = read_config(cfg)
    assert [(a.name, a.group) for a in config.arguments] == [("alpha", "Params"), ("flag", "Params")]
    assert config.argument("alpha").coerce("0.25", where="x") == 0.25
    assert config.argument("flag").coerce("true", where="x") is True


def test_deep_merge():
    assert deep_merge({"a": [1], "b": {"c": 1, "d": 2}}, {"a": [2], "b": {"d": 3}, "e": 4}) == {"a": [1, 2], "b": {"c": 1, "d": 3}, "e": 4}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: m\n__merge__: missing.yaml\n", "missing.yaml"),
        ("name: m\narguments:\n  - {type: integer}\n", "arguments[0].name"),
        ("name: m\narguments:\n  - {name: --a, type: integr}\n", "arguments[0] (--a).type"),
        ("name: m\narguments:\n  - {name: --a, type: integer, default: abc}\n", "--a: expected integer"),
        ("name: m\narguments:\n  - {name: --a}\n  - {name: --a}\n", "defined more than once: --a"),
        ("name: [unclosed\n", "invalid YAML"),
        ("label: no name\n", "name: every component needs a name"),
        ("name: m\ninfo:\n  type: gizmo\n", "info.type"),
    ],
)
def test_errors_name_file_and_key(project, text, expected):
    cfg = write(project / "src/t/methods/bad/config.vsh.yaml", text)
    with pytest.raises(ConfigError) as err:
        read_config(cfg)
    assert str(cfg) in str(err.value)
    assert expected in str(err.value)


def test_circular_merge(project):
    write(project / "src/t/api/a.yaml", "__merge__: b.yaml\n")
    write(project / "src/t/api/b.yaml", "__merge__: a.yaml\n")
    cfg = write(project / "src/t/methods/c/config.vsh.yaml", "__merge__: ../../api/a.yaml\nname: c\n")
    with pytest.raises(ConfigError, match="circular __merge__"):
        read_config(cfg)


def test_fixture_components_parse(tiny_task):
    names = {c.name: c for c in tiny_task.components}
    assert names["truth"].type == "control_method" and names["truth"].control == "positive"
    assert [a.name for a in names["truth"].file_inputs] == ["input_train", "input_test", "input_solution"]
    assert names["errors"].metrics[0]["maximize"] is False
    assert names["shrunk_mean"].test_defaults() == {"alpha": 0.5}
    assert names["fail_timeout"].labels == ["lowmem", "lowcpu", "tinytime", "lowdisk"]
    assert tiny_task.method_formats == {"file_train", "file_test"}
    assert tiny_task.prediction_format == "file_prediction"
    assert set(tiny_task.dataset_formats) == {"file_train", "file_test", "file_solution"}


@pytest.mark.parametrize("name", ["../synthetic_simulation/no_change", "../../../../escape_probe", "Caps", "1st", "a-b", "a b"])
def test_a_name_that_is_not_an_id_is_refused_when_read(project, name):
    cfg = write(project / "src/t/methods/m/config.vsh.yaml", f"__merge__: ../../api/comp_method.yaml\nname: {name!r}\n")
    with pytest.raises(ConfigError, match=r"config.vsh.yaml: name: .* must match"):
        read_config(cfg)


@pytest.mark.parametrize("resource", [
    "../../../../resources_test/t/d/solution.h5ad",
    "/../../../etc/passwd",
    "/resources_test/t/d/solution.h5ad",
    "/src/other/other_lib",
    "../n/script.py",
])
def test_a_resource_outside_the_component_and_its_task_library_is_refused(project, resource):
    write(project / "src/t/methods/m/script.py", "x = 1\n")
    cfg = write(project / "src/t/methods/m/config.vsh.yaml",
                f"__merge__: ../../api/comp_method.yaml\nname: m\nresources:\n  - {{type: python_script, path: script.py}}\n"
                f"  - {{type: file, path: {resource!r}}}\n")
    with pytest.raises(ConfigError, match=r"resources: .* outside the component's folder and its task library"):
        read_config(cfg)


def test_the_task_library_and_files_next_to_the_script_are_resources(project):
    write(project / "src/t/t_lib/model.py", "x = 1\n")
    write(project / "src/t/methods/m/helper.py", "x = 1\n")
    cfg = write(project / "src/t/methods/m/config.vsh.yaml",
                "__merge__: ../../api/comp_method.yaml\nname: m\nresources:\n  - {type: python_script, path: script.py}\n"
                "  - {type: file, path: helper.py}\n  - {type: file, path: /src/t/t_lib}\n")
    config = read_config(cfg)
    assert [config.resource_path(r) for r in config.resources][1:] == [project / "src/t/methods/m/helper.py", project / "src/t/t_lib"]


def test_config_files_finds_components_and_leaves_out_interfaces(project):
    method = write(project / "src/t/methods/m/config.vsh.yaml", "__merge__: /src/t/api/comp_method.yaml\nname: m\n")
    write(project / "src/t/api/nested/config.vsh.yaml", "name: not_a_component\n")
    assert config_files(project / "src") == [method]
    assert config_files(method) == [method]
    assert config_files(project / "src/t/api/comp_method.yaml") == [] and config_files(project / "missing") == []


def _dataset_component(project: Path, datasets: str):
    path = write(project / "src/t/datasets/d/config.vsh.yaml", f"name: d\ninfo:\n  type: dataset\n  datasets: {datasets}\n")
    return read_config(path)


def test_dataset_entries_are_checked_once_for_every_reader(project):
    assert _dataset_component(project, "[{id: a, large: true}, {id: b}]").dataset_entries == [{"id": "a", "large": True}, {"id": "b"}]
    for datasets, message in [("{id: a}", "must be a list"), ("[{name: a}]", r"info.datasets\[0\] needs an id"),
                              ("[{id: a, large: maybe}]", r"info.datasets\[0\].large must be true or false")]:
        with pytest.raises(ConfigError, match=message):
            _ = _dataset_component(project, datasets).dataset_entries


def test_a_yaml_file_is_read_anew_when_edited_and_each_reader_gets_its_own_copy(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("a: [1, 2]\n")
    first = load_yaml(path)
    first["a"].append(3)  # a caller that edits what it read must not edit what the next one reads
    assert load_yaml(path) == {"a": [1, 2]}
    # Edited at once (same size, same clock tick): the new content, not the one parsed before.
    path.write_text("a: [1, 5]\n")
    assert load_yaml(path) == {"a": [1, 5]}
    (tmp_path / "other.yaml").write_text("a: [1, 2]\n")
    assert load_yaml(tmp_path / "other.yaml") == {"a": [1, 2]}


def test_a_yaml_file_that_cannot_be_read_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"missing\.yaml: file not found"):
        load_yaml(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("a: [1, 2\n")
    for _ in range(2):  # a failure is not remembered as a success
        with pytest.raises(ConfigError, match=r"bad\.yaml: invalid YAML"):
            load_yaml(tmp_path / "bad.yaml")
    (tmp_path / "latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1\.yaml: invalid YAML"):
        load_yaml(tmp_path / "latin1.yaml")
