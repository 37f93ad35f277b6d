"""Resource labels of _viash.yaml read as time, memory and CPU limits, with errors naming the file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from project_paths import ROOT

from openpert.engines.resource_labels import parse_label_resources, parse_resource_directive

REPO = ROOT


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _viash_yaml(tmp_path: Path, labels: str) -> Path:
    body = '  .runners[.type == "nextflow"].config.labels := { ' + labels + " }\n"
    return _write(tmp_path / "_viash.yaml", "name: x\nconfig_mods: |\n" + body)



# --------------------------------------------------------------------------------------------------
# resource labels


def test_parse_label_resources_reads_the_repository_labels():
    assert parse_label_resources(REPO / "_viash.yaml") == {
        "lowmem": {"memory_mb": 4096},
        "midmem": {"memory_mb": 12288},
        "highmem": {"memory_mb": 20480},
        "lowcpu": {"cpus": 1},
        "midcpu": {"cpus": 2},
        "highcpu": {"cpus": 4},
        "lowtime": {"time_s": 600},
        "midtime": {"time_s": 3600},
        "hightime": {"time_s": 14400},
        "veryhightime": {"time_s": 43200},
        "lowdisk": {"disk_mb": 2048},
        "middisk": {"disk_mb": 20480},
        "highdisk": {"disk_mb": 204800},
        "gpu": {"gpus": 1},
    }


def test_parse_label_resources_units(tmp_path):
    path = _viash_yaml(
        tmp_path,
        'a : "memory = 500.MB", b : "memory = 1024.KB", c : "memory = 2.TB", d : "time = 30.s", '
        'e : "time = 2.d", f : "time = 1.5.h", g : "memory = \'1 GB\'", h : "time = 250.ms", '
        'i : "cpus = 16", j : "memory = 3GB", k : "disk = 2.GB", l : "disk = 1.5.MB"',
    )
    assert parse_label_resources(path) == {
        "a": {"memory_mb": 500},
        "b": {"memory_mb": 1},
        "c": {"memory_mb": 2 * 1024 * 1024},
        "d": {"time_s": 30},
        "e": {"time_s": 2 * 86400},
        "f": {"time_s": 5400},
        "g": {"memory_mb": 1024},
        "h": {"time_s": 1},  # rounded up: a limit is never made stricter than written
        "i": {"cpus": 16},
        "j": {"memory_mb": 3072},
        "k": {"disk_mb": 2048},
        "l": {"disk_mb": 2},  # rounded up, as memory
    }


def test_parse_label_resources_accepts_a_list_of_config_mods(tmp_path):
    path = _write(
        tmp_path / "_viash.yaml",
        yaml.safe_dump(
            {
                "config_mods": [
                    '.info.x := "y"',
                    '.runners[.type == "nextflow"].config.labels := { small : "memory = 1.GB" }',
                ]
            }
        ),
    )
    assert parse_label_resources(path) == {"small": {"memory_mb": 1024}}


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ('lowmem : "memory = 4.XB"', "unknown memory unit 'XB'"),
        ('lowtime : "time = 10.fortnights"', "unknown time unit 'fortnights'"),
        ('lowdisk : "disk = 4.XB"', "unknown disk unit 'XB'"),
        ('fast : "maxForks = 4"', "unknown resource directive 'maxForks'"),
        ('lowcpu : "cpus = two"', "cpus must be a positive integer"),
        ('lowcpu : "cpus = 0"', "cpus must be a positive integer"),
        ('lowmem : "memory 4.GB"', "expected '<directive> = <value>'"),
        ('lowmem : "memory = lots"', "cannot read memory value 'lots'"),
        ("lowmem : memory = 4.GB", "malformed label entry"),
        ('lowmem : "memory = 4.GB" midmem : "memory = 8.GB"', "malformed label entry"),
    ],
)
def test_parse_label_resources_malformed_entries_name_the_file(tmp_path, labels, message):
    path = _viash_yaml(tmp_path, labels)
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        parse_label_resources(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\n", "no 'config_mods'"),
        ("config_mods: |\n  .info.x := 1\n", "has no '.labels := {...}'"),
        ('config_mods: |\n  .runners[.type == "nextflow"].config.labels := lowmem\n', "malformed labels"),
        ("config_mods: [\n", "invalid YAML"),
    ],
)
def test_parse_label_resources_without_labels_names_the_file(tmp_path, text, message):
    path = _write(tmp_path / "_viash.yaml", text)
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        parse_label_resources(path)
    assert str(path) in str(info.value)


def test_parse_resource_directive():
    assert parse_resource_directive("memory = 4.GB") == {"memory_mb": 4096}
    assert parse_resource_directive("memory=512.B") == {"memory_mb": 1}
    assert parse_resource_directive("time = 10.m") == {"time_s": 600}
    assert parse_resource_directive("time = 1.h") == {"time_s": 3600}
    assert parse_resource_directive("time = '90 min'") == {"time_s": 5400}
    assert parse_resource_directive("cpus = 4") == {"cpus": 4}
    assert parse_resource_directive("accelerator = 2") == {"gpus": 2}
    with pytest.raises(ValueError, match="accelerator must be a positive integer"):
        parse_resource_directive("accelerator = 0")




# --------------------------------------------------------------------------------------------------
# no job without limits


def test_a_component_naming_no_time_memory_or_disk_label_runs_with_the_lowest():
    from openpert.engines.plan import limits_for
    from openpert.engines.resource_labels import implied_labels, lowest_labels

    resources = parse_label_resources(REPO / "_viash.yaml")
    assert lowest_labels(resources) == {"time_s": "lowtime", "memory_mb": "lowmem", "disk_mb": "lowdisk"}
    assert implied_labels(["lowcpu"], resources) == ["lowtime", "lowmem", "lowdisk"]
    assert implied_labels(["hightime", "midmem", "middisk"], resources) == []
    # The attack of a method labelled only [lowcpu]: it gets 10 minutes, 4 GB and 2 GB, not unlimited.
    limits = limits_for(["lowcpu"], resources, where="m")
    assert (limits.time_s, limits.memory_mb, limits.disk_mb, limits.cpus) == (600, 4096, 2048, 1)
    # A label the component names wins over the lowest.
    assert limits_for(["lowcpu", "middisk"], resources, where="m").disk_mb == 20 * 1024


def test_lowest_labels_leaves_out_a_dimension_no_label_sets(tmp_path):
    from openpert.engines.resource_labels import implied_labels, lowest_labels

    resources = parse_label_resources(_viash_yaml(tmp_path, 'big : "memory = 8.GB", small : "memory = 1.GB", one : "cpus = 1"'))
    assert lowest_labels(resources) == {"memory_mb": "small"}
    assert implied_labels(["one"], resources) == ["small"]


def test_label_advice_names_the_label_and_the_next_one_up():
    from openpert.engines.resource_labels import label_advice

    labels = parse_label_resources(REPO / "_viash.yaml")
    config = "src/t/methods/m/config.vsh.yaml"
    assert label_advice(["lowmem", "lowcpu", "lowtime"], labels, "time_s", config=config) == (
        "label lowtime (10 min) set the limit: replace it with midtime (1 h) in the nextflow runner's label list of "
        "src/t/methods/m/config.vsh.yaml, or make the component faster")
    assert label_advice(["midmem", "lowtime"], labels, "memory_mb", config=config).startswith(
        "label midmem (12 GB) set the limit: replace it with highmem (20 GB)")
    assert label_advice(["veryhightime"], labels, "time_s", config=config) == (
        "label veryhightime (12 h) set the limit, the highest time label of _viash.yaml: make the component faster")
    # a component naming no time label ran with the lowest: it is told to add the next one up
    assert label_advice(["lowmem"], labels, "time_s", config=config) == (
        "label lowtime (10 min) set the limit: add midtime (1 h) to the nextflow runner's label list of "
        "src/t/methods/m/config.vsh.yaml (a component naming no time label runs with the lowest), or make the "
        "component faster")
    # a limit no label of the project sets has no label to raise
    assert label_advice(["lowmem"], {"lowmem": {"memory_mb": 4096}}, "time_s", config=config) == ""
