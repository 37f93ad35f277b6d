"""A Python mirror of ``lib/OpenpertJobs.groovy``: the jobs and task scripts main.nf builds from a plan.

The stand-in ``nextflow`` of the tests (tests/fixtures/fake_nextflow) runs a plan with these
functions, so that the end-to-end tests execute the very command lines main.nf would; the Groovy
tests (test_nextflow_groovy.py) check that every function here returns what its Groovy original
returns, on the same values. Values are converted to text as Groovy does (``true``, not ``True``;
decimals as Java's ``BigDecimal`` prints the JSON number).
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any


def groovy_str(value: Any) -> str:
    """``value.toString()`` as Groovy gives it for a value read from JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        # JsonSlurper reads a decimal as BigDecimal; Decimal prints it by the same rules
        return str(Decimal(json.dumps(value)))
    if isinstance(value, list):
        return "[" + ", ".join(groovy_str(v) for v in value) + "]"
    return str(value)


def shell_quote(value: Any) -> str:
    if value is None:
        raise ValueError("openpert: a null word cannot be put in a command")
    return "'" + groovy_str(value).replace("'", "'\\''") + "'"


def as_long(value: Any) -> int | None:
    if value is None or groovy_str(value).strip() == "":
        return None
    return math.ceil(Decimal(groovy_str(value).strip()))


def resources(component: dict, label_resources: dict | None) -> dict:
    limits: dict = {}
    for label in component.get("labels") or []:
        limits.update((label_resources or {}).get(label) or {})
    return {"cpus": as_long(limits.get("cpus")), "memory_mb": as_long(limits.get("memory_mb")),
            "time_s": as_long(limits.get("time_s")), "disk_mb": as_long(limits.get("disk_mb"))}


def accelerator(job: dict, label_resources: dict | None, enabled: Any, llm_base_url: Any) -> int | None:
    # Groovy's String.toBoolean(): "true", "y" or "1", in any case, around spaces.
    if enabled is None or str(enabled).strip().lower() not in ("true", "y", "1"):
        return None
    component = job.get("component") or {}
    if component.get("needs_llm") and llm_base_url not in (None, ""):
        return None
    gpus = max([as_long(((label_resources or {}).get(label) or {}).get("gpus")) or 0
                for label in component.get("labels") or []] + [0])
    return gpus or None


def attempt_limits(job: dict, attempt: Any) -> dict:
    times = max(1, as_long(attempt) or 1)
    base = job.get("limits") or {}
    cpus, memory_mb, time_s = as_long(base.get("cpus")), as_long(base.get("memory_mb")), as_long(base.get("time_s"))
    if memory_mb is not None:
        memory_mb *= times
    if time_s is not None:
        time_s *= times
    caps = job.get("caps") or {}
    cap_cpus, cap_memory = as_long(caps.get("cpus")), as_long(caps.get("memory_mb"))
    if cpus is not None and cap_cpus is not None:
        cpus = min(cpus, cap_cpus)
    if memory_mb is not None and cap_memory is not None:
        memory_mb = min(memory_mb, cap_memory)
    return {"cpus": cpus, "memory_mb": memory_mb, "time_s": time_s, "disk_mb": as_long(base.get("disk_mb"))}


def image(component: dict, tag: Any) -> str | None:
    name = component.get("image")
    if not name:
        return None
    if not tag:
        return str(name)
    slash, colon = name.rfind("/"), name.rfind(":")
    repository = name[:colon] if colon > slash else name
    return f"{repository}:{groovy_str(tag)}"


def prepare(job: dict, options: dict) -> dict:
    component = job["component"]
    settings: dict = {"openpert": options.get("openpert") or "openpert", "sandbox": options.get("sandbox") or "auto",
                      "component_dir": "component"}
    llm = options.get("llm") or {}
    settings["llm"] = ({k: v for k, v in llm.items() if v is not None and groovy_str(v) != ""}
                       if component.get("needs_llm") else {})
    return {**job,
            "limits": resources(component, options.get("resources")),
            "caps": {"cpus": as_long(options.get("max_cpus")), "memory_mb": as_long(options.get("max_memory_mb"))},
            "container": (groovy_str(options["llm_image"]) if component.get("needs_llm") and options.get("llm_image")
                          else image(component, options.get("image_tag"))),
            "gpus": accelerator(job, options.get("resources"), options.get("gpu_accelerator"),
                                (options.get("llm") or {}).get("llm_base_url")),
            "publish_path": f"{groovy_str(options.get('outdir'))}/{job['publish_dir']}",
            "max_retries": as_long(options.get("max_retries")) or 0,
            "settings": settings}


def seed_variants(component: dict) -> list[dict]:
    seeds = component.get("seeds")
    if seeds is None or seeds == []:
        return [{"suffix": "", "seed": None}]
    if not isinstance(seeds, list):
        raise ValueError(f"openpert: {component.get('config')}: seeds must be a list of integers, got {groovy_str(seeds)}")
    return [{"suffix": f"@seed{as_long(k)}", "seed": as_long(k)} for k in seeds]


def sorted_keys(mapping: dict | None) -> list[str]:
    return sorted(str(key) for key in (mapping or {}))


def wire(job_id: str, component: dict, upstream: dict, dataset_files: dict | None) -> list:
    args, files = [], []
    for arg in sorted_keys(component.get("inputs")):
        fmt = component["inputs"][arg]
        source = upstream[fmt] if fmt in upstream else (dataset_files or {}).get(fmt)
        if source is None:
            raise ValueError(f"openpert: job {job_id}: nothing of format '{fmt}' for --{arg} of {component.get('config')}")
        args.append(arg)
        files.append(source)
    return [args, files]


