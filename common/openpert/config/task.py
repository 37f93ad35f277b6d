"""Tasks: a folder ``src/<task>/`` with an ``api/`` and components discovered from the tree.

Nothing is listed by hand: every ``config.vsh.yaml`` below the task folder is a component, and its
``info.type`` (from the API file it merges) says what it is. The API decides how files flow:

- ``api/file_*.yaml``: the file formats; a file's *format id* is the stem (``file_train``).
- ``api/comp_method.yaml``: the inputs a method may read. A method never receives any other
  format, so files only controls and metrics read (the solution) stay out of its reach.
- The output format of ``comp_method.yaml`` is the *prediction format*, which metrics read.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from pathlib import Path

from openpert.config.formats import FileFormat, FormatError
from openpert.config.viash import (
    PROJECT_FILE,
    ComponentConfig,
    ConfigError,
    config_files,
    find_project_root,
    load_yaml,
    read_config,
)
from openpert.files import shown_path

#: The folder of a task each component type lives in.
FOLDER_TYPES = {"datasets": "dataset", "control_methods": "control_method", "methods": "method", "metrics": "metric"}


@dataclasses.dataclass(frozen=True)
class ConfigProblem:
    """A component config left out of its task, and why.

    Attributes
    ----------
    config
        Path of the ``config.vsh.yaml``, relative to the project root.
    component
        The component's folder name (its name, when the config is sound enough to tell).
    type
        The component type its folder implies (``method``...), empty outside the type folders.
    reason
        The error, naming the file and the key.
    """

    config: str
    component: str
    type: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Dataset:
    """A processed dataset: one file per format id."""

    id: str
    files: dict[str, Path]
    dir: Path | None = None


class Task:
    """A benchmark task folder.

    Parameters
    ----------
    task_dir
        ``src/<task>`` (holding ``api/``).
    """

    def __init__(self, task_dir: str | Path):
        self.dir = Path(task_dir).resolve()
        if not (self.dir / "api").is_dir():
            raise ConfigError(f"{self.dir}: not a task folder (no api/ inside)")
        self.root = find_project_root(self.dir)

    def __repr__(self) -> str:
        return f"Task({self.name!r})"

    @property
    def name(self) -> str:
        return self.info.get("name") or self.dir.name

    @cached_property
    def info(self) -> dict:
        """``api/task_info.yaml`` (name, label, summary, description, motivation, references)."""
        path = self.dir / "api" / "task_info.yaml"
        if not path.is_file():
            return {"name": self.dir.name, "label": self.dir.name}
        data = load_yaml(path) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping")
        return data

    # --- components ---------------------------------------------------------------------------------
    @cached_property
    def components(self) -> list[ComponentConfig]:
        """Every valid component below the task folder, sorted by path.

        A component whose config cannot be used (invalid YAML, a merge that fails, a bad name, a
        type that does not match its folder, a name used twice...) is left out and listed in
        :attr:`config_errors` instead: one broken contribution must not stop the rest of the task.
        """
        return self._components[0]

    @property
    def config_errors(self) -> list[ConfigProblem]:
        """Components left out of :attr:`components`, each with the reason (naming the file)."""
        return self._components[1]

    @cached_property
    def _components(self) -> tuple[list[ComponentConfig], list[ConfigProblem]]:
        from openpert.engines.resource_labels import parse_label_resources

        try:
            labels: dict | None = parse_label_resources(self.root / PROJECT_FILE)
        except (OSError, ValueError):
            # A project-level problem, not a component's: the planner reports it when a run needs labels.
            labels = None
        configs = config_files(self.dir)
        comps: list[ComponentConfig] = []
        errors: list[ConfigProblem] = []
        for path in configs:
            try:
                comp = read_config(path)
                self._check_component(comp, labels)
            except (ConfigError, FormatError) as err:
                errors.append(self._problem(path, str(err)))
                continue
            except Exception as err:  # a contributor's config is untrusted input: any failure to read it is its own
                errors.append(self._problem(path, f"{path}: cannot read the config: {type(err).__name__}: {err}"))
                continue
            comps.append(comp)
        # A name used twice leaves out every holder: whichever sorts first must not win (a new
        # folder could otherwise shadow an existing component by taking its name).
        holders: dict[tuple[str, str], list[ComponentConfig]] = {}
        for comp in comps:
            holders.setdefault((comp.type, comp.name), []).append(comp)
        for (_, name), same in holders.items():
            if len(same) > 1:
                for comp in same:
                    others = ", ".join(str(c.path) for c in same if c is not comp)
                    errors.append(self._problem(comp.path, f"{comp.path}: name {name!r} is also used by {others}"))
        comps = [c for c in comps if len(holders[(c.type, c.name)]) == 1]
        return comps, sorted(errors, key=lambda e: e.config)

    def _problem(self, path: Path, reason: str) -> ConfigProblem:
        rel = path.relative_to(self.dir)
        return ConfigProblem(config=shown_path(path, self.root),
                             component=rel.parts[-2] if len(rel.parts) > 1 else "",
                             type=FOLDER_TYPES.get(rel.parts[0], ""), reason=reason)

    def _check_component(self, comp: ComponentConfig, known_labels: dict | None) -> None:
        """Raise :class:`ConfigError` for what would break the run outside the component's own jobs.

        The type must match the folder (the folder decides what a component may read), and the
        fields the harness reads when planning and collecting (resource labels, references, links,
        metrics, datasets) must have the right shape: a malformed one would otherwise fail the
        whole run. ``known_labels`` are the project's resource labels (``None``: not checked).
        """
        folder = comp.path.relative_to(self.dir).parts[0]
        expected = FOLDER_TYPES.get(folder)
        if expected is None:
            raise ConfigError(f"{comp.path}: components live in {', '.join(FOLDER_TYPES)}/ of the task, not in {folder}/")
        if comp.type != expected:
            # The folder decides what a component may read: a method cannot pose as a control.
            raise ConfigError(f"{comp.path}: info.type is {comp.type!r} but the component is in {folder}/; "
                              f"merge api/comp_{expected}.yaml")
        runners = comp.runners
        if not isinstance(runners, list) or not all(isinstance(r, dict) for r in runners):
            raise ConfigError(f"{comp.path}: runners must be a list of mappings")
        labels = comp.labels
        if any(not isinstance(label, str) for label in labels):
            raise ConfigError(f"{comp.path}: runners.directives.label: labels are strings, got {labels!r}")
        unknown = [label for label in labels if known_labels is not None and label not in known_labels]
        if unknown:
            raise ConfigError(f"{comp.path}: runners.directives.label: unknown label(s) {unknown}; known: {sorted(known_labels or {})}")
        for key in ("references", "links"):
            if not isinstance(comp.data.get(key) or {}, dict):
                raise ConfigError(f"{comp.path}: {key} must be a mapping")
        seeds = comp.seeds  # raises for a malformed info.seeds
        if seeds:
            if comp.type not in ("control_method", "method"):
                raise ConfigError(f"{comp.path}: info.seeds: only methods and control methods run as seed replicates")
            seed_args = [a for a in comp.parameters if a.name == "seed"]
            if not seed_args or seed_args[0].type not in ("integer", "long"):
                raise ConfigError(f"{comp.path}: info.seeds: a seeded component needs an integer argument --seed "
                                  "(each replicate runs with --seed 0, 1, ...)")
        if comp.type == "metric":
            metrics = comp.metrics
            if not isinstance(metrics, list) or not all(isinstance(m, dict) and isinstance(m.get("name"), str) for m in metrics):
                raise ConfigError(f"{comp.path}: info.metrics must be a list of mappings, each with a name")
        if comp.type == "dataset":
            comp.dataset_entries  # noqa: B018 - raises for a malformed info.datasets
            comp.build_entries  # noqa: B018 - raises for a malformed info.builds

    # --- headline and diagnostic metrics ---------------------------------------------------------
    def _id_list(self, key: str, ids: str = "metric ids") -> list[str] | None:
        """``task_info.yaml``'s list ``key`` of ``ids`` (``None``: not declared), or an error naming the file."""
        value = self.info.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{self.api_file('task_info.yaml')}: {key}: expected a list of {ids}, got {value!r}")
        return list(value)

    @property
    def headline_metrics(self) -> list[str] | None:
        """``task_info.yaml``'s ``headline_metrics``: the metric ids that enter the aggregate scores.

        ``None`` when the task does not declare them (every metric then enters the aggregate, and
        the results say so).
        """
        return self._id_list("headline_metrics")

    @property
    def diagnostic_metrics(self) -> list[str] | None:
        """``task_info.yaml``'s ``diagnostic_metrics``: metric ids shown but never aggregated."""
        return self._id_list("diagnostic_metrics")

    def metric_partition_problems(self) -> list[str]:
        """What keeps ``headline_metrics`` and ``diagnostic_metrics`` from partitioning the task's metrics.

        Every metric id declared by a metric component of the task must be in exactly one of the two
        lists, and both lists may only name such ids. Each problem names ``task_info.yaml``.
        """
        where = self.api_file("task_info.yaml")
        try:
            headline, diagnostic = self.headline_metrics, self.diagnostic_metrics
        except ConfigError as err:
            return [str(err)]
        problems = []
        if headline is None or diagnostic is None:
            missing = [k for k, v in (("headline_metrics", headline), ("diagnostic_metrics", diagnostic)) if v is None]
            problems.append(f"{where}: {', '.join(missing)}: missing; list every metric id in exactly one of "
                            "headline_metrics (enter the aggregate) and diagnostic_metrics (shown only)")
            headline, diagnostic = headline or [], diagnostic or []
        if not headline and self.info.get("headline_metrics") is not None:
            problems.append(f"{where}: headline_metrics: empty; at least one metric enters the aggregate")
        ids = [m.get("name") for c in self.of_type("metric") for m in c.metrics if isinstance(m, dict)]
        both = sorted(set(headline) & set(diagnostic))
        if both:
            problems.append(f"{where}: {', '.join(both)}: in both headline_metrics and diagnostic_metrics")
        unknown = sorted((set(headline) | set(diagnostic)) - set(ids))
        if unknown:
            problems.append(f"{where}: {', '.join(unknown)}: not a metric id of any metric component of the task")
        unlisted = sorted(set(ids) - set(headline) - set(diagnostic))
        if unlisted and (headline or diagnostic):
            problems.append(f"{where}: {', '.join(unlisted)}: in neither headline_metrics nor diagnostic_metrics")
        for key, values in (("headline_metrics", headline), ("diagnostic_metrics", diagnostic)):
            dupes = sorted({v for v in values if values.count(v) > 1})
            if dupes:
                problems.append(f"{where}: {key}: listed more than once: {', '.join(dupes)}")
        return problems

    def adversarial_target_problems(self) -> list[str]:
        """What is wrong with the ``info.games`` of the task's control methods.

        Only adversarial controls declare the metrics they are built to game, and each must be a
        metric id of the task. Each problem names the control's config.
        """
        ids = {m.get("name") for c in self.of_type("metric") for m in c.metrics if isinstance(m, dict)}
        problems = []
        for config in self.of_type("control_method", "method"):
            try:
                games = config.games
            except ConfigError as err:
                problems.append(str(err))
                continue
            if games is None:
                continue
            if config.control != "adversarial":
                problems.append(f"{config.path}: info.games: only adversarial controls name the metrics they game")
            unknown = sorted(set(games) - ids)
            if unknown:
                problems.append(f"{config.path}: info.games: {', '.join(unknown)}: not a metric id of the task")
        return problems

    def of_type(self, *types: str) -> list[ComponentConfig]:
        return [c for c in self.components if c.type in types]

    def component(self, name: str) -> ComponentConfig:
        comp = self._components_by_name.get(name)
        if comp is None:
            raise ConfigError(f"{self.dir}: no component named {name!r}")
        return comp

    @cached_property
    def _components_by_name(self) -> dict[str, ComponentConfig]:
        # The first component of a name, as a scan would find it; collecting results looks one up per job.
        return {comp.name: comp for comp in reversed(self.components)}

    def config_at(self, path: str | Path) -> ComponentConfig:
        """The component whose config is at ``path`` (as a plan names it): the one already read, if any."""
        return self._components_by_path.get(str(path)) or read_config(path)

    @cached_property
    def _components_by_path(self) -> dict[str, ComponentConfig]:
        return {str(c.path): c for c in self.components}

    # --- API -----------------------------------------------------------------------------------------
    def api_file(self, name: str) -> Path:
        return self.dir / "api" / name

    def _api_component(self, comp_type: str) -> ComponentConfig | None:
        path = self.api_file(f"comp_{comp_type}.yaml")
        if not path.is_file():
            return None
        # API files have no name; give them one so the config reader accepts them.
        data = load_yaml(path) or {}
        from openpert.config.viash import collect_arguments, resolve_merges

        merged = resolve_merges(data, path, self.root)
        merged.pop("__openpert_merged_from__", None)
        merged.setdefault("name", f"api_{comp_type}")
        return ComponentConfig(path=path, root=self.root, data=merged, arguments=collect_arguments(merged, path))

    @cached_property
    def method_api(self) -> ComponentConfig:
        api = self._api_component("method")
        if api is None:
            raise ConfigError(f"{self.api_file('comp_method.yaml')}: file not found; every task defines its method interface")
        return api

    @cached_property
    def method_formats(self) -> set[str]:
        """Format ids a method may read: its interface's inputs, never a solution-only format.

        The engines refuse a method job given any other (:attr:`solution_formats` stay out even when
        ``api/comp_method.yaml`` is edited to declare one; ``openpert lint`` names such an edit).
        """
        return {a.format_id for a in self.method_api.file_inputs if a.format_id} - set(self.solution_formats or ())

    @property
    def solution_formats(self) -> list[str] | None:
        """``task_info.yaml``'s ``solution_formats``: the formats only control methods and metrics read.

        These hold the answers; the harness, not a method's config, decides that no method reads
        them. ``None`` when the task does not declare them (``openpert lint`` asks it to).
        """
        return self._id_list("solution_formats", "format ids (api/file_*.yaml names)")

    def solution_read_problems(self) -> list[str]:
        """Where a method interface or a method reads a solution-only format, or the list is wrong.

        Each problem names the file to change: ``task_info.yaml`` when ``solution_formats`` is missing
        or names an unknown format, else the method interface or method config that reads one.
        """
        where = self.api_file("task_info.yaml")
        try:
            declared = self.solution_formats
        except ConfigError as err:
            return [str(err)]
        if declared is None:
            return [f"{where}: solution_formats: missing; list the file formats that hold the answers "
                    "(only control methods and metrics may read them), e.g. [file_solution]"]
        known = {p.stem for p in (self.dir / "api").glob("file_*.yaml")}
        problems = [f"{where}: solution_formats: {f!r} is not a file format of the task (api/{f}.yaml)"
                    for f in declared if f not in known]
        interface = {a.name for a in self.method_api.file_inputs}
        for comp in [self.method_api, *self.of_type("method")]:
            for arg in comp.file_inputs:
                # A method merging an edited interface is named once, by the interface.
                if arg.format_id in declared and (comp is self.method_api or arg.name not in interface):
                    problems.append(f"{comp.path}: arguments --{arg.name}: reads {arg.format_id}, which {where.name} "
                                    "declares solution-only: only control methods and metrics may read it")
        return problems

    @cached_property
    def prediction_format(self) -> str:
        outs = [a.format_id for a in self.method_api.file_outputs if a.format_id]
        if len(outs) != 1:
            raise ConfigError(f"{self.method_api.path}: a method interface needs exactly one output file format, found {outs}")
        return outs[0]

    @cached_property
    def file_formats(self) -> dict[str, FileFormat]:
        """Format id -> parsed format, for every ``api/file_*.yaml`` with an ``info.format``."""
        out = {}
        for path in sorted((self.dir / "api").glob("file_*.yaml")):
            spec = load_yaml(path) or {}
            fmt = (spec.get("info") or {}).get("format")
            if fmt is not None:
                out[path.stem] = FileFormat.from_spec(fmt, source=f"{path}: info.format", format_id=path.stem)
        return out

    def format_filename(self, format_id: str) -> str:
        """The file name a format takes in a dataset folder: the basename of its ``example``."""
        path = self.api_file(f"{format_id}.yaml")
        spec = load_yaml(path) or {}
        example = spec.get("example")
        if not isinstance(example, str):
            raise ConfigError(f"{path}: example: every file format needs an example path (its file name in a dataset folder)")
        return Path(example).name

    @cached_property
    def dataset_formats(self) -> list[str]:
        """Format ids a dataset provides: every input of controls, methods and metrics except predictions."""
        ids: list[str] = []
        for comp in self.of_type("control_method", "method", "metric"):
            for arg in comp.file_inputs:
                if arg.format_id and arg.format_id != self.prediction_format and arg.format_id not in ids:
                    ids.append(arg.format_id)
        return ids

    # --- datasets ------------------------------------------------------------------------------------
    def find_datasets(self, folder: str | Path) -> list[Dataset]:
        """Processed datasets below ``folder``: every sub-folder holding the task's dataset files.

        A folder with some of the files but not all is an error (naming what is missing): a
        half-written dataset must not silently drop out of a benchmark.
        """
        folder = Path(folder).resolve()
        if not folder.is_dir():
            raise ConfigError(f"{folder}: dataset folder not found")
        names = {fid: self.format_filename(fid) for fid in self.dataset_formats}
        found: list[Dataset] = []
        for sub in sorted({folder, *(p for p in folder.rglob("*") if p.is_dir())}):
            present = {fid: sub / name for fid, name in names.items() if (sub / name).is_file()}
            if not present:
                continue
            missing = sorted(set(names) - set(present))
            if missing:
                raise ConfigError(f"{sub}: incomplete dataset: missing {', '.join(names[m] for m in missing)}")
            ds_id = sub.relative_to(folder).as_posix() if sub != folder else sub.name
            found.append(Dataset(id=ds_id, files=present, dir=sub))
        return found


def discover_tasks(root: str | Path) -> list[Task]:
    """Every task below ``<root>/src``."""
    src = Path(root) / "src"
    if not src.is_dir():
        return []
    return [Task(p) for p in sorted(src.iterdir()) if (p / "api").is_dir()]


def task_of(config: ComponentConfig) -> Task | None:
    """The task a component belongs to, if any."""
    return Task(config.task_dir) if config.task_dir is not None else None
