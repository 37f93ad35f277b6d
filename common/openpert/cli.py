"""``openpert``: the command line.

Commands
--------
``run-component CONFIG --arg value ...``
    Run one component, as ``viash run`` would.
``benchmark --task T [...] -o DIR``
    Run a task's benchmark (local engine or Nextflow).
``report RESULTS... -o SITE [--archive DIR]``
    Render the results website (with each task's changes and history when given the run archive).
``preview [--base REF] [-o DIR]``
    The bundled benchmark of the tasks a change touches beside its base's: ranks moved, and the site.
``archive add|list|show``, ``compare OLD NEW``
    Keep finished runs, and compare two (``docs/archive.md``).
``data list|fetch|verify [--task T...]``
    The public files the tasks read, and the data store (``docs/data.md``).
``test [PATH]``, ``lint [PATH]``, ``create-component ...``
    Contributor tools.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from openpert.config.formats import FormatError
from openpert.config.viash import CONFIG_NAME, ConfigError, config_files, find_project_root

if TYPE_CHECKING:
    from openpert.config.task import Task
    from openpert.engines.local import JobSlots


def _root(start: Path | None = None) -> Path:
    return find_project_root(start or Path.cwd())


# --- run-component ------------------------------------------------------------------------------------
def _component_args(config, argv: Sequence[str]) -> dict:
    """Parse ``--name value`` pairs against a component's arguments (repeats and ``;`` for multiple)."""
    parser = argparse.ArgumentParser(prog=f"openpert run-component {config.path}", add_help=True)
    for arg in config.arguments:
        if arg.type in ("boolean_true", "boolean_false"):
            # A bare flag sets it (as Viash does); an explicit value is accepted too, which is how
            # engines that pass every parameter as `--name value` give one.
            const = "true" if arg.type == "boolean_true" else "false"
            parser.add_argument(f"--{arg.name}", nargs="?", const=const, default=None)
        else:
            parser.add_argument(f"--{arg.name}", action="append" if arg.multiple else "store", default=None,
                                help=arg.description)
    ns = parser.parse_args(list(argv))
    out = {}
    for arg in config.arguments:
        value = getattr(ns, arg.name)
        if value is None:
            continue
        if arg.multiple:
            value = [part for v in value for part in str(v).split(";") if part]
        out[arg.name] = value
    return out


def dataset_output_defaults(config, task, args: dict, output_dir: Path | None) -> dict[str, str]:
    """Default paths for the file outputs a dataset component was not given.

    A dataset loader writes one file per format (train, test, solution, ...); naming five of them
    on the command line only to get a dataset folder is busywork. Each missing output goes to
    ``<output_dir>/<the format's file name>`` (the name it has in every dataset folder), with
    ``output_dir`` defaulting to ``./<dataset_id>`` (or the component's name).
    """
    if output_dir is None:
        dataset_id = args.get("dataset_id") or next(
            (a.default for a in config.parameters if a.name == "dataset_id" and a.default), None)
        output_dir = Path(str(dataset_id or config.name))
    return {a.name: str(output_dir / task.format_filename(a.format_id))
            for a in config.file_outputs if a.format_id and a.name not in args}


