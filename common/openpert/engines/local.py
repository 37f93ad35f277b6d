"""The local engine: run a plan's jobs in parallel subprocesses, with a cache, and collect results.

A run has three stages. Dataset components that declare ``info.datasets`` (a list of ``{id: ...,
<argument>: <value>}``) run first and produce datasets, each after the build it is cut from
(``build: <id>`` of an ``info.builds`` entry: one job per build, whatever the number of its
folds); datasets may also come ready-made from a
folder (``--input``). Then every control method and method runs on every dataset, and every metric
on every prediction.

Every job is cached under ``<outdir>/work/<key>``, where the key hashes the component (its merged
config, its declared resources and the shared science package), its parameters and the content of
its inputs, as Nextflow's ``-resume`` does (:mod:`openpert.engines.cache_keys`).
A job is finished when its ``record.json`` exists; that file is written last and atomically, so an
interrupted job is simply run again. The record keeps the SHA-256 of every output, and ``--resume``
reuses a job only if its record reads and every output still has that digest; otherwise the job
runs again and the progress output and its log say why. Failed jobs are not cached (again as
Nextflow): a resumed run tries them again.

Outputs are published into ``outputs/`` (and ``datasets/``) as copies of the cached files, never
hard links, so that editing a published file cannot edit the cache. Ready-made datasets are
checked against the task's file formats first; one with a corrupt file becomes a failed dataset
job and the other datasets run.

Each job gets its share of the machine's cores (:func:`machine_share`), never more than its
resource label asks for: parallel jobs whose thread pools together exceed the cores only wait on
each other. Several tasks may run at once in one process (``openpert benchmark --task all``);
they then draw on one pool of job slots (:class:`JobSlots`), so that while one task collects its
results or waits for its last job, the others keep every slot busy. Jobs that talk to a language
model wait on its server rather than work: they run in a lane of their own, one at a time by
default (``--llm-jobs``), beside the slots.

A job that talks to a language model through the harness's proxy (:mod:`openpert.run.llm_proxy`,
which lives in this process, in the thread that runs the job) shows how far it is in the progress
output: the answers received out of the requests its client has planned so far, and the completion
tokens per second (:func:`llm_progress_text`). The redrawn line shows it beside the job; the plain
lines give a line per such job every :data:`LLM_LINE_INTERVAL_S` seconds.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import os
import shutil
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from openpert.config.formats import note_copy
from openpert.config.viash import ComponentConfig, ConfigError
from openpert.engines.cache_keys import component_digest
from openpert.engines.plan import Job, build_failed
from openpert.files import copy_head_and_tail, hash_file
from openpert.results.provenance import dataset_digest, environment_provenance
from openpert.run.component import run_component, sandbox_mode
from openpert.run.llm_proxy import LLMProgress, LLMProxy
from openpert.run.process import Limits, kill_active_jobs
from openpert.run.records import EXIT_INVALID, JobRecord
from openpert.run.sandbox import needs_llm

#: Bytes of a job's output kept at the start and at the end of its published log (the rest is left out).
LOG_HEAD_BYTES = 512 * 1024
LOG_TAIL_BYTES = 512 * 1024
#: Seconds between two redraws of the progress line while jobs run (its clock and LLM counts move on).
PROGRESS_TICK_S = 1.0
#: Seconds between two plain progress lines of one running language-model job.
LLM_LINE_INTERVAL_S = 30.0


def llm_progress_text(progress: LLMProgress) -> str:
    """How far a language-model job is, for the progress output: ``37/120 answers, 41 tokens/s``.

    The planned count is left out when the job's client stated none, or fewer than the answers
    already received (then it is no bound); the rate when the server reported no tokens yet.

    Parameters
    ----------
    progress
        The job's proxy's :attr:`~openpert.run.llm_proxy.LLMProxy.progress`.
    """
    answers = f"{progress.answered:,}"
    if progress.planned >= progress.answered and progress.planned > 0:
        answers += f"/{progress.planned:,}"
    text = f"{answers} answers"
    rate = progress.tokens_per_second
    if rate is not None:
        text += f", {rate:.1f} tokens/s" if rate < 10 else f", {rate:,.0f} tokens/s"
    return text


class RunStopped(KeyboardInterrupt):
    """The run was stopped (Ctrl-C, SIGTERM, or another task's error) while a job waited for a slot."""


class JobSlots:
    """How many job processes run at once across the engines of one run, and a stop for them all.

    Jobs that talk to a language model (:func:`~openpert.run.sandbox.needs_llm`) run in a lane of
    their own, beside the ``jobs`` slots: they spend their time waiting on the model's server, which
    does the work, so that they would otherwise hold slots while cores sit idle; and one at a time
    (the default) they reach a server that answers one request at a time in turn, each job's
    requests after each other, so that a prompt prefix stays in the server's cache for the next.

    Parameters
    ----------
    jobs
        Job processes that may run at once, language-model jobs aside.
    llm_jobs
        Language-model jobs that may run at once (``--llm-jobs``).
    """

    def __init__(self, jobs: int, llm_jobs: int = 1):
        self.jobs = max(1, int(jobs))
        self.llm_jobs = max(1, int(llm_jobs))
        self._free = {False: threading.BoundedSemaphore(self.jobs), True: threading.BoundedSemaphore(self.llm_jobs)}
        self._stopped = threading.Event()

    def stop(self) -> None:
        """Let no job start any more (jobs waiting for a slot raise :class:`RunStopped`)."""
        self._stopped.set()

    @contextlib.contextmanager
    def slot(self, llm: bool = False) -> Iterator[None]:
        """Hold one slot (of the language-model lane when ``llm``) while a job's process runs."""
        free = self._free[llm]
        # A timeout, so that a stop reaches a thread waiting here.
        while not free.acquire(timeout=0.2):
            if self._stopped.is_set():
                raise RunStopped("the run was stopped")
        try:
            if self._stopped.is_set():
                raise RunStopped("the run was stopped")
            yield
        finally:
            free.release()


def machine_share(limits: Limits, jobs: int, cores: int | None = None) -> Limits:
    """A job's limits with its CPU count cut to its share of this machine's cores.

    A component's label asks for the CPUs it can use on a cluster node (``midcpu``: 2), but here
    ``jobs`` jobs share the machine. Threads beyond a job's share only contend: LightGBM's and
    torch's threads wait on each other at every step, so a small fit that takes 5 s with one
    thread took 21 s with two while another job ran. The count (which sets ``OMP_NUM_THREADS``
    and ``meta["cpus"]``) is therefore the label's, at most ``cores // jobs``, at least 1.

    Parameters
    ----------
    limits
        The job's limits from its labels.
    jobs
        Jobs running at once.
    cores
        The cores this process may use (default: its CPU affinity).
    """
    cores = len(os.sched_getaffinity(0)) if cores is None else int(cores)
    share = max(1, cores // max(1, int(jobs)))
    return dataclasses.replace(limits, cpus=min(limits.cpus, share) if limits.cpus else share)


def visible_gpus(env: Mapping[str, str] = os.environ, dev: Path = Path("/dev")) -> int:
    """How many GPUs a job here could use: NVIDIA device files, narrowed by ``CUDA_VISIBLE_DEVICES``."""
    devices = [p for p in dev.glob("nvidia*") if p.name[len("nvidia"):].isdigit()]
    chosen = env.get("CUDA_VISIBLE_DEVICES")
    if chosen is None:
        return len(devices)
    named = [d for d in chosen.split(",") if d.strip() and not d.strip().startswith("-")]
    return min(len(devices), len(named))


def gpu_notice(job_id: str, gpus: int | None, *, needs_llm: bool, env: Mapping[str, str] = os.environ,
               visible: int | None = None) -> str:
    """What the local engine says before running a job whose labels ask for GPUs ("" when nothing).

    The job runs in any case: the local engine reserves no GPU, it runs a gpu job as any other.
    An LLM component with a server configured (``OPENPERT_LLM_BASE_URL``), or in a dry run, uses
    no GPU of its own, so nothing is said; otherwise a machine showing fewer GPUs than asked is
    named, since in-process vLLM will then fail (and the failure is recorded as the job's).
    """
    if not gpus:
        return ""
    if needs_llm and (env.get("OPENPERT_LLM_BASE_URL") or env.get("OPENPERT_LLM_BACKEND", "").lower() == "dry_run"):
        return ""
    visible = visible_gpus(env) if visible is None else visible
    if visible >= gpus:
        return ""
    return (f"{job_id} asks for {gpus} GPU(s) and this machine shows {visible}: it runs anyway; in-process generation "
            "(vLLM) needs one, a server does not (set OPENPERT_LLM_BASE_URL, docs/llm.md)")


class LocalEngine:
    """Runs jobs as subprocesses, in parallel, with caching and failure isolation.

    Parameters
    ----------
    outdir
        The run's output folder (``work/``, ``outputs/``, ``logs/`` are created inside).
    jobs
        How many jobs run at once.
    resume
        Reuse finished jobs from an earlier run into the same ``outdir``.
    sandbox
        ``None``: every job in a bubblewrap sandbox where it works, else unsandboxed with a warning;
        ``True``: require the sandbox; ``False``: run jobs unsandboxed (see :mod:`openpert.run.sandbox`).
    progress
        ``True``: a progress line on stderr, redrawn in place; ``False``: nothing; ``"lines"``: one
        plain line per job start and end (job id, status, seconds), so that a log shows what is
        running; ``None`` (the default): the progress line on a terminal, else the plain lines.
    slots
        Job slots shared with the engines of other tasks running at once (default: this
        engine's own, ``jobs`` of them and ``llm_jobs`` in the language-model lane).
    llm_jobs
        Language-model jobs run at once, beside ``jobs`` (:class:`JobSlots`).
    label
        Put before each job id in the plain lines (the task's name when several run at once).
    """

    def __init__(self, outdir: Path, *, jobs: int = 1, resume: bool = False, progress: bool | str | None = None,
                 sandbox: bool | None = None, slots: JobSlots | None = None, llm_jobs: int = 1, label: str = ""):
        self.outdir = Path(outdir).resolve()
        self.slots = slots if slots is not None else JobSlots(jobs, llm_jobs)
        self.jobs = self.slots.jobs
        self.resume = resume
        self.sandbox = sandbox
        if sandbox:
            # Required: the run stops before anything is planned, with the reason, instead of failing every job alike.
            sandbox_mode(True)
        self.label = label
        if progress is None:
            progress = True if sys.stderr.isatty() else "lines"
        self.mode = "lines" if progress == "lines" else ("bar" if progress else "none")
        self._component_hashes: dict[Path, str] = {}
        self._dataset_digests: dict[str, str] = {}
        self._environments: dict[Path, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._done = 0
        self._total = 0
        self._running: set[str] = set()
        # The language-model proxies of running jobs, and when each job's last plain LLM line was written.
        self._llm_proxies: dict[str, LLMProxy] = {}
        self._llm_lines: dict[str, float] = {}
        self._start = time.perf_counter()

    # -- one job -----------------------------------------------------------------------------------------
    def _component_hash(self, config: ComponentConfig) -> str:
        with self._lock:
            if config.path not in self._component_hashes:
                self._component_hashes[config.path] = component_digest(config)
            return self._component_hashes[config.path]

    def run_job(self, job: Job) -> JobRecord:
        """Run (or reuse) one job and return its record. Never raises for a failure of the job."""
        record = JobRecord(job_id=job.job_id, stage=job.stage, component=job.config.name,
                           component_type=job.config.type, dataset_id=job.dataset_id, method_id=job.method_id,
                           seed=job.seed, params=dict(job.params), engine="local",
                           provenance=self._environment(job.config.root))
        log_dest = self.outdir / "logs" / f"{job.job_id}.log"
        record.log = str(log_dest.relative_to(self.outdir))
        try:
            component_hash = self._component_hash(job.config)
            record.component_digest = "sha256:" + component_hash
            record.dataset_digest = self._dataset_digest(job)
            key = job.key(component_hash)
        except OSError as err:
            record.exit_code, record.reason = EXIT_INVALID, f"cannot read inputs: {err}"
            return record
        record.key = key
        job_dir = self.outdir / "work" / key[:2] / key
        record_path = job_dir / "record.json"
        note = ""
        if self.resume:
            cached, why = self._reusable(record_path, job_dir)
            if cached is not None:
                try:
                    published = {k: str(self._publish(job, Path(p))) for k, p in cached.outputs.items()}
                except OSError as err:
                    why = f"cannot publish cached outputs: {err}"
                else:
                    # Identical predictions of two seeds share a cache entry; the record is this job's.
                    return dataclasses.replace(cached, cached=True, job_id=job.job_id, dataset_id=job.dataset_id,
                                               method_id=job.method_id, seed=record.seed, params=record.params,
                                               dataset_digest=record.dataset_digest, outputs=published, log=record.log)
            if why:
                note = f"re-running {job.job_id}: {why}".replace(f"{self.outdir}/", "")
                self._notice(note)
        notice = gpu_notice(job.job_id, job.limits.gpus, needs_llm=needs_llm(job.config))
        if notice:
            self._notice(notice)
            note = f"{note}\n{notice}".strip()
        attempt = job_dir / f"attempt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        out_dir = attempt / "out"
        args: dict[str, Any] = {name: str(path) for name, path in job.inputs.items()}
        args.update({name: str(out_dir / filename) for name, filename in job.outputs.items()})
        args.update(job.params)
        try:
            with self.slots.slot(llm=needs_llm(job.config)):
                with self._lock:
                    self._running.add(job.job_id)
                self._show()
                self._log_line(f"start    {self._named(job.job_id)}")
                limits = machine_share(job.limits, self.jobs)
                record.limits = dataclasses.asdict(limits)
                result = run_component(job.config, args, work_dir=attempt / "run", limits=limits,
                                       log=attempt / "output.log", sandbox=self.sandbox,
                                       context=job.context, allowed_input_formats=job.allowed,
                                       on_llm_proxy=lambda proxy: self._watch_llm(job.job_id, proxy))
        except ConfigError as err:
            # The call itself is wrong (e.g. a method that asks for the solution): nothing ran.
            record.exit_code, record.reason = EXIT_INVALID, str(err)
            _write_log(log_dest, note, text=str(err) + "\n")
            return record
        except Exception as err:  # staging or validating this job's files broke: that job fails, the run goes on
            record.exit_code = EXIT_INVALID
            record.reason = f"the harness could not run the job: {type(err).__name__}: {err}".replace(f"{self.outdir}/", "")
            _write_log(log_dest, note, text=traceback.format_exc())
            return record
        finally:
            with self._lock:
                self._running.discard(job.job_id)
                self._llm_proxies.pop(job.job_id, None)
                self._llm_lines.pop(job.job_id, None)
        _write_log(log_dest, note, source=result.log)
        _trim_log(result.log)
        record.exit_code = result.exit_code
        # Work paths in messages are long and machine-specific; the results folder is their root.
        record.reason = result.reason.replace(f"{self.outdir}/", "")
        record.duration_s = round(result.duration_s, 4)
        record.peak_memory_mb = round(result.peak_memory_mb, 2)
        record.sandbox = result.sandbox
        record.llm_usage_counted = result.llm_usage_counted
        if result.succeeded:
            try:
                # The digests are what a resumed run checks the cached files against.
                record.output_sha256 = {k: hash_file(p) for k, p in result.outputs.items()}
            except OSError as err:
                record.exit_code, record.reason = EXIT_INVALID, f"cannot read its output: {err}".replace(f"{self.outdir}/", "")
                return record
            record.status = "succeeded"
            # The cache entry points at the attempt's files; what the results show are published copies.
            cached_record = JobRecord.from_dict(record.to_dict())
            cached_record.outputs = {k: str(p) for k, p in result.outputs.items()}
            cached_record.write(record_path)
            record.outputs = {k: str(self._publish(job, p)) for k, p in result.outputs.items()}
            shutil.rmtree(attempt / "run", ignore_errors=True)
        else:
            # A failed job keeps its log, not what it wrote: its work folder (its /tmp and home
            # included) and any output can be gigabytes, and nothing reads them again.
            problem = _remove_job_files(attempt)
            if problem:
                record.reason = f"{record.reason} ({problem})".replace(f"{self.outdir}/", "")
        return record

    def _environment(self, root: Path) -> dict[str, Any]:
        """Code version, commit, packages and host, read once per run (and project root)."""
        with self._lock:
            if root not in self._environments:
                self._environments[root] = environment_provenance(root)
            return self._environments[root]

    def _dataset_digest(self, job: Job) -> str | None:
        """Digest of the dataset a job runs on: the files of its method job's context (``None`` for a dataset job).

        A method job's context is its dataset's files by format; a metric job follows its method job,
        whose digest is then known.
        """
        if job.stage == "dataset":
            return None
        with self._lock:
            known = self._dataset_digests.get(job.dataset_id)
        if known is None and job.stage == "method":
            known = dataset_digest(job.context)
            with self._lock:
                self._dataset_digests[job.dataset_id] = known
        return known

    def _reusable(self, record_path: Path, job_dir: Path) -> tuple[JobRecord | None, str]:
        """The cached record of a job if its outputs are exactly those it finished with.

        Returns ``(record, "")`` when the job can be reused, else ``(None, why)``; ``why`` is empty
        when there is simply no cache entry. A record or an output that cannot be read, an output
        that vanished or whose SHA-256 differs from the one recorded means the job runs again: the
        cache must never hand on a file that someone (or something) edited after the job wrote it.
        """
        if not record_path.exists():
            return None, ""
        try:
            cached = JobRecord.read(record_path)
        except (OSError, ValueError) as err:
            return None, f"cached record.json is unreadable ({err})"
        if not cached.succeeded:
            return None, "cached record.json is not of a finished job"
        if not cached.outputs or set(cached.output_sha256) != set(cached.outputs):
            return None, "cached record.json has no checksum of its outputs"
        root = job_dir.resolve()
        for name, value in sorted(cached.outputs.items()):
            path = Path(value)
            if not path.resolve().is_relative_to(root):
                return None, f"cached output --{name} ({path}) lies outside the job's cache folder"
            if not path.exists():
                return None, f"cached output {path.name} vanished"
            try:
                digest = hash_file(path)
            except OSError as err:
                return None, f"cached output {path.name} is unreadable ({err.strerror or err})"
            if digest != cached.output_sha256[name]:
                return None, f"cached output {path.name} changed"
        return cached, ""

    def _publish(self, job: Job, path: Path) -> Path:
        """Copy an output into the results folder, atomically.

        A copy, never a hard link: the published file is for people (and later jobs) to read, and
        editing it must not edit the cache entry a resumed run trusts.
        """
        dest = job.publish_dir / path.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.tmp")
        folder = path.is_dir()
        try:
            if folder:
                shutil.copytree(path, tmp)
                if dest.is_dir() and not dest.is_symlink():
                    shutil.rmtree(dest)  # os.replace cannot replace a non-empty folder
            else:
                shutil.copyfile(path, tmp)
            os.replace(tmp, dest)
            if not folder:
                # The copy passes what the cached file passed: the jobs that read it need not read it to check it.
                note_copy(path, dest)
        except BaseException:
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
            raise
        return dest

    # -- many jobs ---------------------------------------------------------------------------------------
    def run_plan(self, plan: dict[str, Any], jobs: list[Job]) -> list[JobRecord]:
        """The records of a plan's jobs, each run here (the engine interface of :mod:`openpert.engines.benchmark`)."""
        return self.run(jobs)

    def run(self, jobs: Iterable[Job]) -> list[JobRecord]:
        """Run jobs in parallel, each once the job it follows (``after``) has succeeded.

        A job whose upstream job failed does not run and has no record: the upstream job's record
        says why; only a dataset job cut from a failed build gets a failed record naming the build
        (:func:`~openpert.engines.plan.build_failed`), so that the results list the dataset. Inputs
        wired to an upstream job's output are resolved to its published files.

        Raises
        ------
        ValueError
            When a job follows a job that is not among ``jobs``.
        """
        pending = list(jobs)
        ids = {job.job_id for job in pending}
        unknown = sorted({job.after for job in pending if job.after is not None and job.after not in ids})
        if unknown:
            raise ValueError(f"jobs follow jobs that are not planned: {', '.join(unknown)}")
        followers: dict[str, list[Job]] = {}
        for job in pending:
            if job.after is not None:
                followers.setdefault(job.after, []).append(job)
        records: list[JobRecord] = []
        by_id: dict[str, JobRecord] = {}
        with self._lock:
            self._total += len(pending)
        # One pool a lane (JobSlots), so that language-model jobs waiting for theirs hold no thread another job needs.
        with cf.ThreadPoolExecutor(max_workers=self.jobs) as pool, \
                cf.ThreadPoolExecutor(max_workers=self.slots.llm_jobs) as llm_pool:
            futures: dict[cf.Future, Job] = {}

            def submit(job: Job) -> None:
                lane = llm_pool if needs_llm(job.config) else pool
                try:
                    job = job.resolved(lambda job_id: by_id[job_id].outputs)
                except ConfigError as err:
                    futures[lane.submit(self._refused, job, str(err))] = job
                else:
                    futures[lane.submit(self.run_job, job)] = job

            for job in pending:
                if job.after is None:
                    submit(job)
            try:
                while futures:
                    done, _ = cf.wait(futures, timeout=PROGRESS_TICK_S, return_when=cf.FIRST_COMPLETED)
                    self._tick()
                    for fut in done:
                        job = futures.pop(fut)
                        record = fut.result()
                        records.append(record)
                        by_id[job.job_id] = record
                        with self._lock:
                            self._done += 1
                        self._show()
                        state = "cached" if record.cached else (record.status if record.succeeded else f"failed (exit {record.exit_code})")
                        self._log_line(f"{'end':8} {self._named(job.job_id)} {state} {record.duration_s or 0:.1f}s [{self._done}/{self._total}]")
                        later = followers.get(job.job_id, [])
                        if not record.succeeded:
                            # A dataset cut from a failed build is recorded as failed, naming the
                            # build: the results list the dataset with the reason.
                            cut = [f for f in later if job.stage == "build" and f.stage == "dataset"]
                            records += [self._refused(f, build_failed(job.job_id, record.reason)) for f in cut]
                            with self._lock:
                                self._done += len(cut)
                                self._total -= len(_downstream(later, followers)) - len(cut)
                            continue
                        for follow in later:
                            submit(follow)
            except BaseException:
                for fut in futures:
                    fut.cancel()
                kill_active_jobs()
                raise
        self._show(final=True)
        return records

    def _refused(self, job: Job, reason: str) -> JobRecord:
        """The record of a job that cannot run: an input its upstream job did not write, or its build failed."""
        return JobRecord(job_id=job.job_id, stage=job.stage, component=job.config.name, component_type=job.config.type,
                         dataset_id=job.dataset_id, method_id=job.method_id, seed=job.seed, params=dict(job.params),
                         engine="local", exit_code=EXIT_INVALID, reason=reason)

    def _named(self, job_id: str) -> str:
        return f"{self.label}/{job_id}" if self.label else job_id

    def _log_line(self, text: str) -> None:
        """One line of the plain progress log (when stderr is not a terminal)."""
        if self.mode == "lines":
            with self._lock:
                sys.stderr.write(text + "\n")
                sys.stderr.flush()

    def _notice(self, text: str) -> None:
        """A line that must not be lost in the progress display (e.g. why a cached job runs again)."""
        if self.mode == "lines":
            self._log_line(text)
        elif self.mode == "bar":
            width = shutil.get_terminal_size((100, 20)).columns
            with self._lock:
                sys.stderr.write("\r" + text.ljust(width - 1) + "\n")
                sys.stderr.flush()
            self._show()

    def _watch_llm(self, job_id: str, proxy: LLMProxy) -> None:
        """Follow a running job's language-model proxy in the progress output (until the job ends)."""
        with self._lock:
            self._llm_proxies[job_id] = proxy
            self._llm_lines[job_id] = time.monotonic()

    def _llm_progress(self) -> dict[str, LLMProgress]:
        """The progress of each running language-model job that has sent a request, by job id."""
        with self._lock:
            proxies = dict(self._llm_proxies)
        shown = {job_id: proxy.progress for job_id, proxy in proxies.items()}
        return {job_id: progress for job_id, progress in shown.items() if progress.seconds is not None}

    def _tick(self) -> None:
        """While jobs run: redraw the progress line, or write the plain LLM progress lines that are due."""
        if self.mode == "bar":
            self._show()
        elif self.mode == "lines":
            now = time.monotonic()
            for job_id, progress in sorted(self._llm_progress().items()):
                with self._lock:
                    last = self._llm_lines.get(job_id)
                    due = last is not None and now - last >= LLM_LINE_INTERVAL_S
                    if due:
                        self._llm_lines[job_id] = now
                if due:
                    self._log_line(f"{'llm':8} {self._named(job_id)} {llm_progress_text(progress)}")

    def _show(self, final: bool = False) -> None:
        """Redraw the progress line on a terminal."""
        if self.mode != "bar":
            return
        llm = self._llm_progress()
        with self._lock:
            # Language-model jobs first, with their answers and speed: the others show only their ids.
            running = sorted(self._running, key=lambda job_id: (job_id not in llm, job_id))
            shown = [f"{job_id} ({llm_progress_text(llm[job_id])})" if job_id in llm else job_id for job_id in running]
            line = f"[{self._done}/{self._total}] {time.perf_counter() - self._start:6.1f}s"
            if running:
                line += f"  running: {', '.join(shown[:3])}" + (f" +{len(running) - 3}" if len(running) > 3 else "")
        width = shutil.get_terminal_size((100, 20)).columns
        sys.stderr.write("\r" + line[: width - 1].ljust(width - 1) + ("\n" if final else ""))
        sys.stderr.flush()


def _downstream(jobs: list[Job], followers: dict[str, list[Job]]) -> list[Job]:
    """``jobs`` and every job that follows one of them, however far down."""
    out, frontier = [], list(jobs)
    while frontier:
        job = frontier.pop()
        out.append(job)
        frontier += followers.get(job.job_id, [])
    return out


def _write_log(dest: Path, note: str, *, source: Path | None = None, text: str = "") -> None:
    """Write a job's log: the engine's note (why it re-ran), then the job's own output.

    The job's output is kept whole up to :data:`LOG_HEAD_BYTES` + :data:`LOG_TAIL_BYTES`, else its
    start and end: a job can make its log gigabytes long, and the log is published and shown.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "wb") as fh:
        if note:
            fh.write(f"[openpert] {note}\n".encode())
        if source is not None and source.exists():
            copy_head_and_tail(source, fh, head=LOG_HEAD_BYTES, tail=LOG_TAIL_BYTES)
        fh.write(text.encode())


def _trim_log(log: Path) -> None:
    """Cut a job's own log in the cache to its first and last bytes, as the published copy is.

    A job can write gigabytes to its output (its disk limit allows it up to that limit).
    """
    try:
        if log.stat().st_size <= LOG_HEAD_BYTES + LOG_TAIL_BYTES:
            return
        trimmed = log.with_name(f".{log.name}.trimmed")
        with open(trimmed, "wb") as fh:
            copy_head_and_tail(log, fh, head=LOG_HEAD_BYTES, tail=LOG_TAIL_BYTES)
        os.replace(trimmed, log)
    except FileNotFoundError:
        return  # the job never ran: there is no log to trim


def _remove_job_files(attempt: Path) -> str:
    """Remove what a failed job wrote (its work folder and outputs), keeping the attempt's log.

    A job may have taken the rights off its own folders (``chmod 000``): they are given back to
    the owner and the removal tried again.

    Returns
    -------
    str
        ``""``, or why a folder could not be removed (for the job's record).
    """
    def allow_and_retry(function, path, _exc) -> None:
        parent = os.path.dirname(path)
        os.chmod(parent, 0o700)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, 0o700)
            shutil.rmtree(path, onerror=allow_and_retry)
        else:
            function(path)

    for folder in (attempt / "run", attempt / "out"):
        if folder.is_dir() and not folder.is_symlink():
            try:
                shutil.rmtree(folder, onerror=allow_and_retry)
            except OSError as err:
                return f"its files could not be removed: {err}"
    return ""


def install_signal_handlers() -> None:
    """Turn SIGTERM into KeyboardInterrupt so that a stopped run kills its jobs and exits cleanly."""

    def handler(signum, frame):  # noqa: ARG001 - signal handler signature
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
