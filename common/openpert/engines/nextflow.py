"""The distributed engine: run a plan's jobs as one Nextflow run and read back what happened.

:class:`NextflowEngine` gives every component its folder (:func:`attach_bundles`: a copy of its
config, resources, task API and library and the project's ``pertsci``, which each task stages as an
input, so no worker needs the repository), adds to each job of the plan what its process needs
(:func:`nextflow_jobs`: container, limits and task script of each attempt, inputs in staging order)
and hands the jobs to the repository's generic ``main.nf`` as ``-params-file``. Nextflow runs them,
publishes outputs where each job says and writes a trace file; :mod:`openpert.engines.nextflow_trace`
matches the trace back to the jobs by tag. Planning and collecting are
:func:`openpert.engines.benchmark.run_benchmark`'s, as for the local engine. ``docs/nextflow.md``
shows each profile.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openpert.config.viash import ConfigError, read_config
from openpert.files import write_text_atomic

if TYPE_CHECKING:
    from openpert.run.records import JobRecord

__all__ = [
    "CONTAINER_PROFILES", "LOCAL_EXECUTOR_PROFILES", "TRACE_FILE_NAME", "attach_bundles", "config_profiles", "llm_params",
    "nextflow_command", "run_nextflow", "NextflowEngine", "runs_in_containers", "runs_on_this_machine",
]  # fmt: skip

#: Folder of the results where the component folders that tasks stage are kept.
BUNDLES_DIR = "nextflow_components"
#: Settings of LLM components passed as plan params (never the API key: that is a Nextflow secret).
LLM_PARAMS = {"llm_base_url": "OPENPERT_LLM_BASE_URL", "llm_model": "OPENPERT_LLM_MODEL",
              "llm_model_sha256": "OPENPERT_LLM_MODEL_SHA256", "llm_backend": "OPENPERT_LLM_BACKEND",
              "llm_max_tokens": "OPENPERT_LLM_MAX_TOKENS"}

#: Name of the trace file that ``nextflow.config`` writes into the plan's ``outdir``.
TRACE_FILE_NAME = "nextflow_trace.tsv"


def _strip_groovy(text: str) -> str:
    """Blank out comments and string literals of Groovy source, keeping braces and identifiers."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
            continue
        for quote in ('"""', "'''", '"', "'"):
            if text.startswith(quote, i):
                j = i + len(quote)
                while j < n and not text.startswith(quote, j):
                    j += 2 if text[j] == "\\" else 1
                i = j + len(quote)
                out.append('""')
                break
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


_PROFILES_BLOCK = re.compile(r"(?<![\w.])profiles\s*\{")


def config_profiles(config_path: str | os.PathLike) -> list[str]:
    """Names of the profiles defined in a ``nextflow.config``'s ``profiles { ... }`` block.

    Raises
    ------
    ValueError
        Naming the file, when it has no ``profiles`` block or its braces do not balance.
    """
    path = Path(config_path)
    code = _strip_groovy(path.read_text())
    match = _PROFILES_BLOCK.search(code)
    if match is None:
        raise ValueError(f"{path}: no 'profiles {{ ... }}' block")
    names: list[str] = []
    depth = 1
    pos = match.end()
    name_at_depth1 = re.compile(r"\s*([A-Za-z_][\w-]*)\s*\{")
    while pos < len(code) and depth > 0:
        char = code[pos]
        if depth == 1:
            entry = name_at_depth1.match(code, pos)
            if entry is not None:
                names.append(entry.group(1))
                depth += 1
                pos = entry.end()
                continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        pos += 1
    if depth != 0:
        raise ValueError(f"{path}: unbalanced braces in the 'profiles' block")
    return names


