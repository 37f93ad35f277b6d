"""The text-embedding cache in the sandbox: which components get it, which folder, and who may write it."""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path

import pytest
from sandbox_marks import needs_sandbox

from openpert.config.viash import read_config
from openpert.engines.plan import label_resources, limits_for
from openpert.run import sandbox as sandboxing
from openpert.run.component import run_component

needs_bwrap = needs_sandbox()

CONFIG = """\
__merge__: ../../api/comp_{kind}.yaml
name: {name}
label: Probe
summary: Probes its embedding cache (test fixture).
description: A test fixture that reports where its embedding cache is.
references:
  doi: [10.1000/fixture]
resources:
  - type: python_script
    path: script.py
{extra}engines:
  - type: native
runners:
  - type: executable
  - type: nextflow
    directives:
      label: [lowmem, lowcpu, lowtime]
"""

METHOD_SCRIPT = """\
import json
import os

import anndata as ad
import numpy as np
{imports}
## VIASH START
par = {{"input_train": "train.h5ad", "input_test": "test.h5ad", "output": "prediction.h5ad"}}
meta = {{"name": "probe"}}
## VIASH END

report = {{"env": os.environ.get("OPENPERT_EMBED_CACHE"), "sees": os.path.isdir("/cache/embeddings")}}
folder = report["env"]
if folder:
    with open(os.path.join(folder, "planted.npy"), "w") as fh:
        fh.write("x")
    report["listing"] = sorted(os.listdir(folder))
for other in {others!r}:
    try:
        with open(os.path.join(other, "planted.npy"), "w") as fh:
            fh.write("x")
        report.setdefault("wrote_other", []).append(other)
    except OSError as err:
        report.setdefault("refused", []).append(type(err).__name__)
print("REPORT " + json.dumps(report), flush=True)
test = ad.read_h5ad(par["input_test"])
uns = {{"dataset_id": test.uns["dataset_id"], "method_id": meta["name"]}}
ad.AnnData(obs=test.obs[[]], var=test.var[[]], layers={{"prediction": np.zeros(test.shape)}}, uns=uns).write_h5ad(par["output"])
"""


def component(project: Path, kind: str, *, imports: str = "", extra: str = "", script: str | None = None,
              others: tuple[str, ...] = ()) -> Path:
    """Write a component of the tiny task (``kind``: method, metric ...) and return its config path."""
    name = f"probe_{uuid.uuid4().hex[:8]}"
    folder = project / "src" / "tiny" / f"{kind}s" / name
    folder.mkdir(parents=True)
    (folder / "config.vsh.yaml").write_text(CONFIG.format(kind=kind, name=name, extra=extra))
    body = script if script is not None else METHOD_SCRIPT.format(imports=imports, others=list(others))
    (folder / "script.py").write_text(textwrap.dedent(body))
    return folder / "config.vsh.yaml"


def report_of(result) -> dict:
    for line in result.log.read_text(errors="replace").splitlines():
        if line.startswith("REPORT "):
            return json.loads(line[len("REPORT "):])
    raise AssertionError(f"no report in the log ({result.reason}):\n{result.log.read_text(errors='replace')[-3000:]}")


def run(project: Path, config_path: Path, work: Path, **kwargs):
    config = read_config(config_path)
    data = project / "resources_test" / "tiny" / "syn"
    args = {"input_train": data / "train.h5ad", "input_test": data / "test.h5ad",
            "output": work.parent / f"{work.name}_out" / "prediction.h5ad"}
    limits = limits_for(config.labels, label_resources(project), where=config.name)
    return run_component(config, args, work_dir=work, limits=limits, **kwargs)


@pytest.mark.parametrize("line", [
    "from pertsci.embeddings import embed",
    "import pertsci.text_metrics as tm",
    "from pertsci import embeddings",
    "from pertsci import text_metrics, llm",
    "import numpy, pertsci.embeddings",
])
def test_an_import_of_the_embedding_modules_marks_a_component(project_copy, line):
    config = read_config(component(project_copy, "method", imports=line))
    assert sandboxing.embeds_text(config)


@pytest.mark.parametrize("line", ["", "from pertsci import llm", "import pertsci_embeddings", "# from pertsci.embeddings import embed",
                                  "text = 'from pertsci.embeddings import embed'"])