def cmd_run_component(ns: argparse.Namespace, rest: Sequence[str]) -> int:
    from openpert.config.project import shared_data_input
    from openpert.config.task import task_of
    from openpert.config.viash import read_config
    from openpert.engines.plan import label_resources, limits_for
    from openpert.run.component import run_component
    from openpert.run.process import Limits

    config = read_config(ns.config)
    args = _component_args(config, rest)
    limits = Limits() if ns.no_limits else limits_for(config.labels, label_resources(config.root), where=str(config.path))
    # An engine that retries a job bigger (Nextflow, on exit 137 or 143) gives that attempt's limits.
    limits = dataclasses.replace(limits, time_s=ns.limit_time_s if ns.limit_time_s is not None else limits.time_s,
                                 memory_mb=ns.limit_memory_mb if ns.limit_memory_mb is not None else limits.memory_mb,
                                 cpus=ns.limit_cpus if ns.limit_cpus is not None else limits.cpus)
    task = task_of(config)
    allowed = task.method_formats if task is not None and config.type == "method" else None
    work = Path(ns.work_dir) if ns.work_dir else Path(tempfile.mkdtemp(prefix=f"openpert-{config.name}-"))
    # As the engines do: a dataset loader that reads the shared data folder is given it.
    args = {**{k: str(v) for k, v in shared_data_input(config, config.root).items()}, **args}
    if config.type == "dataset" and task is not None:
        args = {**dataset_output_defaults(config, task, args, Path(ns.output_dir) if ns.output_dir else None), **args}
    result = run_component(config, args, work_dir=work, limits=limits, allowed_input_formats=allowed,
                           validate=not ns.no_validate, sandbox=_sandbox(ns))
    if ns.show_log or not result.succeeded:
        sys.stderr.write(result.log.read_text(errors="replace") if result.log.exists() else "")
    if not result.succeeded:
        # The work dir stays for inspection, but not what the job wrote into its /tmp and home (gigabytes, maybe).
        for private in (work / ".tmp", work / ".home"):
            shutil.rmtree(private, ignore_errors=True)
            if private.exists():
                print(f"openpert: could not remove {private} entirely", file=sys.stderr)
        print(f"openpert: {config.name} failed: {result.reason} (work dir: {work})", file=sys.stderr)
        return result.exit_code if result.exit_code > 0 else 1
    print(f"{config.name}: done in {result.duration_s:.2f} s, peak memory {result.peak_memory_mb:.0f} MB", file=sys.stderr)
    if not ns.work_dir:
        # The outputs are published at their declared paths: a temporary work dir has nothing left to show.
        shutil.rmtree(work, ignore_errors=True)
    return 0


# --- benchmark --------------------------------------------------------------------------------------------
def cmd_benchmark(ns: argparse.Namespace) -> int:
    from openpert.config.task import Task, discover_tasks
    from openpert.engines.local import install_signal_handlers

    root = _root()
    tasks = discover_tasks(root) if ns.task == ["all"] else [Task(root / "src" / t) if (root / "src" / t).is_dir() else None for t in ns.task]
    if any(t is None for t in tasks):
        missing = [n for n, t in zip(ns.task, tasks) if t is None]
        raise ConfigError(f"{root / 'src'}: no task {', '.join(missing)}; known: {', '.join(t.name for t in discover_tasks(root))}")
    install_signal_handlers()
    shares = _datasets_per_task(ns, tasks)
    for task in tasks:
        if shares[task.dir.name] == []:
            print(f"openpert: {task.name} has none of --datasets {' '.join(ns.datasets)}: left out", file=sys.stderr)
    tasks = [task for task in tasks if shares[task.dir.name] != []]
    ns.datasets_per_task = shares  # what each task's run reads, rather than --datasets itself
    if ns.dry_run:
        return _dry_run_tasks(ns, tasks)
    given = [flag for flag, value in (("--tokenizer", ns.tokenizer), ("--throughput", ns.throughput),
                                      ("--completion-tokens", ns.completion_tokens)) if value is not None]
    if given:
        raise ConfigError(f"{', '.join(given)} only count a --dry-run; add --dry-run, or leave them out")
    if ns.engine == "local" and len(tasks) > 1:
        return _benchmark_tasks_at_once(ns, tasks)
    status = 0
    for task in tasks:
        status = _report_task(ns, task, _benchmark_task(ns, task, several=len(tasks) > 1)) or status
    return status


