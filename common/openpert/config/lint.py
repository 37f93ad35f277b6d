"""``openpert lint``: check component configs before anything runs them.

Each problem is one line: ``<config>: <key>: <what is wrong>``, or ``<script>:<line>: ...`` for what
a component's script reads (``par`` keys its config does not declare).
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable
from pathlib import Path

from openpert.config.formats import LABEL_MAX
from openpert.config.viash import (
    COMPONENT_TYPES,
    CONTROL_ROLES,
    ComponentConfig,
    ConfigError,
    as_list,
    config_files,
    read_config,
)
from openpert.run.viash_block import BLOCK

#: Length bounds of descriptive fields, as Open Problems' task template checks them. Labels are
#: shorter than Open Problems' 50: they head the columns of the results website's overview and
#: name the rows and axes of its figures (the report cuts longer ones with an ellipsis).
SUMMARY_MIN, SUMMARY_MAX = 15, 400
DESCRIPTION_MIN = 30
METRIC_KEYS = ("name", "label", "summary", "description", "min", "max", "maximize")
_DOI = re.compile(r"^10\.\d{4,9}/\S+$")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


#: The problem of a config that still holds the scaffold's placeholder text: lint reports it (a pull
#: request needs the real text), a component's test does not (it tests the code, which works as written).
PLACEHOLDER = "still holds the scaffold's placeholder: write the real text"


def lint_config(config: ComponentConfig) -> list[str]:
    """Problems of one component config (an empty list when it is fine)."""
    where = str(config.path)
    problems: list[str] = []
    data = config.data

    def bad(key: str, message: str) -> None:
        problems.append(f"{where}: {key}: {message}")

    if not _NAME.match(config.name):
        bad("name", f"{config.name!r} should be snake_case (lowercase letters, digits, underscores)")
    if config.name != config.path.parent.name:
        bad("name", f"{config.name!r} differs from its folder {config.path.parent.name!r}")
    if config.type not in COMPONENT_TYPES:
        bad("info.type", f"missing or unknown ({config.type!r}); merge the task's api/comp_<type>.yaml")
    label = data.get("label")
    if not isinstance(label, str) or not label.strip():
        bad("label", "missing")
    elif len(label) > LABEL_MAX:
        bad("label", f"{len(label)} characters; at most {LABEL_MAX}")
    summary = data.get("summary")
    if not isinstance(summary, str) or not (SUMMARY_MIN <= len(summary.strip()) <= SUMMARY_MAX):
        bad("summary", f"needs {SUMMARY_MIN} to {SUMMARY_MAX} characters")
    description = data.get("description")
    if not isinstance(description, str) or len(description.strip()) < DESCRIPTION_MIN:
        bad("description", f"needs at least {DESCRIPTION_MIN} characters")
    for key in ("label", "summary", "description", "references", "links"):
        if "FILL IN" in str(data.get(key, "")) or "fill.in" in str(data.get(key, "")) or "fill-in" in str(data.get(key, "")):
            bad(key, PLACEHOLDER)
    if config.type in ("method", "control_method", "metric", "dataset"):
        refs = data.get("references") or {}
        if not isinstance(refs, dict) or not (refs.get("doi") or refs.get("bibtex")):
            if config.type != "control_method":
                bad("references", "give at least one doi or bibtex entry")
        for doi in as_list(refs.get("doi") if isinstance(refs, dict) else None):
            if not isinstance(doi, str) or not _DOI.match(doi):
                bad("references.doi", f"{doi!r} is not a DOI like 10.1234/abcd")
    if config.type == "control_method" and config.control not in CONTROL_ROLES:
        bad("info.control", f"a control method needs one of {CONTROL_ROLES}, got {config.control!r}")
    if config.type != "control_method" and config.control is not None:
        bad("info.control", "only control methods have a control role")
    problems.extend(seed_problems(config))
    if config.type == "dataset":
        problems.extend(dataset_label_problems(config))
    if config.type == "metric":
        metrics = config.metrics
        if not metrics:
            bad("info.metrics", "a metric component lists its metrics: [{name, label, summary, description, min, max, maximize}]")
        for i, metric in enumerate(metrics):
            missing = [k for k in METRIC_KEYS if not isinstance(metric, dict) or k not in metric]
            if missing:
                bad(f"info.metrics[{i}]", f"missing {', '.join(missing)}")
            elif not isinstance(metric["maximize"], bool):
                bad(f"info.metrics[{i}].maximize", "must be true or false")
            elif "chance" in metric and (isinstance(metric["chance"], bool)
                                         or not isinstance(metric["chance"], (int, float))):
                bad(f"info.metrics[{i}].chance", "must be a number: the metric's expected value for an uninformative answer")
            metric_label = metric.get("label") if isinstance(metric, dict) else None
            if isinstance(metric_label, str) and len(metric_label) > LABEL_MAX:
                bad(f"info.metrics[{i}].label", f"{len(metric_label)} characters; at most {LABEL_MAX}")
    try:
        script = config.script
    except ConfigError as err:
        problems.append(str(err))
    else:
        if not script.is_file():
            bad("resources", f"script {script.name} not found")
        elif config.script_type == "python_script":
            if len(BLOCK.findall(script.read_text())) != 1:
                bad("resources", f"{script.name} needs exactly one '## VIASH START' ... '## VIASH END' block")
            problems.extend(script_parameter_problems(config, script))
    for res in config.resources:
        if isinstance(res, dict) and isinstance(res.get("path"), str) and not config.resource_path(res).exists():
            bad("resources", f"{res['path']} not found")
    if not any(e.get("type") == "docker" and e.get("image") for e in config.engines):
        bad("engines", "add a docker engine naming a base image of docker/ (e.g. {type: docker, registry: ghcr.io, "
                       "organization: openpert, image: core, tag: 0.1.0})")
    problems.extend(image_problems(config))
    if not any(r.get("type") == "nextflow" for r in config.runners):
        bad("runners", "add a nextflow runner with resource labels: {type: nextflow, directives: {label: [lowmem, lowcpu, lowtime, lowdisk]}}")
    else:
        from openpert.engines.plan import label_resources
        from openpert.engines.resource_labels import LIMIT_KINDS, implied_labels, limit_text

        known = label_resources(config.root)
        for label_name in config.labels:
            if label_name not in known:
                bad("runners.directives.label", f"unknown label {label_name!r}; known: {', '.join(sorted(known))}")
        for implied in implied_labels(config.labels, known):
            key = next(iter(known[implied]))
            choices = ", ".join(sorted(name for name, limits in known.items() if key in limits))
            bad("runners.directives.label", f"names no {LIMIT_KINDS[key]} label, so it runs with the lowest, {implied} "
                                            f"({limit_text(key, known[implied][key])}): "
                                            f"add one of {choices}")
    try:
        config.test_defaults()
    except ConfigError as err:
        problems.append(str(err))
    problems.extend(schema_problems(config))
    for arg in config.file_inputs + config.file_outputs:
        # A dataset loader reads raw data in its original format (or a folder of it); everything
        # else exchanges files of the task's API.
        if arg.format_id is None and not (config.type == "dataset" and arg in config.file_inputs):
            bad(f"arguments --{arg.name}", "file arguments merge one of the task's api/file_*.yaml")
    return problems


def parameter_reads(source: str) -> list[tuple[int, str]]:
    """The ``par`` keys a Python script reads: ``par["key"]`` and ``par.get("key", ...)``.

    Parameters
    ----------
    source
        The script's text.

    Returns
    -------
    list of (int, str)
        Line and key of each read, in the order they are written. Keys that are not string
        literals (``par[name]``) cannot be checked and are left out; so are assignments to ``par``
        (the Viash block writes the keys it defines).

    Raises
    ------
    SyntaxError
        When the script does not parse.
    """
    reads = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
                and isinstance(node.value, ast.Name) and node.value.id == "par"):
            key = node.slice
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "par" and node.args):
            key = node.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            reads.append((node.lineno, key.value))
    return sorted(reads)


def script_parameter_problems(config: ComponentConfig, script: Path) -> list[str]:
    """``par`` keys that a component's Python script reads but its config does not declare.

    Viash fills ``par`` with the component's arguments only (its ``config.vsh.yaml`` merged with the
    task's API file), so any other key is a ``KeyError`` (or a silent ``None`` from ``par.get``) at
    run time. Each problem names the script, the line, the key and the closest declared argument.
    """
    try:
        reads = parameter_reads(script.read_text())
    except SyntaxError as err:
        return [f"{script}:{err.lineno}: does not parse as Python: {err.msg}"]
    declared = [a.name for a in config.arguments]
    problems = []
    for line, key in reads:
        if key in declared:
            continue
        closest = difflib.get_close_matches(key, declared, n=1, cutoff=0.0)
        hint = f"closest declared argument: --{closest[0]}" if closest else "the config declares no arguments"
        problems.append(f"{script}:{line}: par[{key!r}] is not an argument of {config.path} ({hint})")
    return problems


def seed_problems(config: ComponentConfig) -> list[str]:
    """What is wrong with a component's seed replicates (``info.seeds`` and its ``--seed`` argument)."""
    where = str(config.path)
    try:
        seeds = config.seeds
    except ConfigError as err:
        return [str(err)]
    if not seeds:
        return []
    problems = []
    if config.type not in ("control_method", "method"):
        problems.append(f"{where}: info.seeds: only methods and control methods run as seed replicates")
    seed_args = [a for a in config.parameters if a.name == "seed"]
    if not seed_args:
        problems.append(f"{where}: info.seeds: a seeded component needs an integer argument --seed "
                        "(each replicate runs with --seed 0, 1, ...)")
    elif seed_args[0].type not in ("integer", "long"):
        problems.append(f"{where}: arguments --seed: must be of type integer, got {seed_args[0].type}")
    return problems


