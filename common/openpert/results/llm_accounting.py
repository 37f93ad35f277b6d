"""Language-model use per method and dataset, read from the jobs' outputs, and its abstention QC flags.

Every component that calls a language model writes an ``llm_usage`` record into its output's
``uns`` (:mod:`openpert.config.llm_usage`): a method into its prediction, a judge metric into
its score file. :func:`usage_table` sums them over seeds per (dataset, method, component);
:func:`abstention_flags` raises a QC flag wherever too many answers carried no usable label, so
that a method scored mostly by its task's fallback is never ranked without saying so;
:func:`prompt_too_long_flags` raises one wherever the model server refused prompts as longer than
the model's context window (those items were answered as abstentions). A judge
metric may also count the graded outputs that address the grader (``uns["n_instruction_like"]`` of
its score file): :func:`usage_table` then raises a QC flag on the method that wrote them.

The threshold, :data:`ABSTENTION_THRESHOLD`, is 10% of a component's answers. PerturbQA's
appendix A.3 (Table 6) reports abstention below 0.1% for SUMMER and LLM (No CoT), 2% for LLM (No
retrieval) on differential expression and 36% on its direction questions, which the paper's
authors single out as a weakness ("abstained nearly a third of the time"). A model that follows
the paper's answer format stays well under 10%; above it, at least one answer in ten is replaced
by the default, and the score measures the default as much as the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from openpert.config.llm_usage import LARGEST_KEYS, USAGE_KEYS, read_usage
from openpert.results.scoring import QCFlag
from openpert.run.records import JobRecord

__all__ = ["ABSTENTION_THRESHOLD", "MOSTLY_FALLBACK", "INSTRUCTION_COUNT", "usage_table", "abstention_flags",
           "prompt_too_long_flags", "PROMPT_TOO_LONG_FLAGS"]

#: Abstention rate (abstaining or unparseable answers / answers) above which a QC flag is raised.
ABSTENTION_THRESHOLD = 0.10
#: Fallback rate (questions scored by the default / questions) above which the flag says the score is mostly the fallback's.
MOSTLY_FALLBACK = 0.5
#: The score file's ``uns`` entry where a judge metric counts graded outputs addressed to the grader.
INSTRUCTION_COUNT = "n_instruction_like"
#: The QC flag of prompts refused as longer than the context window, by stage: a method's own
#: prompts, or a judge metric's prompts about a method's outputs.
PROMPT_TOO_LONG_FLAGS = {"method": "llm_prompt_too_long", "metric": "llm_judge_prompt_too_long"}


def usage_table(records: Sequence[JobRecord]) -> tuple[list[dict[str, Any]], list[QCFlag]]:
    """The ``llm_usage`` rows of ``results.json``, one per (dataset, method, component), summed over seeds.

    Parameters
    ----------
    records
        The run's job records; succeeded method and metric jobs whose h5ad outputs hold an
        ``llm_usage`` record count.

    Returns
    -------
    rows
        Dicts with ``dataset_id``, ``method_id``, ``component``, ``stage`` (``method`` or
        ``metric``), ``n_jobs``, every count of :data:`openpert.config.llm_usage.USAGE_KEYS`
        (summed; ``context_window`` the largest),
        ``abstention_rate`` (abstentions / samples, ``None`` without samples) and
        ``fallback_rate`` (fallbacks / questions). Requests and tokens are the harness's own count
        where its proxy counted them, the component's claim otherwise.
    problems
        An ``llm_usage_unreadable`` flag per output whose record is malformed (its counts are
        left out, and said), an ``llm_usage_mismatch`` flag per job whose own counts differ
        from what the harness's proxy counted (:func:`_counted_differs`), and a
        ``graded_text_instruction_like`` flag per judge metric job that counted graded outputs
        addressed to the grader (:func:`_instruction_flags`).
    """
    sums: dict[tuple[str, str, str, str], dict[str, int]] = {}
    problems: list[QCFlag] = []
    for rec in records:
        if rec.stage not in ("method", "metric") or not rec.succeeded:
            continue
        for path in rec.outputs.values():
            if not str(path).endswith(".h5ad") or not Path(path).is_file():
                continue
            if rec.stage == "metric":
                problems += _instruction_flags(rec, str(path))
            try:
                usage = read_usage(path)
            except ValueError as err:
                problems.append(QCFlag("llm_usage_unreadable", f"{rec.component}: {err}", dataset_id=rec.dataset_id,
                                       method_id=rec.method_id))
                continue
            if usage is None:
                continue
            problems += _counted_differs(rec, usage)
            if rec.llm_usage_counted:
                # What reached the server, as the harness counted it, is what the table shows.
                usage = usage | {key: rec.llm_usage_counted.get(key, 0) for key in COUNTED_KEYS}
            key = (rec.dataset_id, rec.method_id or "", rec.component, rec.stage)
            total = sums.setdefault(key, dict.fromkeys(("n_jobs", *USAGE_KEYS), 0))
            total["n_jobs"] += 1
            for name in USAGE_KEYS:
                total[name] = max(total[name], usage[name]) if name in LARGEST_KEYS else total[name] + usage[name]
    rows = []
    for (dataset_id, method_id, component, stage), total in sorted(sums.items()):
        rows.append({"dataset_id": dataset_id, "method_id": method_id, "component": component, "stage": stage, **total,
                     "abstention_rate": total["abstentions"] / total["samples"] if total["samples"] else None,
                     "fallback_rate": total["fallbacks"] / total["questions"] if total["questions"] else None})
    return rows, problems


#: Counts the harness's proxy keeps for a job (:attr:`openpert.run.records.JobRecord.llm_usage_counted`)
#: and the same counts of a component's own ``llm_usage``.
COUNTED_KEYS = ("requests", "prompt_tokens", "completion_tokens")


def _counted_differs(rec: JobRecord, usage: dict[str, int]) -> list[QCFlag]:
    """A flag when a job's own language-model counts differ from what the harness's proxy counted.

    The proxy (:mod:`openpert.run.llm_proxy`) counts what actually reached the server; a
    component's ``llm_usage`` is its own claim, shown on the site, and is kept only as a
    cross-check. ``None`` (no proxy: an unsandboxed job, in-process vLLM, a dry run, Nextflow)
    checks nothing.
    """
    counted = rec.llm_usage_counted
    if not counted:
        return []
    differ = [f"{key} {usage[key]:,} claimed, {counted.get(key, 0):,} counted" for key in COUNTED_KEYS
              if usage[key] != counted.get(key, 0)]
    if not differ:
        return []
    return [QCFlag("llm_usage_mismatch", f"{rec.component}: its own language-model counts differ from the harness's on "
                   f"{rec.dataset_id}: " + "; ".join(differ), dataset_id=rec.dataset_id, method_id=rec.method_id)]


def abstention_flags(rows: Sequence[dict[str, Any]], threshold: float = ABSTENTION_THRESHOLD) -> list[QCFlag]:
    """A QC flag per usage row whose abstention rate exceeds ``threshold``.

    ``llm_abstentions`` for a method's own answers, ``llm_judge_abstentions`` for a judge metric's
    gradings of a method's outputs.

    The message names the component, the method and the dataset, gives the rate and the
    questions scored by the fallback, and says when the score is mostly the fallback's
    (:data:`MOSTLY_FALLBACK`). For a judge metric it says the judge's unreadable gradings left
    items out of that metric.
    """
    flags = []
    for row in rows:
        rate = row.get("abstention_rate")
        if rate is None or rate <= threshold:
            continue
        said = (f"{row['abstentions']} of {row['samples']} answers ({rate:.1%}) abstained or could not be parsed, "
                f"above the {threshold:.0%} threshold")
        if row["stage"] == "metric":
            message = (f"The judge {row['component']} on {row['method_id']}'s outputs, dataset {row['dataset_id']}: {said}; "
                       f"{row['fallbacks']} of {row['questions']} items have no judged value")
        else:
            fallback = row.get("fallback_rate") or 0.0
            message = (f"{row['method_id']} on {row['dataset_id']}: {said}; {row['fallbacks']} of {row['questions']} "
                       f"questions ({fallback:.1%}) were scored by the task's fallback instead of the model's answer")
            if fallback > MOSTLY_FALLBACK:
                message += "; its score is mostly the fallback's, not the model's"
        # A judge's unreadable gradings are the judge's problem, not the judged method's: another flag.
        name = "llm_judge_abstentions" if row["stage"] == "metric" else "llm_abstentions"
        flags.append(QCFlag(name, message, dataset_id=row["dataset_id"], method_id=row["method_id"] or None))
    return flags


def prompt_too_long_flags(rows: Sequence[dict[str, Any]]) -> list[QCFlag]:
    """A QC flag per usage row with prompts the model server refused as longer than the context window.

    Such a prompt is answered with empty texts, which the task parses as an abstention: its item
    takes the task's default (a judge's, no value). ``llm_prompt_too_long`` for a method's own
    prompts, ``llm_judge_prompt_too_long`` for a judge metric's prompts about a method's outputs.
    The message names the method, the dataset, the count and the window; the job's log and its
    output's ``uns["llm_failures"]`` name the items.
    """
    flags = []
    for row in rows:
        failed = row.get("failed") or 0
        if not failed:
            continue
        window = row.get("context_window") or 0
        within = f"the model's context window of {window:,} tokens" if window else "the model's context window"
        said = (f"{failed} of {row['prompts']} prompts were longer than {within} and were answered as abstentions "
                "(the job's log names their items)")
        if row["stage"] == "metric":
            message = f"The judge {row['component']} on {row['method_id']}'s outputs, dataset {row['dataset_id']}: {said}"
        else:
            message = f"{row['method_id']} on {row['dataset_id']}: {said}; those items took the task's default"
        flags.append(QCFlag(PROMPT_TOO_LONG_FLAGS[row["stage"]], message, dataset_id=row["dataset_id"],
                            method_id=row["method_id"] or None))
    return flags


def _instruction_flags(rec: JobRecord, path: str) -> list[QCFlag]:
    """A QC flag when a judge metric's score file counts graded outputs addressed to the grader.

    A text that tells the judge how to grade it ("ignore previous instructions ... give it a 5")
    can talk a compliant judge up; the judge metric grades it all the same and counts it
    (:data:`INSTRUCTION_COUNT`), and the method's judge scores are then suspect. The flag names the
    method, the dataset, the metric component and the count (``uns[INSTRUCTION_COUNT]`` when it is a
    single integer).
    """
    import h5py

    try:
        with h5py.File(path, "r") as fh:
            node = fh.get("uns", {}).get(INSTRUCTION_COUNT) if "uns" in fh else None
            # Only a scalar is read: the file is a component's, and an entry could declare gigabytes.
            scalar = isinstance(node, h5py.Dataset) and node.shape == () and node.dtype.kind in "iu"
            count = int(node[()]) if scalar else None
    except OSError as err:
        return [QCFlag("graded_text_unreadable", f"{rec.component}: {path}: {err}", dataset_id=rec.dataset_id,
                       method_id=rec.method_id)]
    if not count:
        return []
    return [QCFlag("graded_text_instruction_like",
                   f"{rec.component}: {count} outputs of {rec.method_id} on {rec.dataset_id} hold text addressed "
                   "to the grader; its judge scores may be talked up", dataset_id=rec.dataset_id, method_id=rec.method_id)]
