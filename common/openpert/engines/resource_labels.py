"""Resource labels of ``_viash.yaml``: Nextflow directives turned into time, memory, CPU, disk and GPU limits.

``config_mods`` of ``_viash.yaml`` map each label (``lowmem``, ``midtime``, ``lowdisk``...) to
Nextflow directives (``memory = 4.GB``, ``time = '1h'``, ``disk = 2.GB``...). Both engines read them
here, so that a job gets the same limits whichever runs it.

No job runs without limits: a component that names no label of a dimension of
:data:`LIMIT_KINDS` (time, memory, disk) runs with the project's lowest label of it
(:func:`implied_labels`; ``lowtime``, ``lowmem``, ``lowdisk``), and ``openpert lint`` asks it to name
one. Every job may also hold :data:`DEFAULT_PROCESSES` processes at once (Nextflow has no directive for
a process count; a scheduler's own limits apply on a cluster).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from openpert.config.project import project_file

#: Megabytes per memory unit of Nextflow directives and traces.
MEMORY_UNITS_MB = {unit: 1024.0 ** (power - 2) for power, unit in enumerate(("B", "KB", "MB", "GB", "TB", "PB"))}
#: Seconds per time unit of Nextflow durations (each unit with its long forms).
TIME_UNITS_S = {name: seconds for names, seconds in ((("ms", "milli", "millis"), 0.001), (("s", "sec", "second", "seconds"), 1.0),
                                                     (("m", "min", "minute", "minutes"), 60.0), (("h", "hour", "hours"), 3600.0),
                                                     (("d", "day", "days"), 86400.0))
                for name in names}


#: The limits a label sets that a job can exceed (the ``Limits`` field, and what the limit is called):
#: a component naming no label of one runs with the project's lowest.
LIMIT_KINDS = {"time_s": "time", "memory_mb": "memory", "disk_mb": "disk"}
#: Processes a job may hold at once (its sandbox's launcher included): a pool of workers per core
#: fits many times over; a fork bomb does not.
DEFAULT_PROCESSES = 256

_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)\s*\.?\s*([A-Za-z]+)$")


def parse_resource_directive(text: str) -> dict[str, int]:
    """Parse one Nextflow resource directive, as written in a label.

    Parameters
    ----------
    text
        ``"memory = 4.GB"``, ``"disk = 2.GB"``, ``"cpus = 2"``, ``"time = 10.m"`` or
        ``"accelerator = 1"`` (GPUs). Memory and disk accept the units B, KB, MB, GB, TB and PB
        (powers of 1024, as Nextflow); time accepts ms, s, m, h and d (and their long forms).
        ``4.GB``, ``4 GB``, ``4GB`` and ``'4 GB'`` are all read alike.

    Returns
    -------
    ``{"memory_mb": int}``, ``{"disk_mb": int}`` (rounded up to whole MB), ``{"cpus": int}``,
    ``{"time_s": int}`` (rounded up to whole seconds) or ``{"gpus": int}``.

    Raises
    ------
    ValueError
        If the directive is not one of these or its value cannot be read.
    """
    name, sep, value = text.partition("=")
    name, value = name.strip(), value.strip().strip("'\"").strip()
    if not sep or not name or not value:
        raise ValueError(f"expected '<directive> = <value>', got {text!r}")
    if name in ("cpus", "accelerator"):
        if not re.fullmatch(r"\d+", value) or int(value) < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
        return {"cpus" if name == "cpus" else "gpus": int(value)}
    if name not in ("memory", "disk", "time"):
        raise ValueError(f"unknown resource directive {name!r} (expected memory, disk, cpus, time or accelerator)")
    match = _QUANTITY.match(value)
    if match is None:
        raise ValueError(f"cannot read {name} value {value!r} (expected e.g. '4.GB' or '10.m')")
    amount, unit = float(match.group(1)), match.group(2)
    if name in ("memory", "disk"):
        factor = MEMORY_UNITS_MB.get(unit.upper())
        if factor is None:
            raise ValueError(f"unknown {name} unit {unit!r} in {value!r} (use B, KB, MB, GB, TB)")
        return {f"{name}_mb": int(math.ceil(amount * factor))}
    factor = TIME_UNITS_S.get(unit.lower())
    if factor is None:
        raise ValueError(f"unknown time unit {unit!r} in {value!r} (use ms, s, m, h, d)")
    return {"time_s": int(math.ceil(amount * factor))}


_LABELS_MOD = re.compile(r"\.labels\s*:=\s*\{(?P<body>.*)\}\s*$", re.DOTALL)
_LABEL_ENTRY = re.compile(r"""\s*(?P<label>[A-Za-z_][\w-]*)\s*:\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)')\s*(?:,|$)""")