def nextflow_command(plan_path: str | os.PathLike, *, main_nf: str | os.PathLike, profile: str = "local",
                     work_dir: str | os.PathLike, resume: bool = False, extra_args: Sequence[str] = (),
                     config_path: str | os.PathLike | None = None, user_configs: Sequence[str | os.PathLike] = (),
                     nextflow: str = "nextflow") -> list[str]:
    """The ``nextflow run`` command line for a plan.

    Parameters
    ----------
    plan_path
        The plan, passed as ``-params-file`` (its top-level keys become ``params.*``).
    main_nf
        The pipeline script.
    profile
        One profile of ``nextflow.config``, or several joined by commas (``slurm,singularity``).
    work_dir
        Nextflow's work directory (task folders and its cache).
    resume
        Add ``-resume``: reuse tasks whose inputs and script are unchanged.
    extra_args
        Appended as given (e.g. ``["--max_cpus", "4"]`` or ``["-with-report", "report.html"]``).
    config_path
        The ``nextflow.config`` whose profiles are allowed; by default the one next to ``main_nf``.
    user_configs
        Config files of your own (``-c``: queues, credentials, work folders), applied on top of
        ``nextflow.config``; a profile they define is allowed too.
    nextflow
        The executable.

    Returns
    -------
    The argument list, ready for :func:`subprocess.run`.

    Raises
    ------
    ValueError
        If a profile is not defined in the configuration (the message lists those that are).
    """
    main_nf = Path(main_nf)
    config = Path(config_path) if config_path is not None else main_nf.parent / "nextflow.config"
    known = config_profiles(config)
    for extra in user_configs:
        if not Path(extra).is_file():
            raise ValueError(f"Nextflow config {extra} does not exist")
        # a config of one's own needs no profiles block; when it has one, its profiles are allowed
        if _PROFILES_BLOCK.search(_strip_groovy(Path(extra).read_text())):
            known += [name for name in config_profiles(extra) if name not in known]
    requested = [p.strip() for p in profile.split(",")]
    unknown = [p for p in requested if p not in known]
    if not profile.strip() or unknown:
        raise ValueError(
            f"unknown Nextflow profile {', '.join(map(repr, unknown or [profile]))}: "
            f"{config} defines {', '.join(known)}"
        )
    cmd = [nextflow, *(word for extra in user_configs for word in ("-c", str(Path(extra).resolve())))]
    cmd += ["run", str(main_nf), "-params-file", str(plan_path), "-profile", ",".join(requested), "-work-dir", str(work_dir)]
    return [*cmd, *(["-resume"] if resume else []), "-ansi-log", "false", *map(str, extra_args)]


#: Profiles of nextflow.config whose tasks run on the launching machine: Nextflow's local executor,
#: with or without a container engine.
LOCAL_EXECUTOR_PROFILES = frozenset({"local", "docker", "singularity", "apptainer"})


#: Profiles that run each task in a container: the container is the task's boundary. bubblewrap
#: cannot start inside one (the images do not ship it, and Docker's default seccomp profile refuses
#: the user namespace it needs), so a required sandbox is refused with them rather than failing
#: every task.
CONTAINER_PROFILES = frozenset({"docker", "podman", "singularity", "apptainer"})


def runs_in_containers(profile: str) -> bool:
    """Whether ``profile`` (profiles joined by commas) runs every task in a container."""
    return any(p.strip() in CONTAINER_PROFILES for p in profile.split(","))


def runs_on_this_machine(profile: str) -> bool:
    """Whether every profile of ``profile`` (joined by commas) leaves tasks on Nextflow's local executor.

    Nextflow's local executor refuses a task that asks for more cpus or memory than the machine has
    (an error that stops the whole run, whatever the error strategy), so such runs get
    ``--max_cpus``/``--max_memory_mb``: ``docker`` alone runs its containers here too.
    """
    names = {p.strip() for p in profile.split(",") if p.strip()}
    return bool(names) and names <= LOCAL_EXECUTOR_PROFILES


