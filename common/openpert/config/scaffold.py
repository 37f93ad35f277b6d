"""``openpert create-component``: a new component, working from the first run.

The config merges the task's ``api/comp_<type>.yaml`` and declares the task's library when the script
imports it. The script comes from the task's template ``api/templates/<type>.py`` when the task ships
one (a working baseline that reads and writes with the task's own helpers); otherwise it is written
from the API: it reads
every input and writes each output in its format (rows and columns taken from the files its shape
rules name, required layers filled with zeros, provenance in ``uns``) so that the component passes
its test before the contributor writes the real computation.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import yaml

from openpert.config.formats import FileFormat
from openpert.config.layout_rules import source_imports
from openpert.config.task import FOLDER_TYPES, Task
from openpert.config.viash import ComponentConfig, ConfigError

_FOLDERS = {comp_type: folder for folder, comp_type in FOLDER_TYPES.items()}


def _config_text(task: Task, comp_type: str, name: str, script: str) -> str:
    data: dict = {
        "__merge__": f"../../api/comp_{comp_type}.yaml",
        "name": name,
        "label": name.replace("_", " ").capitalize(),
        "summary": "FILL IN: one sentence on what this component does.",
        "description": "FILL IN: how it works, what it assumes, and where it comes from (a paragraph).",
        "references": {"doi": ["10.0000/fill.in"]},
        "links": {"documentation": "https://example.org/fill-in", "repository": "https://example.org/fill-in"},
    }
    info: dict = {}
    if comp_type == "control_method":
        info["control"] = "baseline"
    if comp_type == "metric":
        info["metrics"] = [{"name": name, "label": name.replace("_", " ").capitalize(),
                            "summary": "FILL IN: what the metric measures.",
                            "description": "FILL IN: its definition.", "min": 0, "max": 1, "maximize": True}]
    if info:
        data["info"] = info
    data["resources"] = [{"type": "python_script", "path": "script.py"}]
    library = f"{task.dir.name}_lib"
    if (task.dir / library).is_dir() and any(module.split(".")[0] == library for _, module, _ in source_imports(script)):
        # What the script imports reaches its job only when declared.
        data["resources"].append({"type": "file", "path": f"/src/{task.dir.name}/{library}"})
    data["engines"] = [_docker_engine(task.root), {"type": "native"}]
    data["runners"] = [{"type": "executable"}, {"type": "nextflow", "directives": {"label": ["lowmem", "lowcpu", "lowtime", "lowdisk"]}}]
    return yaml.safe_dump(data, sort_keys=False)


def _docker_engine(root: Path) -> dict:
    """The project's core base image, nothing added; a project without ``docker/`` gets python:3.11."""
    from openpert.images.bases import base_images
    from openpert.images.components import engine_block

    if base_images(root):
        return engine_block(root)
    return {"type": "docker", "image": "python:3.11", "setup": [{"type": "python", "packages": ["anndata", "numpy", "pandas"]}]}


def _reader(arg, fmt: FileFormat | None) -> str:
    kind = fmt.type if fmt else "h5ad"
    call = {"h5ad": "ad.read_h5ad", "csv": "pd.read_csv", "tsv": "lambda p: pd.read_csv(p, sep='\\t')",
            "parquet": "pd.read_parquet", "json": "lambda p: json.load(open(p))",
            "jsonl": "lambda p: [json.loads(l) for l in open(p) if l.strip()]", "yaml": "lambda p: yaml.safe_load(open(p))"}[kind]
    call = f"({call})" if call.startswith("lambda") else call
    return f"{arg.name} = {call}(par[{arg.name!r}])"


def _writer(arg, fmt: FileFormat, inputs: dict[str, str], h5ad_inputs: dict[str, bool], metric_names: list[str],
            prediction_format: str) -> str:
    if fmt.type != "h5ad":
        raise ConfigError(f"{fmt.source}: no generic writer for {fmt.type} outputs; add api/templates/ to the task")
    first_h5ad = next((var for fid, var in inputs.items() if h5ad_inputs.get(fid)), None)
    rows = cols = None
    for rule in fmt.matches:
        var = inputs.get(rule.file)
        if var is None:
            continue
        source = f"{var}.obs_names" if rule.that == "obs_names" else f"{var}.var_names" if rule.that == "var_names" else \
            f"{var}[{rule.that.split(':', 1)[1]!r}].astype(str)" if rule.that.startswith("column:") else None
        if source is None:
            continue
        if rule.this == "obs_names":
            rows = source
        elif rule.this == "var_names":
            cols = source
    rows = rows or "[]"
    cols = cols or "[]"
    lines = [f"obs = pd.DataFrame(index=pd.Index({rows}, dtype=str))",
             f"var = pd.DataFrame(index=pd.Index({cols}, dtype=str))",
             "shape = (len(obs), len(var))"]
    for group in ("obs", "var"):
        for slot in fmt.slots.get(group, []):
            if slot.required:
                what = (slot.description.strip().splitlines() or [slot.name])[0]
                lines.append(f"{group}[{slot.name!r}] = {_placeholder(slot.type)}  # FILL IN: {what}")
    layers = [s.name for s in fmt.slots.get("layers", []) if s.required]
    has_x = any(s.required for s in fmt.slots.get("X", []))
    uns = []
    for slot in fmt.slots.get("uns", []):
        if slot.name == "dataset_id":
            uns.append(f"    'dataset_id': {first_h5ad}.uns['dataset_id']," if first_h5ad else "    'dataset_id': 'unknown',")
        elif slot.name == "method_id":
            # A score names the method that made the prediction it scores.
            pred = inputs.get(prediction_format)
            uns.append(f"    'method_id': {pred}.uns['method_id']," if metric_names and pred else "    'method_id': meta['name'],")
        elif slot.name == "metric_ids":
            uns.append(f"    'metric_ids': {metric_names!r},")
        elif slot.name == "metric_values":
            uns.append(f"    'metric_values': [0.0] * {len(metric_names)},  # FILL IN: the metric values")
        elif slot.required:
            uns.append(f"    {slot.name!r}: {'0.0' if slot.type in ('double', 'integer') else repr('')},")
    lines.append("uns = {\n" + "\n".join(uns) + "\n}")
    layer_code = ", ".join(f"{n!r}: np.zeros(shape)" for n in layers)
    lines.append("# FILL IN: replace the zeros with the real computation.")
    lines.append(f"ad.AnnData(X={'np.zeros(shape)' if has_x else 'None'}, obs=obs, var=var, layers={{{layer_code}}}, uns=uns)"
                 f".write_h5ad(par[{arg.name!r}], compression='gzip')")
    return "\n".join(lines)