def parse_label_resources(viash_yaml_path: str | os.PathLike) -> dict[str, dict[str, int]]:
    """Read the resource labels that ``_viash.yaml``'s ``config_mods`` define.

    Viash's config-mod syntax is
    ``.runners[.type == "nextflow"].config.labels := { lowmem : "memory = 4.GB", ... }``; every
    label maps to one Nextflow directive. Both engines use this mapping, so a label means the
    same limit on a laptop and on a cluster.

    Parameters
    ----------
    viash_yaml_path
        Path of ``_viash.yaml``.

    Returns
    -------
    Label -> ``{"memory_mb": int}``, ``{"disk_mb": int}``, ``{"cpus": int}``, ``{"time_s": int}`` or ``{"gpus": int}``.

    Raises
    ------
    ValueError
        Naming the file, when ``config_mods`` has no labels mod or an entry cannot be read, or
        (:class:`~openpert.config.viash.ConfigError`) the file is missing or not valid YAML.
    """
    path = Path(viash_yaml_path)
    mods = project_file(path.parent).get("config_mods")
    if isinstance(mods, str):
        mods = mods.splitlines()
    if not isinstance(mods, list):
        raise ValueError(f"{path}: no 'config_mods' defining resource labels")

    labels: dict[str, dict[str, int]] = {}
    found = False
    for mod in mods:
        if not isinstance(mod, str) or ".labels" not in mod:
            continue
        match = _LABELS_MOD.search(mod.strip())
        if match is None:
            raise ValueError(f"{path}: malformed labels config mod (expected '.runners[...].config.labels := "
                             f"{{ label : \"directive = value\", ... }}'): {mod.strip()!r}")
        found = True
        body = match.group("body")
        pos = 0
        while body[pos:].strip():
            entry = _LABEL_ENTRY.match(body, pos)
            if entry is None:
                raise ValueError(f"{path}: malformed label entry in config_mods near {body[pos:].strip()[:40]!r} "
                                 "(expected 'label : \"directive = value\"')")
            label = entry.group("label")
            directive = entry.group("dq") if entry.group("dq") is not None else entry.group("sq")
            try:
                parsed = parse_resource_directive(directive)
            except ValueError as exc:
                raise ValueError(f"{path}: label {label!r}: {exc}") from None
            labels.setdefault(label, {}).update(parsed)
            pos = entry.end()
    if not found:
        raise ValueError(f"{path}: 'config_mods' has no '.labels := {{...}}' defining resource labels")
    return labels


def limit_text(key: str, value: float) -> str:
    """A label's limit as a reader writes it: ``10 min``, ``1 h``, ``4 s``, ``4 GB``, ``300 MB``."""
    if key == "time_s":
        for unit, seconds in (("h", 3600), ("min", 60)):
            if value >= seconds and value % seconds == 0:
                return f"{value / seconds:g} {unit}"
        return f"{value:g} s"
    return f"{value / 1024:g} GB" if value >= 1024 and value % 1024 == 0 else f"{value:g} MB"


def lowest_labels(resources: dict[str, dict[str, int]]) -> dict[str, str]:
    """The project's smallest label of each of :data:`LIMIT_KINDS` (``{"disk_mb": "lowdisk", ...}``).

    A limit no label sets is absent (``openpert lint`` asks the project to define one).
    """
    lowest = {}
    for key in LIMIT_KINDS:
        sizes = sorted((values[key], name) for name, values in resources.items() if key in values)
        if sizes:
            lowest[key] = sizes[0][1]
    return lowest


def implied_labels(labels: list[str] | tuple[str, ...], resources: dict[str, dict[str, int]]) -> list[str]:
    """The lowest labels a component runs with for the limits its own ``labels`` leave unset.

    Parameters
    ----------
    labels
        The component's resource labels (unknown ones are ignored here; the plan refuses them).
    resources
        The project's labels (:func:`parse_label_resources`).

    Returns
    -------
    Label names, in the order of :data:`LIMIT_KINDS`.
    """
    named = {key for label in labels for key in resources.get(label, {})}
    return [label for key, label in lowest_labels(resources).items() if key not in named]


def label_advice(labels: list[str], resources: dict[str, dict[str, float]], key: str, *, config: str) -> str:
    """What to tell the author of a job stopped at a limit: the label that set it and the next label up.

    Parameters
    ----------
    labels
        The component's resource labels (a limit none of them sets came from the lowest label,
        :func:`implied_labels`).
    resources
        Label -> limits (:func:`parse_label_resources`).
    key
        The limit exceeded: ``"time_s"``, ``"memory_mb"`` or ``"disk_mb"``.
    config
        The component's config, as the advice names it.

    Returns
    -------
    str
        E.g. ``"label lowtime (10 min) set the limit: replace it with midtime (1 h) in the nextflow
        runner's label list of src/t/methods/m/config.vsh.yaml, or make the component faster"``;
        ``""`` when no label sets this limit (the limit came from elsewhere).
    """
    kind = LIMIT_KINDS[key]
    setting = [label for label in [*implied_labels(labels, resources), *labels] if key in resources.get(label, {})]
    if not setting:
        return ""
    label = setting[-1]  # the last one wins, as in the limits a job gets
    value = resources[label][key]
    larger = sorted((limits[key], name) for name, limits in resources.items() if limits.get(key, 0) > value)
    faster = {"time_s": "make the component faster", "memory_mb": "make the component use less memory",
              "disk_mb": "make the component write less"}[key]
    if not larger:
        return (f"label {label} ({limit_text(key, value)}) set the limit, the highest {kind} label of _viash.yaml: "
                f"{faster}")
    bigger, name = larger[0]
    runner = f"the nextflow runner's label list of {config}"
    action = (f"replace it with {name} ({limit_text(key, bigger)}) in {runner}" if label in labels else
              f"add {name} ({limit_text(key, bigger)}) to {runner} (a component naming no {kind} label runs with the lowest)")
    return f"label {label} ({limit_text(key, value)}) set the limit: {action}, or {faster}"