def dataset_label_problems(config: ComponentConfig) -> list[str]:
    """Labels of the datasets a dataset component declares, each at most :data:`LABEL_MAX` characters.

    A dataset's label is the ``label`` (or ``dataset_name``) of an ``info.datasets`` entry, or the
    default of the component's ``--dataset_name`` argument: the website names the dataset with it.
    """
    where = str(config.path)
    problems = []
    entries = config.info.get("datasets") or []
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        for key in ("label", "dataset_name"):
            value = entry.get(key) if isinstance(entry, dict) else None
            if isinstance(value, str) and len(value) > LABEL_MAX:
                problems.append(f"{where}: info.datasets[{i}].{key}: {len(value)} characters; at most {LABEL_MAX}")
    for arg in config.parameters:
        if arg.name == "dataset_name" and isinstance(arg.default, str) and len(arg.default) > LABEL_MAX:
            problems.append(f"{where}: arguments --dataset_name: default has {len(arg.default)} characters; "
                            f"at most {LABEL_MAX} (it names the dataset on the website)")
    return problems


def task_problems(task_dir: Path) -> list[str]:
    """Problems of a task as a whole: headline and diagnostic metrics must partition its metrics,
    adversarial controls may only name its metrics as those they game, and no method reads a
    solution-only format."""
    from openpert.config.task import Task

    try:
        task = Task(task_dir)
        return (task.metric_partition_problems() + task.adversarial_target_problems() + task.solution_read_problems()
                + data_manifest_problems(task) + published_results_problems(task))
    except ConfigError as err:
        return [str(err)]