def _datasets_per_task(ns: argparse.Namespace, tasks: list[Task]) -> dict[str, list[str] | None]:
    """Each task's share of ``--datasets``, by task folder name: with several tasks, the ids it has.

    One command can then name the datasets of several tasks (``--task perturbqa biome_bench
    --datasets k562_llm mmu_llm``); a task holding none of them gets ``[]`` (left out of the run).
    With one task, or without ``--datasets``, every task gets ``--datasets`` as given.

    Raises
    ------
    ConfigError
        Naming the ids that none of the tasks has.
    """
    if ns.datasets is None or len(tasks) == 1:
        return {task.dir.name: ns.datasets for task in tasks}
    from openpert.engines.plan import dataset_entries

    shares = {}
    for task in tasks:
        input_dir = _task_input(ns, task, several=True)
        if input_dir is None:
            ids = {entry["id"] for _, entry in dataset_entries(task, include_large=True)[0]}
        else:
            ids = {d.id for d in task.find_datasets(input_dir)} if input_dir.is_dir() else set()
        shares[task.dir.name] = [name for name in ns.datasets if name in ids]
    unknown = [name for name in ns.datasets if not any(name in share for share in shares.values())]
    if unknown:
        raise ConfigError(f"--datasets: no dataset {', '.join(unknown)} in any of the tasks {', '.join(shares)}")
    return shares


def _dry_run_tasks(ns: argparse.Namespace, tasks: list[Task]) -> int:
    """``benchmark --dry-run``: each task's LLM components counted, not run (engines/dry_run.py)."""
    from openpert.engines.dry_run import Throughput, dry_run_benchmark, format_plan_table, llm_component_names

    if ns.engine != "local":
        raise ConfigError("--dry-run runs the LLM components' prompt code on this machine: use the local engine")
    throughput = None
    if ns.throughput is not None:
        throughput = Throughput(*ns.throughput, completion_tokens=ns.completion_tokens)
    elif ns.completion_tokens is not None:
        raise ConfigError("--completion-tokens gives GPU-hours with --throughput PREFILL DECODE; add it")
    status = 0
    for task in tasks:
        if not any(llm_component_names(task)):
            if len(tasks) == 1:
                raise ConfigError(f"{task.dir}: no component takes --llm_base_url; a dry run has nothing to count")
            continue
        out = Path(ns.output) / task.dir.name
        input_dir = _task_input(ns, task, several=len(tasks) > 1)
        plan = dry_run_benchmark(task, out, tokenizer=ns.tokenizer, throughput=throughput, input_dir=input_dir,
                                 datasets=ns.datasets_per_task[task.dir.name],
                                 methods=ns.methods, controls=ns.controls, metrics=ns.metrics, jobs=ns.jobs,
                                 progress=False if ns.quiet else None, sandbox=_sandbox(ns),
                                 include_large=ns.include_large)
        print(f"{task.name}: what the LLM components would send ({plan['token_count']}) -> {out / 'llm_plan.json'}")
        print(format_plan_table(plan["rows"]))
        for fail in plan["failures"]:
            print(_wrapped(f"failed {fail['job_id']}: {fail['reason']}"), file=sys.stderr)
            status = 1
    return status


def _task_input(ns: argparse.Namespace, task: Task, *, several: bool) -> Path | None:
    """The folder of a task's processed datasets given ``--input``.

    With several tasks it is ``<input>/<task>``; with one task, ``<input>/<task>`` too when that
    folder exists (``--input resources_test`` means the same for one task as for several), else
    ``<input>`` itself.
    """
    if ns.input is None:
        return None
    per_task = Path(ns.input) / task.dir.name
    return per_task if several or per_task.is_dir() else Path(ns.input)


def _benchmark_task(ns: argparse.Namespace, task: Task, *, several: bool, slots: JobSlots | None = None) -> dict:
    """One task's benchmark with the command's options; returns its results."""
    from openpert.engines.benchmark import run_benchmark

    input_dir = _task_input(ns, task, several=several)
    out = Path(ns.output) / task.dir.name
    # Tasks sharing the job slots print plain lines naming the task: progress bars would overwrite each other.
    progress = False if ns.quiet else ("lines" if slots is not None else None)
    return run_benchmark(task, out, input_dir=input_dir, datasets=ns.datasets_per_task[task.dir.name],
                         methods=ns.methods, controls=ns.controls, metrics=ns.metrics, jobs=ns.jobs, llm_jobs=ns.llm_jobs,
                         resume=ns.resume, engine=ns.engine, progress=progress, sandbox=_sandbox(ns), slots=slots,
                         include_large=ns.include_large, profile=ns.profile, work_dir=ns.work_dir,
                         nextflow_args=ns.nextflow_args, user_configs=ns.nextflow_config,
                         llm_datasets=ns.llm_datasets)