def _placeholder(slot_type: str) -> str:
    """A value of a declared column's type, which the contributor replaces with the real one."""
    return {"double": "0.0", "float": "0.0", "integer": "0", "long": "0", "boolean": "False"}.get(slot_type, "''")


#: The imports a generated script may need, each kept only when the script uses its name.
_IMPORTS = (("json", "import json"), ("ad", "import anndata as ad"), ("np", "import numpy as np"),
            ("pd", "import pandas as pd"), ("yaml", "import yaml"))


def _imports(body: str) -> str:
    """The import block for ``body``: the standard library first, then third parties (as ruff sorts)."""
    used = [line for module, line in _IMPORTS if re.search(rf"\b{module}\.", body)]
    stdlib = [line for line in used if line == "import json"]
    others = [line for line in used if line not in stdlib]
    return "\n\n".join(block for block in ("\n".join(stdlib), "\n".join(others)) if block) + "\n"


def _script_text(task: Task, api: ComponentConfig, comp_type: str, name: str) -> str:
    template = task.api_file(f"templates/{comp_type}.py")
    if template.is_file():
        return template.read_text().replace("{{name}}", name)
    # Inputs point at the test resources so that `python script.py` runs as is; outputs stay local.
    example = {a.name: (f"resources_test/{task.dir.name}/{Path(str(a.example)).parent.name}/{Path(str(a.example)).name}"
                        if a.example else f"{a.name}.out") for a in api.file_inputs}
    example.update({a.name: Path(str(a.example)).name if a.example else f"{a.name}.out" for a in api.file_outputs})
    par = "{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in example.items()) + "}"
    inputs = {a.format_id: a.name for a in api.file_inputs if a.format_id}
    h5ad_inputs = {a.format_id: bool(a.file_format and a.file_format.type == "h5ad") for a in api.file_inputs if a.format_id}
    metric_names = [name] if comp_type == "metric" else []
    body = [_reader(a, a.file_format) for a in api.file_inputs]
    for arg in api.file_outputs:
        if arg.file_format is None:
            raise ConfigError(f"{api.path}: --{arg.name} has no file format to scaffold from")
        body.append(_writer(arg, arg.file_format, inputs, h5ad_inputs, metric_names, task.prediction_format))
    code = "\n".join(body) + "\n"
    return _imports(code) + textwrap.dedent(f'''
        ## VIASH START
        par = {textwrap.indent(par, "        ").lstrip()}
        meta = {{"name": {name!r}}}
        ## VIASH END

        ''') + code


def create_component(root: Path, *, task: str, comp_type: str, name: str) -> Path:
    """Write ``src/<task>/<type folder>/<name>/{config.vsh.yaml, script.py}``; return the folder.

    Raises
    ------
    ConfigError
        When the task or its API file is missing, the name is taken, or the API cannot be scaffolded.
    """
    if comp_type not in _FOLDERS:
        raise ConfigError(f"unknown component type {comp_type!r}; expected one of {sorted(_FOLDERS)}")
    task_obj = Task(Path(root) / "src" / task)
    api = task_obj._api_component(comp_type)
    if api is None:
        raise ConfigError(f"{task_obj.api_file(f'comp_{comp_type}.yaml')}: file not found")
    folder = task_obj.dir / _FOLDERS[comp_type] / name
    if folder.exists():
        raise ConfigError(f"{folder}: already exists")
    if any(c.name == name for c in task_obj.components):
        raise ConfigError(f"{task_obj.dir}: a component named {name!r} already exists")
    script = _script_text(task_obj, api, comp_type, name)
    folder.mkdir(parents=True)
    (folder / "config.vsh.yaml").write_text(_config_text(task_obj, comp_type, name, script))
    (folder / "script.py").write_text(script)
    return folder