def dataset_job(entry: dict, shared_data_argument: Any, shared_data: Any) -> list:
    args, files = [], []
    for arg in sorted_keys(entry.get("inputs")):
        source = entry["inputs"][arg]
        args.append(arg)
        replaced = shared_data and shared_data_argument is not None and arg == groovy_str(shared_data_argument)
        files.append(shared_data if replaced else source)
    job = {"id": entry.get("job_id") or f"datasets/{entry['id']}", "stage": "dataset", "dataset_id": entry["id"],
           "method_id": None, "seed": None, "component": entry["component"], "args": args,
           "params": entry.get("params") or {}, "publish_dir": f"datasets/{entry['id']}"}
    return [job, files]


def method_jobs(dataset: dict, method: dict) -> list:
    out = []
    for variant in seed_variants(method):
        job_id = f"{dataset['id']}/{method['id']}{variant['suffix']}"
        args, files = wire(job_id, method, {}, dataset.get("files"))
        params = dict(method.get("params") or {})
        if variant["seed"] is not None:
            params["seed"] = variant["seed"]
        job = {"id": job_id, "stage": "method", "dataset": dataset, "dataset_id": dataset["id"], "method_id": method["id"],
               "seed": variant["seed"], "component": method, "args": args, "params": params,
               "publish_dir": f"outputs/{job_id}"}
        out.append([job, files])
    return out


def metric_job(method_job: dict, by_format: dict, metric: dict) -> list:
    job_id = f"{method_job['id']}/{metric['id']}"
    args, files = wire(job_id, metric, by_format, method_job["dataset"].get("files"))
    job = {"id": job_id, "stage": "metric", "dataset": method_job["dataset"], "dataset_id": method_job["dataset_id"],
           "method_id": method_job["method_id"], "seed": method_job["seed"], "component": metric, "args": args,
           "params": dict(metric.get("params") or {}), "publish_dir": f"outputs/{job_id}"}
    return [job, files]


def file_name(file: Any) -> str:
    return [part for part in groovy_str(file).split("/") if part][-1]


def outputs_by_format(job: dict, files: list) -> dict:
    by_format = {}
    for arg, name in (job["component"].get("output_names") or {}).items():
        found = next((f for f in files if file_name(f) == groovy_str(name)), None)
        fmt = (job["component"].get("outputs") or {}).get(arg)
        if found is not None and fmt is not None:
            by_format[groovy_str(fmt)] = found
    return by_format


def command_words(job: dict, staged: list, limits: dict | None) -> list[str]:
    if len(staged) != len(job["args"]):
        raise ValueError(f"openpert: job {job['id']}: {len(job['args'])} file arguments but {len(staged)} files")
    settings = job.get("settings") or {}
    component = job["component"]
    config = f"{settings.get('component_dir') or 'component'}/{groovy_str(component.get('bundle_config'))}"
    words = [shell_quote(settings.get("openpert") or "openpert"), shell_quote("run-component")]
    words += [shell_quote("--work-dir"), shell_quote("run"), shell_quote("--sandbox"), shell_quote(settings.get("sandbox") or "auto")]
    limits = limits or {}
    for option, key in (("--limit-cpus", "cpus"), ("--limit-memory-mb", "memory_mb"), ("--limit-time-s", "time_s")):
        if limits.get(key) is not None:
            words += [shell_quote(option), shell_quote(limits[key])]
    words.append(shell_quote(config))
    for arg, path in zip(job["args"], staged):
        words += [shell_quote(f"--{arg}"), shell_quote(path)]
    for arg in sorted_keys(component.get("output_names")):
        words += [shell_quote(f"--{arg}"), shell_quote(f"out/{groovy_str(component['output_names'][arg])}")]
    params = dict(job.get("params") or {})
    for name, value in (settings.get("llm") or {}).items():
        if value is not None and groovy_str(value) != "":
            params[name] = value
    for name in sorted_keys(params):
        value = params[name]
        if value is not None:
            text = ";".join(groovy_str(v) for v in value) if isinstance(value, list) else groovy_str(value)
            words += [shell_quote(f"--{name}"), shell_quote(text)]
    return words


def task_script(job: dict, staged: list, attempt: Any) -> str:
    common = shell_quote(f"{(job.get('settings') or {}).get('component_dir') or 'component'}/common")
    return "\n".join([
        "mkdir -p out tmp",
        'export TMPDIR="$PWD/tmp"',
        'if [ ! -w "${HOME:-/}" ]; then export HOME="$PWD/tmp"; fi',
        'export PYTHONPATH="$PWD"/' + common + '"${PYTHONPATH:+:$PYTHONPATH}"',
        " ".join(command_words(job, staged, attempt_limits(job, attempt))),
        "rm -rf run tmp",
    ])


#: Groovy name -> mirror, for the tests that compare them.
FUNCTIONS = {
    "shellQuote": shell_quote, "asLong": as_long, "sortedKeys": sorted_keys, "resources": resources, "attemptLimits": attempt_limits,
    "accelerator": accelerator,
    "image": image, "prepare": prepare, "seedVariants": seed_variants, "wire": wire, "datasetJob": dataset_job,
    "methodJobs": method_jobs, "metricJob": metric_job, "fileName": file_name, "outputsByFormat": outputs_by_format,
    "commandWords": command_words, "taskScript": task_script,
}