def _benchmark_tasks_at_once(ns: argparse.Namespace, tasks: list[Task]) -> int:
    """Run several tasks' benchmarks at once on one pool of ``--jobs`` job slots; report in task order.

    One task's last jobs and its collection of results would otherwise leave slots idle. An error
    of one task (or an interrupt) stops every task's jobs, as it would stop a run of one task.
    """
    import concurrent.futures as cf

    from openpert.engines.local import JobSlots
    from openpert.run.process import kill_active_jobs

    slots = JobSlots(ns.jobs, ns.llm_jobs)
    status = 0
    with cf.ThreadPoolExecutor(max_workers=len(tasks)) as pool:
        futures = [pool.submit(_benchmark_task, ns, task, several=True, slots=slots) for task in tasks]
        try:
            for task, future in zip(tasks, futures):
                status = _report_task(ns, task, future.result()) or status
        except BaseException:
            slots.stop()
            kill_active_jobs()
            raise
    return status


def _wrapped(text: str, indent: str = "  ") -> str:
    """A line for the console, wrapped at word boundaries to the terminal's width: never cut."""
    import textwrap

    width = max(shutil.get_terminal_size((100, 24)).columns, 60)
    return textwrap.fill(text, width=width, initial_indent=indent, subsequent_indent=indent * 2,
                         break_long_words=False, break_on_hyphens=False)


def _report_task(ns: argparse.Namespace, task: Task, results: dict) -> int:
    """Print a task's summary (jobs, failures, skips, scores); 1 when its results have a problem."""
    from openpert.results.collect import format_summary

    out = Path(ns.output) / task.dir.name
    n_jobs = len(results["resources"])
    n_failed = len(results["failures"])
    cached = sum(r["cached"] for r in results["resources"])
    print(f"{task.name}: {n_jobs} jobs ({cached} cached), {n_failed} failed -> {out / 'results.json'}")
    for fail in results["failures"]:
        print(_wrapped(f"failed {fail['job_id']}: exit {fail['exit_code']}: {fail['reason']}"))
    for skip in results.get("skipped", []):
        print(f"  skipped {skip['id']}: {skip['reason']}")
    print(format_summary(results))
    problems = run_problems(results)
    for problem in problems:
        print(_wrapped(f"error: {problem}"), file=sys.stderr)
    return 1 if problems else 0


def run_problems(results: dict) -> list[str]:
    """What makes a run fail as a whole: a dataset job failed, or every method failed on a dataset.

    One method failing is the method's problem, recorded on the site; these make the whole run
    unusable, so ``openpert benchmark`` exits non-zero for them.
    """
    problems = [f"dataset job {f['job_id']} failed: {f['reason']}" for f in results["failures"] if f["stage"] == "dataset"]
    methods = {m["id"] for m in results["methods"] if m.get("type") == "method"}
    by_dataset: dict[str, list[bool]] = {}
    for job in results["resources"]:
        if job["stage"] == "method" and job["method_id"] in methods:
            by_dataset.setdefault(job["dataset_id"], []).append(job["status"] == "succeeded")
    problems += [f"every method failed on dataset {ds}" for ds, ok in sorted(by_dataset.items()) if not any(ok)]
    return problems