def data_manifest_problems(task) -> list[str]:
    """What is wrong with a task's data manifest: its entries (pinned URLs, checksums), dataset ids
    that no ``info.datasets`` entry has, and ``{data: <path>}`` inputs the manifest does not give."""
    from openpert.data.manifest import MANIFEST_NAME, task_manifest

    files = task_manifest(task.dir)  # a malformed manifest raises, naming the file and entry
    where = task.dir / "api" / MANIFEST_NAME
    entries = [(c, e) for c in task.of_type("dataset") for e in [*c.dataset_entries, *c.build_entries]]
    ids = {e.get("id") for _, e in entries}
    problems = [f"{where}: {f.path}: datasets {', '.join(sorted(set(f.datasets) - ids))} are no info.datasets "
                "or info.builds id of the task"
                for f in files if f.datasets is not None and set(f.datasets) - ids]
    for comp, entry in entries:
        for name, value in entry.items():
            if isinstance(value, dict) and isinstance(value.get("data"), str):
                if not any(f.path == value["data"] and f.read_by(entry.get("id")) for f in files):
                    problems.append(f"{comp.path}: info.datasets {entry.get('id')}: --{name} reads {value['data']}, "
                                    f"which {where} does not give that dataset")
    return problems


def published_results_problems(task) -> list[str]:
    """What is wrong with a task's ``api/published_results.yaml``: malformed entries, and methods,
    metrics or datasets it maps to that the task does not have (``docs/reproduction.md``)."""
    from openpert.results.reproduction import declaration_problems

    dataset_ids = {e["id"] for c in task.of_type("dataset") for e in c.dataset_entries}
    return declaration_problems(
        task.dir, method_ids={c.name for c in task.of_type("method", "control_method")},
        metric_ids={m["name"] for c in task.of_type("metric") for m in c.metrics}, dataset_ids=dataset_ids)