def test_other_code_does_not(project_copy, line):
    config = read_config(component(project_copy, "method", imports=line))
    assert not sandboxing.embeds_text(config) and sandboxing.embedding_cache_folder(config) is None


def test_an_import_in_a_declared_library_counts(project_copy):
    lib = project_copy / "src" / "tiny" / "tiny_lib" / "texts.py"
    lib.write_text("from pertsci.text_metrics import cosine_similarity_texts\n")
    config = read_config(component(project_copy, "method", extra="  - {type: file, path: /src/tiny/tiny_lib}\n"))
    assert sandboxing.embeds_text(config)


def test_an_edited_file_is_read_again(project_copy):
    # Each file's answer is kept per version of the file: an edit that adds the import counts.
    lib = project_copy / "src" / "tiny" / "tiny_lib" / "texts.py"
    lib.write_text("import numpy\n")
    config = read_config(component(project_copy, "method", extra="  - {type: file, path: /src/tiny/tiny_lib}\n"))
    assert not sandboxing.embeds_text(config)
    lib.write_text("from pertsci.text_metrics import cosine_similarity_texts\n")
    assert sandboxing.embeds_text(config)


def test_metrics_and_methods_get_separate_folders(project_copy, tmp_path):
    method = read_config(component(project_copy, "method", imports="from pertsci.embeddings import embed"))
    control = read_config(component(project_copy, "control_method", imports="from pertsci.embeddings import embed"))
    metric = read_config(component(project_copy, "metric", imports="from pertsci.embeddings import embed"))
    default = project_copy.resolve() / ".cache" / "embeddings"
    assert sandboxing.embedding_cache_folder(method, host_env={}) == default / "methods"
    assert sandboxing.embedding_cache_folder(control, host_env={}) == default / "methods"
    assert sandboxing.embedding_cache_folder(metric, host_env={}) == default / "metrics"
    root = tmp_path / "elsewhere"
    assert sandboxing.embedding_cache_folder(metric, host_env={"OPENPERT_EMBED_CACHE": str(root)}) == root.resolve() / "metrics"


def test_environment_names_the_sandbox_path_only_when_bound():
    with_cache = sandboxing.job_environment(cpus=1, llm=False, llm_cache=False, host_env={}, embed_cache=True)
    assert with_cache["OPENPERT_EMBED_CACHE"] == "/cache/embeddings"
    without = sandboxing.job_environment(cpus=1, llm=False, llm_cache=False, host_env={"OPENPERT_EMBED_CACHE": "/host/cache"})
    assert "OPENPERT_EMBED_CACHE" not in without


@needs_bwrap
def test_a_method_writes_the_methods_cache_and_cannot_reach_the_metrics_cache(project_copy, tmp_path, monkeypatch):
    root = tmp_path / "embed-cache"
    monkeypatch.setenv("OPENPERT_EMBED_CACHE", str(root))
    (root / "metrics").mkdir(parents=True)
    metrics_folder = str((root / "metrics").resolve())
    config = component(project_copy, "method", imports="from pertsci.embeddings import embed  # noqa: F401",
                       others=(metrics_folder, "/cache/metrics", "/cache/embeddings/../metrics"))
    result = run(project_copy, config, tmp_path / "method")
    assert result.succeeded, result.reason
    report = report_of(result)
    assert report["env"] == "/cache/embeddings" and report["sees"] is True
    assert (root / "methods" / "planted.npy").is_file()
    assert "wrote_other" not in report, report
    assert not (root / "metrics" / "planted.npy").exists()
    plain = run(project_copy, component(project_copy, "method"), tmp_path / "plain")
    assert plain.succeeded, plain.reason
    assert report_of(plain)["env"] is None and report_of(plain)["sees"] is False


def test_unsandboxed_jobs_get_their_group_s_folder_too(project_copy, tmp_path, monkeypatch):
    root = tmp_path / "embed-cache"
    monkeypatch.setenv("OPENPERT_EMBED_CACHE", str(root))
    config = component(project_copy, "method", imports="from pertsci.embeddings import embed  # noqa: F401")
    result = run(project_copy, config, tmp_path / "method", sandbox=False)
    assert result.succeeded, result.reason
    assert report_of(result)["env"] == str((root / "methods").resolve())