# --- report, test, lint, scaffold ---------------------------------------------------------------------
def cmd_report(ns: argparse.Namespace) -> int:
    from openpert.report import render_site
    from openpert.results.reproduction import report_amendment

    dirs: list[Path] = []
    for given in ns.results:
        path = Path(given)
        if (path / "results.json").is_file():
            dirs.append(path)
        else:
            found = sorted(p.parent for p in path.glob("*/results.json"))
            if not found:
                raise ConfigError(f"{path}: no results.json here or in its sub-folders")
            dirs.extend(found)
    try:  # inside a project, old runs get the Reproduction section of its current declarations
        amend = report_amendment(_root())
    except ConfigError:
        amend = None
    index = render_site(dirs, Path(ns.output), amend=amend, archive=Path(ns.archive) if ns.archive else None)
    print(f"site written: {index}")
    return 0


def cmd_test(ns: argparse.Namespace) -> int:
    import pytest

    from openpert.run.sandbox import ENV_SANDBOX

    paths = ns.paths or [str(_root() / "src")]
    # The component tests (openpert.testing.plugin) read the setting from the environment.
    os.environ[ENV_SANDBOX] = _sandbox_choice(ns)
    # openpert is imported before pytest loads it as a plugin; its asserts need no rewriting.
    return int(pytest.main([*paths, "-q", "-W", "ignore::pytest.PytestAssertRewriteWarning", *ns.pytest_args]))


def cmd_lint(ns: argparse.Namespace) -> int:
    from openpert.config.layout_rules import check_project
    from openpert.config.lint import lint_paths, project_problems
    from openpert.config.task import discover_tasks

    paths = [Path(p) for p in (ns.paths or [_root() / "src"])]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ConfigError(f"{', '.join(missing)}: no such file or folder to lint")
    not_configs = [str(p) for p in paths if p.is_file() and p.name != CONFIG_NAME]
    if not_configs:
        raise ConfigError(f"{', '.join(not_configs)}: not a component config; lint reads {CONFIG_NAME} files: "
                          f"give it the component's folder (openpert lint {Path(not_configs[0]).parent})")
    problems = lint_paths(paths)
    configs = [c for p in paths for c in config_files(p)]
    layout = check_project(_root(), configs)
    tasks = discover_tasks(_root())
    problems += project_problems(_root(), [c for task in tasks for c in task.components])
    # Errors that leave a component out of its task (type not matching its folder, a name used twice)
    # are found when the task is read, not in one config alone.
    problems += [e.reason for task in tasks for e in task.config_errors if e.reason not in problems]
    problems = list(dict.fromkeys(problems))  # the schemas' absence is found per config and for the project
    for problem in [*problems, *map(str, layout.violations)]:
        print(problem)
    print(layout.summary())
    total = len(problems) + len(layout.violations)
    print(f"{total} problem(s)" if total else "no problems found")
    return 1 if total else 0


def cmd_changed(ns: argparse.Namespace) -> int:
    from openpert.testing.changed_components import changed_files, check_scope, rules_changes, touched_components

    root = _root()
    paths = changed_files(root, ns.base)
    if ns.scope:
        print("\n".join(f"{key}={value}" for key, value in check_scope(root, paths).items()))
        return 0
    if not ns.rules:
        for folder in touched_components(root, paths):
            print(folder.relative_to(root))
        return 0
    rules, methods = rules_changes(root, paths)
    if not rules:
        print("This change leaves the benchmark's rules as they are.")
        return 0
    print("**This change changes the benchmark's rules** (a maintainer reviews these):\n")
    print("\n".join(f"- `{line}`" for line in rules))
    if not methods:
        return 0
    print(f"\nIt also adds or changes {len(methods)} method(s): " + ", ".join(f"`{m}`" for m in methods) + ".")
    if ns.approved:
        print("A maintainer has approved changing both in one pull request.")
        return 0
    print("A method cannot be scored by rules its own pull request changes: split the rules into a pull request "
          "of their own, or ask a maintainer to approve both (label `rules-change-approved`).")
    return 1