def _local_limits() -> list[str]:
    """``--max_cpus``/``--max_memory_mb`` for this machine (Nextflow's local executor refuses
    tasks that ask for more than the machine has)."""
    import psutil

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = psutil.virtual_memory().total
    # inside a container the JVM (and so Nextflow) sees the cgroup's memory limit, not the host's
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        text = Path(limit_file).read_text().strip() if Path(limit_file).is_file() else ""
        if text.isdigit():
            memory = min(memory, int(text))
    return ["--max_cpus", str(cpus or 1), "--max_memory_mb", str(memory // 2**20)]


def run_nextflow(plan: Mapping[str, Any], plan_path: str | os.PathLike, *, log_path: str | os.PathLike,
                 main_nf: str | os.PathLike | None = None, profile: str = "local",
                 work_dir: str | os.PathLike | None = None, resume: bool = False, extra_args: Sequence[str] = (),
                 user_configs: Sequence[str | os.PathLike] = (), launch_dir: str | os.PathLike | None = None,
                 env: Mapping[str, str] = os.environ) -> subprocess.CompletedProcess:
    """Write the plan and run it through Nextflow.

    Parameters
    ----------
    plan
        The plan (``docs/plan_json.md``); written to ``plan_path`` as JSON.
    plan_path
        Where to write the plan.
    log_path
        Nextflow's console output (stdout and stderr) is written here.
    main_nf
        The pipeline; default ``<repo_root>/main.nf``.
    profile
        See :func:`nextflow_command`. When tasks run on this machine (:func:`runs_on_this_machine`:
        ``local``, ``docker``, ``singularity``, ``apptainer``), ``--max_cpus`` and ``--max_memory_mb``
        are added so that no task asks for more than this machine has.
    work_dir
        Nextflow's work directory (a path, or a URI such as ``s3://bucket/work`` for AWS Batch);
        default ``<outdir>/work``.
    resume
        Reuse tasks that already ran with the same inputs (``-resume``).
    extra_args
        More arguments for ``nextflow run`` (options such as ``-with-report``, and params such as
        ``--aws_queue my-queue``).
    user_configs
        Config files of your own, passed as ``-c`` (see :func:`nextflow_command`).
    launch_dir
        Working directory of the Nextflow process (holds its ``.nextflow`` cache, which
        ``-resume`` needs); default ``outdir``.
    env
        Environment of the Nextflow process; default this process's environment. The directory of
        the running Python interpreter is put first on ``PATH`` so that local tasks find the same
        ``openpert``.

    Returns
    -------
    The finished process; its ``returncode`` is Nextflow's (failed jobs alone do not make it
    non-zero, since they are ignored). Read the trace with :func:`parse_trace`.

    Raises
    ------
    RuntimeError
        If ``nextflow`` is not on ``PATH`` or ``main.nf`` does not exist.
    """
    executable = shutil.which("nextflow", path=(env or os.environ).get("PATH"))
    if executable is None:
        raise RuntimeError(
            "the Nextflow engine needs 'nextflow' on PATH, and it was not found; install Nextflow "
            "(https://www.nextflow.io) or run the benchmark with the local engine"
        )
    outdir = Path(plan["outdir"])
    main_nf = Path(main_nf) if main_nf is not None else Path(plan["repo_root"]) / "main.nf"
    if not main_nf.is_file():
        raise RuntimeError(f"the Nextflow pipeline {main_nf} does not exist")
    # Nextflow's work directory as its command line takes it: a URI as is, a path made absolute.
    work_dir = str(outdir / "work" if work_dir is None else work_dir)
    work_dir = work_dir if "://" in work_dir else str(Path(work_dir).resolve())
    launch_dir = Path(launch_dir) if launch_dir is not None else outdir
    launch_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(plan_path, json.dumps(plan, indent=2))

    args = [*(_local_limits() if runs_on_this_machine(profile) else []), *extra_args]
    cmd = nextflow_command(Path(plan_path).resolve(), main_nf=main_nf.resolve(), profile=profile, work_dir=work_dir,
                           resume=resume, extra_args=args, user_configs=user_configs, nextflow=executable)
    run_env = {**env, "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
               "NXF_ANSI_LOG": "false"}

    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        return subprocess.run(
            cmd, cwd=launch_dir, env=run_env, stdout=log, stderr=subprocess.STDOUT, check=False
        )


# --- the component folders tasks stage ----------------------------------------------------------------
def _copy_into(source: Path, root: Path, bundle: Path) -> None:
    """Copy ``source`` (a file or folder of the project at ``root``) to the same place in ``bundle``."""
    dest = bundle / source.resolve().relative_to(root)
    if source.is_dir():
        shutil.copytree(source, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    elif source.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)


def build_bundle(config_path: str | os.PathLike, dest: Path) -> str:
    """Copy what one component needs to run into ``dest``, laid out as in the project.

    The project's ``_viash.yaml``, the task's ``api/`` (the interfaces and file formats its config
    merges and its outputs are validated against), ``common/api``, the component's folder, every
    resource it declares (its task library) and ``common/pertsci``. A task runs
    ``openpert run-component component/<config>`` against this copy, with ``component/common``
    first on ``PYTHONPATH``: the code that runs is the code whose digest the plan carries.

    Returns
    -------
    The config's path inside the bundle.

    Raises
    ------
    ConfigError
        When the copy does not read back as the same component (a merged file outside what is
        copied), naming the config.
    """
    config = read_config(config_path)
    root = config.root.resolve()
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        _copy_into(root / "_viash.yaml", root, tmp)
        if config.task_dir is not None:
            _copy_into(config.task_dir / "api", root, tmp)
        for folder in (root / "common" / "api", root / "common" / "pertsci", config.path.parent):
            _copy_into(folder, root, tmp)
        for resource in config.resources:
            _copy_into(config.resource_path(resource), root, tmp)
        relative = str(config.path.resolve().relative_to(root))
        why = "outside src/<task>/api and common/api?"
        try:
            same = read_config(tmp / relative).public_dict() == config.public_dict()
        except ConfigError as err:
            same, why = False, f"{why} {str(err).replace(str(tmp), '<copy>')}"
        if not same:
            raise ConfigError(f"{config.path}: its copy for Nextflow reads differently (does it merge a file {why})")
        if dest.exists():
            shutil.rmtree(tmp)  # an identical bundle (same digest) is already there
        else:
            os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return relative


def attach_bundles(plan: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Give every component of a plan its folder to stage: ``bundle`` and ``bundle_config``.

    A bundle lives in ``folder/<name>-<digest>``: a component whose code is unchanged keeps its
    bundle (and so its Nextflow cache entry) from one run to the next.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    entries = [*plan["methods"], *plan["metrics"], *plan["loaders"]]
    built: dict[str, tuple[str, str]] = {}
    for entry in entries:
        key = f"{entry['id']}-{entry['digest'][:16]}"
        if key not in built:
            dest = folder / key
            built[key] = (str(dest), build_bundle(entry["config"], dest))
        entry["bundle"], entry["bundle_config"] = built[key]
    return plan


def llm_params(env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The language model of LLM components as plan params (``llm_base_url`` ...), from ``env``.

    They travel in the plan, so tasks on any executor get them as arguments; the API key does not
    (it would be written into plan.json and every task script): it is the Nextflow secret
    ``OPENPERT_LLM_API_KEY``.
    """
    return {param: env[var] for param, var in LLM_PARAMS.items() if env.get(var)}


#: Settings of a run that shape its jobs, with their defaults when ``nextflow.config`` gives none.
RUN_SETTINGS = {"openpert": "openpert", "sandbox": "auto", "max_retries": 2, "image_tag": None, "shared_data": None,
                "llm_image": None, "max_cpus": None, "max_memory_mb": None}

_PARAM = re.compile(r"^\s*(\w+)\s*=\s*(null|true|false|-?\d+(?:\.\d+)?|'[^'\\]*'|\"[^\"\\$]*\")\s*(?://.*)?$")


def config_params(path: str | os.PathLike) -> dict[str, Any]:
    """The literal ``params { name = value }`` of a Nextflow config (nulls, booleans, numbers, plain strings).

    A value that is not a literal (an expression, a string with ``$``) is left out: Nextflow
    alone can read it.
    """
    text = Path(path).read_text()
    start = re.search(r"(?m)^params\s*\{", text)
    if start is None:
        return {}
    end = re.compile(r"(?m)^\}").search(text, start.end())
    values: dict[str, Any] = {}
    for line in text[start.end(): end.start() if end else len(text)].splitlines():
        match = _PARAM.match(line)
        if match is None:
            continue
        raw = match.group(2)
        literals = {"null": None, "true": True, "false": False}
        values[match.group(1)] = literals[raw] if raw in literals else (raw[1:-1] if raw[0] in "'\"" else float(raw) if "." in raw else int(raw))
    return values


def run_settings(main_nf: Path, user_configs: Sequence[str | os.PathLike], args: Sequence[str]) -> dict[str, Any]:
    """The settings of :data:`RUN_SETTINGS` for a run: ``nextflow.config``'s, then the configs of one's own, then ``--name value``.

    The same order of precedence as Nextflow's for its ``params``.
    """
    settings = dict(RUN_SETTINGS)
    for config in [main_nf.parent / "nextflow.config", *map(Path, user_configs)]:
        if config.is_file():
            settings.update({k: v for k, v in config_params(config).items() if k in RUN_SETTINGS})
    words = list(args)
    for word, value in zip(words, words[1:]):
        if word.startswith("--") and word[2:] in RUN_SETTINGS:
            settings[word[2:]] = value
    return settings


def _quote(word: Any) -> str:
    """One word for bash, single-quoted, each ' written as '\\'' (nothing inside is expanded)."""
    return "'" + str(word).replace("'", "'\\''") + "'"


def _image(image: str | None, tag: Any) -> str | None:
    """A component's image with its tag replaced by ``tag`` (a build's tag) when one is given."""
    if not image or not tag:
        return image
    repository = image.rsplit(":", 1)[0] if image.rfind(":") > image.rfind("/") else image
    return f"{repository}:{tag}"


def attempt_limits(limits: Mapping[str, Any], attempt: int, settings: Mapping[str, Any]) -> dict[str, Any]:
    """A job's limits on its ``attempt``-th try: memory and time times the attempt, cpus and memory capped.

    A job killed for memory or time is retried bigger, as Open Problems does; the caps are what the
    machine has when tasks run on it (Nextflow's local executor refuses a task bigger than that).
    Disk is not retried bigger: a job over its disk limit exits 153, which is not retried.
    """
    def whole(value: Any) -> int | None:
        return None if value is None else math.ceil(float(value))

    cpus, memory, time_s = whole(limits.get("cpus")), whole(limits.get("memory_mb")), whole(limits.get("time_s"))
    memory = memory * attempt if memory is not None else None
    time_s = time_s * attempt if time_s is not None else None
    cap_cpus, cap_memory = whole(settings.get("max_cpus")), whole(settings.get("max_memory_mb"))
    if cpus is not None and cap_cpus is not None:
        cpus = min(cpus, cap_cpus)
    if memory is not None and cap_memory is not None:
        memory = min(memory, cap_memory)
    return {"cpus": cpus, "memory_mb": memory, "time_s": time_s, "disk_mb": whole(limits.get("disk_mb"))}


def task_script(entry: Mapping[str, Any], component: Mapping[str, Any], limits: Mapping[str, Any],
                settings: Mapping[str, Any], llm: Mapping[str, str]) -> str:
    """The bash script of a job's attempt; its staged input files are ``"$1"``, ``"$2"``, ... in the order of its ``stage_in``.

    A private temporary folder inside the task's work folder (and the home folder when the given
    one cannot be written: a container run as the launching user, as the docker profile does, has
    HOME=/), the staged component's ``pertsci`` first on ``PYTHONPATH`` (the code the digest
    covers), ``openpert run-component`` with every word quoted, then the job's scratch removed
    (kept when it failed, for its logs).
    """
    words = [settings["openpert"] or "openpert", "run-component", "--work-dir", "run", "--sandbox", settings["sandbox"] or "auto"]
    for option, key in (("--limit-cpus", "cpus"), ("--limit-memory-mb", "memory_mb"), ("--limit-time-s", "time_s")):
        if limits[key] is not None:
            words += [option, limits[key]]
    words.append(f"component/{component['bundle_config']}")
    command = " ".join(map(_quote, words))
    command += "".join(f" {_quote('--' + arg)} \"${i}\"" for i, arg in enumerate(sorted(entry["inputs"]), start=1))
    words = [w for arg, name in sorted(entry["outputs"].items()) for w in (f"--{arg}", f"out/{name}")]
    params = {**entry["params"], **(llm if component["needs_llm"] else {})}
    for name, value in sorted(params.items()):
        if value is not None:
            # several values: Viash's default multiple separator
            words += [f"--{name}", ";".join(map(str, value)) if isinstance(value, list) else _text(value)]
    command += "".join(f" {_quote(w)}" for w in words)
    return "\n".join(["mkdir -p out tmp", 'export TMPDIR="$PWD/tmp"', 'if [ ! -w "${HOME:-/}" ]; then export HOME="$PWD/tmp"; fi',
                      'export PYTHONPATH="$PWD"/\'component/common\'"${PYTHONPATH:+:$PYTHONPATH}"', command, "rm -rf run tmp"])


def _text(value: Any) -> str:
    """A parameter's value as a word of the command line (booleans as Viash reads them)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def nextflow_jobs(plan: Mapping[str, Any], settings: Mapping[str, Any], llm: Mapping[str, str]) -> list[dict[str, Any]]:
    """The plan's jobs as ``main.nf`` runs them: each with what its process needs, nothing to derive.

    Added to each job: its inputs in staging order (``stage_in``: a file, or ``{job, output}`` of
    the job it follows), its component folder (``bundle``) and code ``digest``, ``container``,
    ``gpus``, ``needs_llm``, and one entry per attempt (``attempts``: cpus, memory, time and disk as
    Nextflow directives, and the task script), ``max_retries`` + 1 of them.
    """
    components = {e["config"]: e for e in [*plan["methods"], *plan["metrics"], *plan["loaders"]]}
    out = []
    for entry in plan["jobs"]:
        component = components[entry["config"]]
        stage_in = []
        for arg in sorted(entry["inputs"]):
            source = dict(entry["inputs"][arg])
            if arg == plan["shared_data_argument"] and entry["stage"] in ("build", "dataset") and settings.get("shared_data"):
                # A cluster reads the shared data from where it is (e.g. s3://...), not the launcher's disk.
                source = {"file": str(settings["shared_data"])}
            stage_in.append(source)
        gpus = entry["limits"].get("gpus")
        attempts = []
        for attempt in range(1, int(settings.get("max_retries") or 0) + 2):
            limits = attempt_limits(entry["limits"], attempt, settings)
            attempts.append({
                "cpus": limits["cpus"] or 1,
                "memory": f"{limits['memory_mb']} MB" if limits["memory_mb"] is not None else None,
                # a minute more than the job's own limit, so that openpert stops it first and says why
                "time": f"{limits['time_s'] + 60}s" if limits["time_s"] is not None else None,
                "disk": f"{limits['disk_mb']} MB" if limits["disk_mb"] is not None else None,
                "limits": limits,
                "script": task_script(entry, component, limits, settings, llm),
            })
        image = settings["llm_image"] if component["needs_llm"] and settings.get("llm_image") else \
            _image(component.get("image"), settings.get("image_tag"))
        out.append({**entry, "stage_in": stage_in, "bundle": component["bundle"], "digest": component["digest"],
                    "container": image, "needs_llm": component["needs_llm"],
                    # an LLM component given a server asks for no GPU: the server generates
                    "gpus": None if component["needs_llm"] and llm.get("llm_base_url") else gpus,
                    "attempts": attempts})
    return out


class NextflowEngine:
    """Runs a plan's jobs as one Nextflow run of ``main.nf`` and reads their records from its trace.

    Parameters
    ----------
    root
        The project (its ``main.nf``).
    outdir
        The results folder; ``plan.json``, the trace, the published outputs go here.
    profile
        Profiles of ``nextflow.config`` (or of ``user_configs``), joined by commas.
    work_dir
        Nextflow's work directory (``s3://...`` for AWS Batch, a folder on the volume claim for
        Kubernetes); default ``<outdir>/nextflow_work``.
    nextflow_args
        More arguments for ``nextflow run``, as a list or one shell-quoted string
        (``"--aws_queue q -with-report report.html"``); those of :data:`RUN_SETTINGS` also shape the jobs.
    user_configs
        Config files of your own (``-c``).
    sandbox
        ``True``/``False`` require or turn off bubblewrap inside tasks; ``None``: where it works.
    resume
        ``-resume``: reuse tasks whose code digest, parameters and inputs are unchanged.

    Raises
    ------
    ConfigError
        When the sandbox is required with a profile whose tasks run in containers.
    """

    def __init__(self, root: Path, outdir: Path, *, profile: str = "local", work_dir: str | os.PathLike | None = None,
                 nextflow_args: Sequence[str] | str = (), user_configs: Sequence[str | os.PathLike] = (),
                 sandbox: bool | None = None, resume: bool = False):
        if sandbox and runs_in_containers(profile):
            raise ConfigError(
                f"--sandbox on cannot hold inside the containers of profile {profile!r}: bubblewrap cannot start in "
                "them (the images do not ship it; Docker's default seccomp profile refuses user namespaces). Each "
                "task's container is its boundary there: run with --sandbox off (or OPENPERT_SANDBOX=off)")
        self.root, self.outdir, self.profile, self.resume = Path(root), Path(outdir), profile, resume
        self.work_dir = work_dir if work_dir is not None else self.outdir / "nextflow_work"
        self.args = shlex.split(nextflow_args) if isinstance(nextflow_args, str) else list(nextflow_args)
        self.user_configs = list(user_configs)
        self.sandbox = sandbox

    def run_plan(self, plan: dict[str, Any], jobs: list[Any]) -> list[JobRecord]:
        """Run the plan's jobs through ``main.nf``; one record per job whose upstream job succeeded."""
        from openpert.engines.nextflow_trace import collect_job_records, parse_trace

        main_nf = self.root / "main.nf"
        settings = run_settings(main_nf, self.user_configs, self.args)
        if runs_on_this_machine(self.profile):
            # What run_nextflow gives Nextflow: the attempts' limits are capped to it too.
            local = _local_limits()
            settings.update(max_cpus=local[1], max_memory_mb=local[3])
        if self.sandbox is not None:
            settings["sandbox"] = "on" if self.sandbox else "off"
        plan = json.loads(json.dumps(plan))  # the bundles are this run's, not the plan's
        attach_bundles(plan, self.outdir / BUNDLES_DIR)
        run = {key: plan[key] for key in ("plan_version", "task", "outdir")}
        run["jobs"] = nextflow_jobs(plan, settings, llm_params())
        completed = run_nextflow(run, self.outdir / "nextflow_plan.json", main_nf=main_nf, profile=self.profile,
                                 work_dir=self.work_dir, resume=self.resume, extra_args=self.args,
                                 user_configs=self.user_configs, log_path=self.outdir / "logs" / "nextflow.log")
        trace = self.outdir / TRACE_FILE_NAME
        if not trace.is_file():
            raise RuntimeError(f"nextflow exited with code {completed.returncode} and wrote no trace; "
                               f"see {self.outdir / 'logs' / 'nextflow.log'}")
        return collect_job_records(run["jobs"], parse_trace(trace))
