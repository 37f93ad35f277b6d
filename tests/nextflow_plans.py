"""A small plan of the Nextflow engine's tests: one dataset, nine methods that fail in every way, one metric."""

from __future__ import annotations

from pathlib import Path

METHODS = ["mlp", "hog", "slow", "crash", "stuck", "invalid", "flaky", "lost", "never"]


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


def job_entry(id_: str, stage: str, component: dict, *, dataset_id: str, method_id: str | None, after: str | None,
              publish_dir: Path, limits: dict, seed: int | None = None, params: dict | None = None,
              attempts: int = 3, inputs: dict | None = None) -> dict:
    """A job of the plan as ``main.nf`` gets it (``engines.nextflow.nextflow_jobs``), with its attempts' limits."""
    scaled = [{k: (v * n if k in ("memory_mb", "time_s") and v is not None else v) for k, v in limits.items()}
              for n in range(1, attempts + 1)]
    return {
        "id": id_, "stage": stage, "component": component["id"], "component_type": component["type"],
        "config": component["config"], "dataset_id": dataset_id, "method_id": method_id, "seed": seed, "after": after,
        "inputs": inputs or {}, "stage_in": [source for _, source in sorted((inputs or {}).items())],
        "context": {}, "allowed": None, "outputs": dict(component["output_names"]),
        "params": dict(params if params is not None else component["params"]), "limits": limits,
        "publish_dir": str(publish_dir), "digest": component.get("digest"),
        "attempts": [{"limits": s, "cpus": s.get("cpus") or 1,
                      "memory": f"{s['memory_mb']} MB" if s.get("memory_mb") is not None else None} for s in scaled],
    }


def example_jobs(outdir: Path) -> list[dict]:
    """Jobs whose method names say how each job ends in the test trace: each method, then its metric."""
    metric = component_entry("auroc", "metric", ["lowmem"], "score.h5ad")
    jobs = []
    for m in METHODS:
        method = component_entry(m, "control_method" if m == "mlp" else "method", ["lowmem", "lowtime"], "prediction.h5ad")
        folder = outdir / "outputs" / "k562" / m
        jobs.append(job_entry(f"k562/{m}", "method", method, dataset_id="k562", method_id=m, after=None,
                              publish_dir=folder, limits={"memory_mb": 4096, "time_s": 600},
                              inputs={"input": {"file": "/data/k562.h5ad"}}))
        jobs.append(job_entry(f"k562/{m}/auroc", "metric", metric, dataset_id="k562", method_id=m, after=f"k562/{m}",
                              publish_dir=folder / "auroc", limits={"memory_mb": 4096, "time_s": None},
                              inputs={"input": {"job": f"k562/{m}", "output": "output"}}))
    return jobs
