"""Job records: what one run of one component did.

Both engines (local and Nextflow) describe every job they ran with a :class:`JobRecord`; results are
collected from these records alone, so the two engines publish the same ``results/``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

Stage = Literal["dataset", "method", "metric"]
Status = Literal["succeeded", "failed"]

#: Exit codes with a fixed meaning, as schedulers report them.
EXIT_MEMORY = 137  # killed with SIGKILL after exceeding its memory limit
EXIT_TIME = 143  # terminated with SIGTERM after exceeding its time limit
EXIT_INVALID = -1  # the process exited 0 but its output (or input) is invalid, or it never ran


@dataclasses.dataclass
class JobRecord:
    """The outcome of one job.

    Attributes
    ----------
    job_id
        ``<dataset_id>/<method_id>`` for a method, ``<dataset_id>/<method_id>/<metric_id>`` for a
        metric, ``<dataset_id>`` for a dataset job.
    stage
        ``"dataset"``, ``"method"`` (control methods included) or ``"metric"``.
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
    log
        Path of the captured stdout/stderr.
    key
        The cache key (content hash of component, parameters and inputs).
    cached
        True when the record was reused from an earlier run.
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
        return cls.from_dict(json.loads(Path(path).read_text()))