def cmd_preview(ns: argparse.Namespace) -> int:
    from openpert.results.compare import format_text
    from openpert.testing.preview import preview

    result = preview(_root(), Path(ns.output), base=ns.base, jobs=ns.jobs, site=not ns.no_site)
    if result is None:
        print("This change touches no component of a task: nothing to preview.")
        return 0
    ran = f"ran now: {', '.join(result.base_ran)}" if result.base_ran else "reused from the cache"
    print(f"base {result.base_commit[:10]} ({ran}; {result.base_results})", file=sys.stderr)
    sys.stdout.write(format_text(result.comparison))
    print(f"\ncomparison (Markdown): {Path(ns.output) / 'comparison.md'}")
    if result.site is not None:
        print(f"site written: {result.site}")
    return 0


def cmd_create_component(ns: argparse.Namespace) -> int:
    from openpert.config.scaffold import create_component

    path = create_component(_root(), task=ns.task, comp_type=ns.type, name=ns.name)
    print(f"created {path}\nnext: edit {path / 'script.py'}, then `openpert test {path}`")
    return 0


#: ``--sandbox`` choices (the runners' ``sandbox`` argument: see openpert.run.sandbox.SANDBOX_SETTINGS).
_SANDBOX = ("auto", "on", "off")
_SANDBOX_HELP = ("{what} in a bubblewrap sandbox: auto (where it works, else warn), on (required: an error where it "
                 "cannot run), off (default: $OPENPERT_SANDBOX, else auto)")


def _sandbox_choice(ns: argparse.Namespace) -> str:
    """``--sandbox`` as given, else ``$OPENPERT_SANDBOX``, else ``auto``."""
    from openpert.run.sandbox import sandbox_setting

    return ns.sandbox if ns.sandbox is not None else sandbox_setting()


def _sandbox(ns: argparse.Namespace) -> bool | None:
    """The runners' ``sandbox`` argument for ``--sandbox`` (or ``$OPENPERT_SANDBOX``)."""
    from openpert.run.sandbox import SANDBOX_SETTINGS

    return SANDBOX_SETTINGS[_sandbox_choice(ns)]


