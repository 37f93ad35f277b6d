"""A small plan of the Nextflow engine's tests: one dataset, nine methods that fail in every way, one metric."""

from __future__ import annotations

from pathlib import Path


def component_entry(id_: str, type_: str, labels: list[str], output: str) -> dict:
    """A component of a plan, as ``engines.plan`` writes it."""
    return {
        "id": id_,
        "type": type_,
        "config": f"/repo/src/t/{type_}s/{id_}/config.vsh.yaml",
        "inputs": {"input": "file_data"},
        "outputs": {"output": "file_out"},
        "output_names": {"output": output},
        "params": {},
        "labels": labels,
    }


def example_plan(outdir: Path) -> dict:
    """A plan whose method names say how each job ends in the test trace."""
    methods = ["mlp", "hog", "slow", "crash", "stuck", "invalid", "flaky", "lost", "never"]
    return {
        "plan_version": 1,
        "outdir": str(outdir),
        "datasets": [{"id": "k562", "files": {"file_data": "/data/k562.h5ad"}}],
        "methods": [
            component_entry(m, "control_method" if m == "mlp" else "method", ["lowmem", "lowtime"], "prediction.h5ad")
            for m in methods
        ],
        "metrics": [component_entry("auroc", "metric", ["lowmem"], "score.h5ad")],
        "prediction_format": "file_out",
        "resources": {"lowmem": {"memory_mb": 4096}, "lowtime": {"time_s": 600}},
    }
