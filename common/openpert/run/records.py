"""Job records: what one run of one component did.

Both engines (local and Nextflow) describe every job they ran with a :class:`JobRecord`; results are
collected from these records alone, so the two engines publish the same ``results/``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Literal

Stage = Literal["build", "dataset", "method", "metric"]
Status = Literal["succeeded", "failed"]

#: Exit codes with a fixed meaning, as schedulers report them.
EXIT_MEMORY = 137  # killed with SIGKILL after exceeding its memory limit
EXIT_TIME = 143  # terminated with SIGTERM after exceeding its time limit
EXIT_PROCESSES = 150  # killed with SIGKILL after exceeding its process limit (never retried bigger)
EXIT_DISK = 153  # killed after exceeding its disk limit (128 + SIGXFSZ, the shell's "file size limit exceeded")
EXIT_INVALID = -1  # the process exited 0 but its output (or input) is invalid, or it never ran
#: Largest job record read (bytes): records are a few kB; a larger file is not one the harness wrote.
MAX_RECORD_BYTES = 16 * 2**20


@dataclasses.dataclass
class JobRecord:
    """The outcome of one job.

    Attributes
    ----------
    job_id
        ``<dataset_id>/<method_id>`` for a method, ``<dataset_id>/<method_id>/<metric_id>`` for a
        metric, ``<dataset_id>`` for a dataset job. A seeded control runs once per seed:
        ``<dataset_id>/<method_id>@seed<k>`` (and ``.../<metric_id>`` for its metric jobs).
    stage
        ``"build"`` (a source built once for its datasets), ``"dataset"``, ``"method"`` (control
        methods included) or ``"metric"``.
    component
        The component's name.
    component_type
        ``info.type`` of the component: ``dataset``, ``control_method``, ``method`` or ``metric``.
    dataset_id, method_id
        What the job ran on; ``method_id`` is the predicting method for metric jobs.
    status
        ``"succeeded"`` or ``"failed"``.
    exit_code
        The process's exit code; see ``EXIT_*`` for codes with a fixed meaning.
    reason
        One line saying why a job failed (empty when it succeeded).
    duration_s, peak_memory_mb
        Wall time and peak resident memory of the job's process tree.
    outputs
        Output argument name -> path of the published file.
    output_sha256
        Output argument name -> SHA-256 of the file's content when the job finished. A resumed run
        reuses the job only if every output still has this digest (see
        :meth:`openpert.engines.local.LocalEngine.run_job`).
    log
        Path of the captured stdout/stderr.
    key
        The cache key (content hash of component, parameters and inputs).
    cached
        True when the record was reused from an earlier run.
    sandbox
        How the job's process was confined (``RunResult.sandbox``: ``bubblewrap``), ``none`` when
        it ran unconfined or never ran.
    seed
        The seed replicate ``k`` of a seeded control (``info.seeds``) and of the metric jobs scoring
        it; ``None`` for a job that is not a replicate. ``method_id`` stays the control's name.
    params
        The parameter values the job ran with (``--seed`` included).
    component_digest, dataset_digest
        ``sha256:`` digests of the component (config and resources, as the cache key hashes them)
        and of the dataset's files the job was planned on.
    engine
        ``local`` or ``nextflow``.
    provenance
        Where the job ran: ``code_version``, ``commit``, ``dirty``, ``packages`` (name -> version of
        the importable scientific packages), ``host`` (``cpu_count``, ``memory_mb``, ``platform``,
        ``python``, the BLAS libraries and their kernel); see
        :func:`openpert.results.provenance.environment_provenance`. Empty when the engine did not
        record it.
    limits
        The limits the job ran under (:class:`openpert.run.process.Limits` as a dict: ``time_s``,
        ``memory_mb``, ``cpus``, which is also its numerical libraries' thread count, ``processes``,
        ``disk_mb``, ``gpus``; ``None``: unlimited). Empty when the engine did not record them.
    llm_usage_counted
        What the harness's language-model proxy counted for this job (``requests``,
        ``prompt_tokens``, ``completion_tokens``, ``unmetered``: :mod:`openpert.run.llm_proxy`),
        independent of what the component says of itself in its output's ``uns["llm_usage"]``;
        ``None`` when the job had no proxy (it talks to no server, or ran unsandboxed).
    """

    job_id: str
    stage: Stage
    component: str
    component_type: str
    dataset_id: str
    method_id: str | None = None
    status: Status = "failed"
    exit_code: int | None = None
    reason: str = ""
    duration_s: float | None = None
    peak_memory_mb: float | None = None
    outputs: dict[str, str] = dataclasses.field(default_factory=dict)
    log: str | None = None
    key: str | None = None
    cached: bool = False
    output_sha256: dict[str, str] = dataclasses.field(default_factory=dict)
    sandbox: str = "none"
    seed: int | None = None
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    component_digest: str | None = None
    dataset_digest: str | None = None
    engine: str | None = None
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    limits: dict[str, Any] = dataclasses.field(default_factory=dict)
    llm_usage_counted: dict[str, int] | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobRecord:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})

    def write(self, path: Path) -> None:
        """Write the record as JSON, atomically."""
        from openpert.files import write_text_atomic

        write_text_atomic(path, json.dumps(self.to_dict(), indent=2, sort_keys=True))

    @classmethod
    def read(cls, path: Path) -> JobRecord:
        """Read a record written by :meth:`write`.

        Raises
        ------
        OSError
            When the file cannot be read.
        ValueError
            Naming the file, when it is not a complete record (truncated, not JSON, fields missing
            or of the wrong kind), or is larger than :data:`MAX_RECORD_BYTES` (it is then not read).
        """
        path = Path(path)
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_RECORD_BYTES:
                raise ValueError(f"{path}: {size:,} bytes; a job record is at most {MAX_RECORD_BYTES:,}, so this is not one")
            raw = fh.read(MAX_RECORD_BYTES + 1)
        try:
            data = json.loads(raw.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"{path}: not a JSON job record ({err})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a job record is a JSON object, got {type(data).__name__}")
        try:
            record = cls.from_dict(data)
        except TypeError as err:  # a required field is missing
            raise ValueError(f"{path}: incomplete job record: {err}") from None
        for name in ("outputs", "output_sha256"):
            value = getattr(record, name)
            if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
                raise ValueError(f"{path}: {name} must map output names to strings")
        if record.seed is not None and (isinstance(record.seed, bool) or not isinstance(record.seed, int)):
            raise ValueError(f"{path}: seed must be an integer or null, got {record.seed!r}")
        for name in ("params", "provenance", "limits"):
            if not isinstance(getattr(record, name), dict):
                raise ValueError(f"{path}: {name} must be a JSON object")
        counted = record.llm_usage_counted
        if counted is not None and not (isinstance(counted, dict) and all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in counted.items())):
            raise ValueError(f"{path}: llm_usage_counted must map count names to non-negative integers, or be null")
        return record