def build_parser() -> argparse.ArgumentParser:
    from openpert.data.commands import add_arguments as add_data_arguments
    from openpert.images.commands import add_arguments as add_image_arguments
    from openpert.results.commands import add_archive_arguments, add_compare_arguments

    parser = argparse.ArgumentParser(prog="openpert", description="A living benchmark for perturbation modelling.")
    sub = parser.add_subparsers(dest="command", required=True)

    # No abbreviations: a component's own --output must not be taken for --output-dir.
    p = sub.add_parser("run-component", help="run one component (like `viash run`)", allow_abbrev=False,
                       description="Run one component; arguments after the config are the component's own.")
    p.add_argument("config", help="the component's config.vsh.yaml")
    p.add_argument("--work-dir", help="work directory (default: a new temporary one)")
    p.add_argument("--output-dir", help="for a dataset component: the folder of the outputs not named "
                   "(default: ./<dataset_id>)")
    p.add_argument("--no-limits", action="store_true", help="ignore the limits of the labels (time, memory, disk) and the process limit")
    p.add_argument("--limit-time-s", type=float, help="time limit in seconds, in place of the labels' (e.g. a retry's)")
    p.add_argument("--limit-memory-mb", type=float, help="memory limit in MB, in place of the labels' (e.g. a retry's)")
    p.add_argument("--limit-cpus", type=int, help="CPUs, in place of the labels'")
    p.add_argument("--no-validate", action="store_true", help="do not validate inputs and outputs")
    p.add_argument("--show-log", action="store_true", help="print the script's output also when it succeeds")
    p.add_argument("--sandbox", choices=_SANDBOX, default=None, help=_SANDBOX_HELP.format(what="run the job"))

    p = sub.add_parser("benchmark", help="run a task's benchmark")
    p.add_argument("--task", nargs="+", required=True, help="task name(s) under src/, or 'all'")
    p.add_argument("--input", help="folder of processed datasets, or of one such folder per task (resources_test/); default: run the task's dataset components")
    p.add_argument("--datasets", nargs="+", help="dataset ids to keep")
    p.add_argument("--llm-datasets", nargs="+", metavar="PATTERN",
                   help="run the language-model components only on the datasets whose id matches one of these "
                        "shell patterns (e.g. '*llm*', the small datasets that check the path on a small model; "
                        "docs/llm.md); the other components run on every dataset")
    p.add_argument("--methods", nargs="+", help="methods to keep (controls are kept)")
    p.add_argument("--controls", nargs="+", help="control methods to keep")
    p.add_argument("--metrics", nargs="+", help="metric components to keep")
    p.add_argument("-j", "--jobs", type=int, default=1, help="jobs run at once (local engine)")
    p.add_argument("--llm-jobs", type=int, default=1, metavar="N",
                   help="language-model jobs run at once, beside --jobs (local engine; default 1: they wait on "
                        "the model's server, and llama.cpp's answers one request at a time; raise it for a "
                        "server that batches, such as vLLM)")
    p.add_argument("--resume", action="store_true", help="reuse finished jobs of an earlier run")
    p.add_argument("-o", "--output", default="results", help="results folder (one sub-folder per task)")
    p.add_argument("--engine", choices=["local", "nextflow"], default="local")
    nf = p.add_argument_group("Nextflow engine", "with --engine nextflow (docs/nextflow.md shows each profile)")
    nf.add_argument("--profile", default="local",
                    help="Nextflow profile(s), joined by commas: local, docker, singularity, apptainer, slurm, awsbatch, k8s "
                         "(e.g. slurm,apptainer), or one of a --nextflow-config file")
    nf.add_argument("--work-dir", help="Nextflow's work directory (default: <output>/<task>/nextflow_work; "
                                       "s3://bucket/work for awsbatch, a folder on the volume claim for k8s)")
    nf.add_argument("-c", "--nextflow-config", action="append", default=[], metavar="FILE",
                    help="a Nextflow config file of your own (queues, credentials...), passed as -c; repeatable")
    nf.add_argument("--nextflow-args", default="", metavar="ARGS",
                    help="more arguments for `nextflow run`, one quoted string: Nextflow options and params of "
                         "nextflow.config, e.g. \"--aws_queue my-queue --image_tag 0.1.0-abc1234 -with-report r.html\"")
    p.add_argument("--quiet", action="store_true", help="no progress output (a line per job when stderr is not a terminal)")
    p.add_argument("--sandbox", choices=_SANDBOX, default=None, help=_SANDBOX_HELP.format(what="run each job"))
    p.add_argument("--dry-run", action="store_true",
                   help="count, per LLM component and dataset, the prompts, samples and prompt tokens a run would "
                        "send (nothing is sent; docs/llm.md)")
    p.add_argument("--tokenizer", metavar="TOKENIZER_JSON",
                   help="with --dry-run: the model's tokenizer.json to count tokens with (default "
                        "$OPENPERT_LLM_TOKENIZER, else characters / 4)")
    p.add_argument("--throughput", nargs=2, type=float, metavar=("PREFILL", "DECODE"),
                   help="with --dry-run: prompt and generated tokens per second on one of your GPUs (measured, e.g. "
                        "with `vllm bench throughput`), to add GPU-hours to the plan")
    p.add_argument("--completion-tokens", type=float, metavar="N",
                   help="with --throughput: mean tokens a sample generates (default: each request's max_tokens, "
                        "an upper bound)")
    p.add_argument("--include-large", action="store_true",
                   help="also the datasets marked large (multi-GB downloads; `openpert data list --include-large` shows them)")

    p = sub.add_parser("data", help="the public files the tasks read: list, fetch into the store, verify")
    add_data_arguments(p)

    p = sub.add_parser("report", help="render the results website")
    p.add_argument("results", nargs="+", help="results folders (holding results.json, or their parent)")
    p.add_argument("-o", "--output", default="site", help="site folder")
    p.add_argument("--archive", help="the run archive: adds each task's changes since the previous record and its history")

    p = sub.add_parser("archive", help="keep finished runs as records, list and read them")
    add_archive_arguments(p)

    p = sub.add_parser("compare", help="what changed between two runs (methods, ranks, scores beyond noise, code)")
    add_compare_arguments(p)

    p = sub.add_parser("test", help="run component tests (pytest)")
    p.add_argument("paths", nargs="*", help="component folders or files (default: src/)")
    p.add_argument("--sandbox", choices=_SANDBOX, default=None,
                   help=_SANDBOX_HELP.format(what="run each component's test job"))
    p.add_argument("--pytest-args", nargs=argparse.REMAINDER, default=[], help="passed on to pytest")

    p = sub.add_parser("lint", help="check component configs and the layout rules (import direction, declared resources)")
    p.add_argument("paths", nargs="*", help="folders or config files (default: src/)")

    p = sub.add_parser("images", help="base images, component images and their environments (Dockerfiles, build order, tests)")
    add_image_arguments(p)

    p = sub.add_parser("changed", help="component folders a change touches (for CI: test exactly these)")
    p.add_argument("--base", default="origin/main", help="git ref the change is compared with (default: origin/main)")
    p.add_argument("--rules", action="store_true",
                   help="instead: say (Markdown) what of the benchmark's rules the change changes (task APIs, test "
                        "resources and their recipes, dataset loaders, metrics, controls); exit 1 when it also adds or "
                        "changes a method")
    p.add_argument("--approved", action="store_true", help="with --rules: a maintainer approved rules and methods together")
    p.add_argument("--scope", action="store_true",
                   help="instead: print key=value lines (for $GITHUB_OUTPUT) saying what a pull request's checks cover: "
                        "scope=methods when the change lies only in methods' own folders (their tests, their tasks' tests "
                        "and a real model for a language-model method), else scope=full (the whole suite); methods, tasks, "
                        "llm_tasks")

    p = sub.add_parser("preview", help="a change's ranks before merging: its tasks' bundled benchmark beside its base's")
    p.add_argument("--base", help="git ref the change is compared with, at its merge-base with HEAD "
                                  "(default: origin/main, else main)")
    p.add_argument("-o", "--output", default="preview", help="folder of the change's results, the comparison and the site")
    p.add_argument("-j", "--jobs", type=int, default=1, help="jobs run at once in each benchmark")
    p.add_argument("--no-site", action="store_true", help="compare only, do not render the website")

    p = sub.add_parser("create-component", help="scaffold a component from the task's API")
    p.add_argument("--task", required=True)
    p.add_argument("--type", required=True, choices=["method", "control_method", "metric", "dataset"])
    p.add_argument("--name", required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``openpert`` command."""
    own_process = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # run-component's own arguments are not known until its config is read.
    if argv[:1] == ["run-component"]:
        ns, rest = parser.parse_known_args(argv)
        if own_process:
            # One job in this process (as Nextflow runs them): a fork server would only add its
            # own start to it. (A caller that runs several commands in one process keeps it.)
            from openpert.run.forkserver import ENV_FORKSERVER

            os.environ.setdefault(ENV_FORKSERVER, "off")
    else:
        ns, rest = parser.parse_args(argv), []
    from openpert.data.commands import run as run_data
    from openpert.data.fetching import FetchError
    from openpert.data.store import ChecksumError
    from openpert.images.commands import run as run_images
    from openpert.results.archive import ArchiveError
    from openpert.results.commands import run_archive, run_compare
    from openpert.results.item_scores import ItemScoresError

    handlers = {"run-component": lambda ns: cmd_run_component(ns, rest), "benchmark": cmd_benchmark, "report": cmd_report,
                "test": cmd_test, "lint": cmd_lint, "create-component": cmd_create_component, "changed": cmd_changed,
                "preview": cmd_preview, "images": run_images, "data": run_data, "archive": run_archive, "compare": run_compare}
    try:
        return handlers[ns.command](ns)
    except (ConfigError, FormatError, FetchError, ChecksumError, ArchiveError, ItemScoresError) as err:
        print(f"openpert: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("openpert: interrupted; finished jobs are kept (rerun with --resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