def image_problems(config: ComponentConfig) -> list[str]:
    """What keeps a component's docker engine from naming one of the project's base images.

    Only for projects that keep base images in ``docker/``.
    """
    from openpert.images.bases import base_images
    from openpert.images.components import declaration_problems

    return declaration_problems(config) if base_images(config.root) else []


def schema_problems(config: ComponentConfig) -> list[str]:
    """Viash schema problems of a config; the schemas are downloaded on first use when missing, and
    a machine that has none and cannot download them gets one problem saying how to fetch them."""
    from openpert.config.viash_schema import validate_component

    try:
        return validate_component(config)
    except ConfigError as err:
        return [str(err)]


def project_problems(root: Path, configs: list[ComponentConfig]) -> list[str]:
    """Problems of the project as a whole: ``_viash.yaml`` under Viash's schema and with a label for every
    limit, namespace clashes, and each task's own problems."""
    from openpert.config.task import discover_tasks
    from openpert.config.viash_schema import namespace_collisions, validate_project_file
    from openpert.engines.plan import label_resources
    from openpert.engines.resource_labels import LIMIT_KINDS, lowest_labels

    problems = namespace_collisions(configs)
    # No job runs without limits: every limit a component may leave unnamed has a lowest label.
    try:
        lowest = lowest_labels(label_resources(root))
    except (ValueError, ConfigError) as err:
        problems.append(str(err))
    else:
        for key, what in LIMIT_KINDS.items():
            if key not in lowest:
                problems.append(f"{root / '_viash.yaml'}: config_mods: no resource label sets a {what} limit; "
                                f"define one (e.g. low{what}), which components naming none run with")
    try:
        task_dirs = [t.dir for t in discover_tasks(root)]
    except ConfigError as err:
        problems.append(str(err))
        task_dirs = []
    for task_dir in task_dirs:
        problems.extend(task_problems(task_dir))
    try:
        from openpert.data.manifest import merge_manifests, project_manifest, task_manifest

        # The project's own manifest is read (checked) with the tasks'; a file is declared alike by all.
        merge_manifests([project_manifest(root), *(task_manifest(d) for d in task_dirs)])
    except ConfigError as err:
        problems.append(str(err))
    try:
        problems.extend(validate_project_file(root))
    except ConfigError as err:
        problems.append(str(err))
    return problems


def lint_paths(paths: Iterable[Path]) -> list[str]:
    """Problems of every ``config.vsh.yaml`` at or below ``paths``."""
    problems: list[str] = []
    for path in paths:
        path = Path(path)
        for config_path in config_files(path):
            try:
                problems.extend(lint_config(read_config(config_path)))
            except ConfigError as err:
                problems.append(str(err))
    # A project-wide problem (schemas that cannot be had) would otherwise repeat for every config.
    return list(dict.fromkeys(problems))
