"""Run a command as a job: limits on time, memory, processes and disk, its output captured, its peak memory measured.

Every job gets its own process group (its own session), so that the job and everything it starts
can be stopped together. The command may be a sandbox launcher (``bwrap``, see
:mod:`openpert.run.sandbox`) whose descendants are the job: memory is then measured over the whole
tree under it, and the time limit's ``SIGTERM`` goes to those descendants (the launcher itself
would die at once and take the job down without its grace period).

Processes and disk are limited per job, not per user. ``RLIMIT_NPROC`` would not do: it counts
every process of the user's uid on the whole machine (other jobs, other benchmarks, the user's
shell) and the kernel does not apply it to root, which CI runs as. So the watcher that samples the
job's process tree for memory also counts it (every 5 ms while the tree grows or is large, every
25 ms while it stays small: reading a few files of ``/proc``) and kills the job once it holds more
processes than its limit. A fork bomb outruns any poll on a loaded machine (the watcher waits for
a core like every process); where it is safe, inside the sandbox and not as root, the job's
launcher also sets ``RLIMIT_NPROC``, which the kernel then counts for the job's own user namespace
(:func:`openpert.run.component.task_limit`). Disk is what the job writes: the
allocated blocks of every file under its work folder (its private ``/tmp`` and home included,
staged inputs excluded: they are hard links of the dataset and cost nothing) and of its log,
summed by a walk whose interval grows with its own cost, so that it never takes more than about
a tenth of a core. ``RLIMIT_FSIZE`` (set through util-linux's ``prlimit``, which then runs the
command) caps every single file at the disk limit, so that one file cannot outrun the walk.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Protocol

import psutil

from openpert.engines.resource_labels import limit_text
from openpert.files import format_bytes, read_tail
from openpert.run.records import EXIT_DISK, EXIT_MEMORY, EXIT_PROCESSES, EXIT_TIME

log_ = logging.getLogger(__name__)
_warned_no_prlimit = False

# Process groups of jobs running now, so that an interrupted benchmark can stop them all.
_ACTIVE: set[int] = set()


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resource limits of one job (``None``: unlimited).

    Attributes
    ----------
    time_s, memory_mb, cpus
        Wall time, resident memory of the job's process tree, and the CPUs its thread pools use.
    processes
        Processes the job's tree may hold at once (its sandbox launcher included).
    disk_mb
        Megabytes the job may write: the allocated size of its work folder (private ``/tmp`` and
        home included, staged inputs excluded) and of its log; also the largest size of any one
        file it writes (``RLIMIT_FSIZE``).
    """

    time_s: float | None = None
    memory_mb: float | None = None
    cpus: int | None = None
    processes: int | None = None
    disk_mb: float | None = None
    #: GPUs asked for (the ``gpu`` label); the local engine does not reserve them, it only checks.
    gpus: int | None = None


class _ExitWaiter:
    """Waits up to a timeout, returning early when process ``pid`` exits (a pidfd; Linux 5.3+).

    Where pidfds are missing it sleeps the whole timeout. Use as a context manager: the descriptor
    is closed on leaving.
    """

    def __init__(self, pid: int):
        try:
            self._fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._fd = None
            return
        self._poller = select.poll()
        self._poller.register(self._fd, select.POLLIN)

    def __call__(self, timeout: float) -> None:
        if self._fd is None:
            time.sleep(timeout)
        else:
            self._poller.poll(timeout * 1000)

    def __enter__(self) -> _ExitWaiter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


#: Whether the kernel lists each thread's children in /proc (Linux >= 3.5 with CONFIG_PROC_CHILDREN).
_PROC_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def _descendant_pids(pid: int) -> list[int]:
    """PIDs of the descendants of ``pid``, from /proc/<pid>/task/<tid>/children.

    This reads the job's own few processes, where :meth:`psutil.Process.children` reads the
    parent of every process on the machine; the tree is sampled ten times a second per job.
    """
    found: list[int] = []
    parents = [pid]
    while parents:
        parent = parents.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue  # it has ended: it has no children left to list
        for tid in threads:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as fh:
                    children = [int(c) for c in fh.read().split()]
            except OSError:
                continue  # the thread has ended
            found.extend(children)
            parents.extend(children)
    return found


def _joined_pids(job: psutil.Process | None) -> list[int]:
    """The pids of a joined job (:func:`execute`'s ``joined``) and its descendants, while it runs."""
    if job is None or not _alive(job):
        return []  # not started, or ended: its pid may name another process by now
    return [job.pid, *_descendant_pids(job.pid)]


def _tree(proc: psutil.Process, descendants: list[int] | None = None) -> list[psutil.Process]:
    """``proc`` and its descendants now (only ``proc`` when they cannot be listed).

    ``descendants``: their pids, when :func:`_descendant_pids` has just listed them.
    """
    try:
        if not _PROC_CHILDREN:
            return [proc, *proc.children(recursive=True)]
        tree = [proc]
        for pid in _descendant_pids(proc.pid) if descendants is None else descendants:
            try:
                tree.append(psutil.Process(pid))
            except psutil.Error:
                continue  # it ended between the listing and now
        return tree
    except psutil.Error:
        return [proc]  # the process has ended: it has no children to list


class DiskMeter:
    """The bytes a job has written, measured by walking its folder: allocated blocks, not apparent sizes.

    Allocated blocks are what fills a disk: a sparse file of a terabyte holds none. Links are not
    followed, and each inode is counted once (a file hard-linked twice fills the disk once).

    Parameters
    ----------
    root
        The folder the job writes into (its work folder).
    exclude
        Paths under ``root`` that are not the job's writing (staged inputs: links of the dataset).
    files
        Single files outside ``root`` that count too (the job's log).
    """

    def __init__(self, root: Path, exclude: Collection[Path] = (), files: Collection[Path] = ()):
        self.root = Path(root)
        self.exclude = {str(Path(p)) for p in exclude}
        self.files = [Path(f) for f in files]

    def used_bytes(self) -> int:
        """The bytes allocated now to the job's files."""
        seen: set[tuple[int, int]] = set()
        total = 0
        for path in self.files:
            try:
                st = os.lstat(path)
            except OSError:
                continue  # not written yet
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
        folders = [str(self.root)]
        while folders:
            try:
                entries = os.scandir(folders.pop())
            except OSError:
                continue  # removed while walking, or unreadable: nothing the job can fill through it
            with entries:
                for entry in entries:
                    if entry.path in self.exclude:
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # removed between the listing and now
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    key = (st.st_dev, st.st_ino)
                    if key not in seen:
                        seen.add(key)
                        total += st.st_blocks * 512
        return total


def _tree_rss(procs: list[psutil.Process]) -> int:
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue  # the process ended between listing and measuring: it holds no memory now
    return total


def resident_bytes(pid: int) -> int:
    """Resident memory of a process and its descendants now, in bytes (0 once it has ended).

    What every memory limit of the harness counts (a job's, a bounded reader's): the pages a process
    tree holds, not the address space it reserves, which numerical libraries and thread pools reserve
    by the gigabyte without using it.
    """
    try:
        proc = psutil.Process(pid)
    except psutil.Error:
        return 0  # it has ended: it holds no memory
    return _tree_rss(_tree(proc))


def _high_water_mark_kb(pid: int) -> int:
    """Peak resident size of a process so far (``VmHWM``), in kB; 0 where /proc does not tell."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return 0  # the process has ended (or this is not Linux): the polled sizes stand alone
    return 0


def _alive(proc: psutil.Process) -> bool:
    """Whether a process still runs (a zombie has ended: it only waits for its parent to reap it)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False  # gone between the two questions


def _signal(procs: list[psutil.Process], sig: int) -> None:
    for p in procs:
        try:
            p.send_signal(sig)  # psutil checks that the pid still names the same process
        except psutil.Error:
            continue  # it has ended meanwhile: nothing to signal


def _sweep(seen: set[psutil.Process], timeout_s: float = 2.0) -> None:
    """Kill every process seen in the job's tree that still runs, and wait until they have ended.

    A child that left the job's process group (``setsid``) escapes ``killpg``; one seen while
    polling is killed here. In a sandbox the kernel kills the whole PID namespace when its PID 1
    ends; waiting for that PID 1 (which the launcher does not wait for) makes the job's end the
    end of all of its processes.
    """
    left = [p for p in seen if _alive(p)]
    _signal(left, signal.SIGKILL)
    deadline = time.perf_counter() + timeout_s
    while left and time.perf_counter() < deadline:
        time.sleep(0.002)
        left = [p for p in left if _alive(p)]


#: Bytes at the end of a job's log searched for its last line (a log can be gigabytes).
_LOG_TAIL_BYTES = 64 * 1024


def _last_error_line(log: Path) -> str:
    """The last non-blank line of a job's log (at most 500 characters), from its last bytes only."""
    try:
        text = read_tail(log, _LOG_TAIL_BYTES).decode(errors="replace")
    except OSError:
        return ""
    # NUL bytes (a sparse hole) are no text: a line made only of them is blank.
    lines = [line.strip(" \t\r\0") for line in text.splitlines()]
    lines = [line for line in lines if line]
    return lines[-1][:500] if lines else ""


class JoinedJob(Protocol):
    """A job started inside a running command (:func:`execute`'s ``joined``)."""

    #: Descriptors the command inherits.
    pass_fds: tuple[int, ...]

    def __call__(self, command_pid: int, log_fd: int, file_size: int | None) -> int | None:
        """Start the job in the command ``command_pid``, its output going to ``log_fd``, each file it writes
        capped at ``file_size`` bytes (``RLIMIT_FSIZE``; ``None``: no cap); return its pid (``None``: the
        command has ended)."""


class PeakReport:
    """A pipe on which a job's launcher reports its own peak resident size (``VmHWM``) as it ends.

    Sampling misses a peak reached after the last sample: a job that fills its memory and exits
    within one polling interval. The launcher (:data:`openpert.run.component.FAST_EXIT_LAUNCHER`)
    writes its high-water mark here last. The job could write anything here too, so the report
    only ever raises the sampled peak (a job can make itself look larger, never smaller).
    """

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()

    def close_writer(self) -> None:
        """Close this process's write end once the job holds its own (so the pipe can end)."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def peak_kb(self) -> int:
        """The largest number reported, in kB (0 when none); closes the pipe.

        Read without blocking: a process that escaped the job could still hold the write end.
        """
        self.close_writer()
        os.set_blocking(self.read_fd, False)
        try:
            text = os.read(self.read_fd, 1 << 16).decode("ascii", errors="replace")
        except BlockingIOError:
            text = ""  # nothing was written: the job ended before its launcher reported
        finally:
            os.close(self.read_fd)
        numbers = [int(word) for word in text.split() if word.isdigit()]
        return max(numbers, default=0)


#: Seconds between two counts of a job's processes while they grow, or are more than an eighth of
#: the limit (a fork bomb doubles in about a millisecond), and while they stay few.
PROCESS_POLL_S = 0.005
PROCESS_POLL_QUIET_S = 0.025
#: Fewest seconds between two walks of a job's folder for its disk use.
DISK_POLL_MIN_S = 0.05
#: A walk of the job's folder may take this share of the time between two walks, at most.
DISK_POLL_SHARE = 0.1


def size_limit_wrapper(disk_mb: float | None) -> list[str]:
    """The words put before a job's command to cap each file it writes at ``disk_mb`` (``RLIMIT_FSIZE``).

    util-linux's ``prlimit`` sets the limit on itself (soft and hard: the job cannot raise it) and
    runs the command in its place, so every process of the job inherits it; Python's
    ``preexec_fn`` would do the same but is unsafe in the harness's threads. Empty when there is no
    limit or no ``prlimit`` (the walk of the job's folder still enforces the total).
    """
    global _warned_no_prlimit
    if disk_mb is None:
        return []
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        if not _warned_no_prlimit:
            _warned_no_prlimit = True
            log_.warning("openpert: prlimit (util-linux) is not installed: a job's files are not capped one by one "
                         "(RLIMIT_FSIZE); its disk limit is enforced by walking its folder only")
        return []
    return [prlimit, f"--fsize={file_size_limit(disk_mb)}", "--"]


def file_size_limit(disk_mb: float | None) -> int | None:
    """The ``RLIMIT_FSIZE`` of a job with a disk limit of ``disk_mb``, in bytes (``None``: no limit)."""
    return int(disk_mb * 2**20) if disk_mb is not None else None


def execute(cmd: list[str], *, cwd: Path, log: Path, limits: Limits, env: Mapping[str, str] | None = None,
            poll_s: float = 0.1, sandboxed: bool = False, header: str = "", peak_report: PeakReport | None = None,
            disk: DiskMeter | None = None, joined: JoinedJob | None = None) -> tuple[int, str, float, float]:
    """Run ``cmd``, enforce limits, capture output.

    Parameters
    ----------
    cmd, cwd, env
        The command, its working folder and its environment (default: this process's).
    log
        Where stdout and stderr go (replaced).
    limits
        Time, memory, process and disk limits.
    poll_s
        The longest pause between two measurements.
    sandboxed
        ``cmd`` is a sandbox launcher (``bwrap``): the time limit's ``SIGTERM`` goes to its
        descendants only.
    header
        Lines written to the log before the command's output (e.g. a warning about the run).
    peak_report
        A pipe whose write end the command inherits and on which it reports its own peak
        resident size as it ends; it is closed here.
    disk
        What counts toward ``limits.disk_mb`` (default: everything under ``cwd``, and the log).
    joined
        The job is not ``cmd`` but a process that ``joined`` starts inside it once it runs (a fork
        server's job in the sandbox of a bubblewrap anchor, or beside an anchor without a sandbox:
        :mod:`openpert.run.forkserver`): it is watched beside ``cmd``'s tree, signalled with it, and
        ``cmd`` ends when it does. ``peak_report`` is passed to it rather than to ``cmd``. If it
        cannot start, ``cmd`` is killed and the error raised.

    Returns
    -------
    exit_code, reason, duration_s, peak_memory_mb
        The exit code follows the shell's convention for signals (``128 + signal``); a job killed
        for exceeding its memory limit exits 137, one stopped at its time limit 143, one killed
        for its process limit 150, one killed for its disk limit 153 (``128 + SIGXFSZ``).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    peak = 0
    reason = ""
    forced: int | None = None
    # Every process seen in the tree (psutil's identity is pid and start time: no reused pid).
    seen: set[psutil.Process] = set()
    if limits.disk_mb is not None:
        disk = disk if disk is not None else DiskMeter(cwd, files=[log])
        cmd = [*size_limit_wrapper(limits.disk_mb), *cmd]
    with open(log, "wb") as out:
        if header:
            out.write(header.encode())
            out.flush()
        report_fds = (peak_report.write_fd,) if peak_report is not None and joined is None else ()
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=dict(env) if env is not None else None, start_new_session=True,
                                    pass_fds=(*report_fds, *(joined.pass_fds if joined is not None else ())))
            _ACTIVE.add(proc.pid)
            job = None
            if joined is not None:
                try:
                    pid = joined(proc.pid, out.fileno(), file_size_limit(limits.disk_mb))
                except BaseException:
                    _kill_group(proc.pid, signal.SIGKILL)
                    proc.wait()
                    _ACTIVE.discard(proc.pid)
                    raise
                try:
                    job = psutil.Process(pid) if pid is not None else None
                except psutil.NoSuchProcess:
                    job = None  # it has ended already; the command ends with it
                if job is not None and not sandboxed:
                    _ACTIVE.add(job.pid)  # its session is not the command's (see the end)
        finally:
            if peak_report is not None:
                peak_report.close_writer()
        ps = psutil.Process(proc.pid)
        # Between two samples of memory and time, wait on the process itself (a pidfd becomes
        # readable when it exits), so that a finished job is noticed at once, not at the next poll.
        with _ExitWaiter(proc.pid) as exited:
            delay = 0.005
            kill_at: float | None = None
            status: int | None = None
            hwm_kb = 0
            next_disk_check = 0.0
            next_sample = 0.0
            # The process count alone is read every PROCESS_POLL_S (a few files of /proc); the
            # memory, time and disk samples follow their own, slower, rhythm.
            counting = limits.processes is not None and _PROC_CHILDREN
            known_processes = 0
            count_every = PROCESS_POLL_S
            while True:
                pid, wstatus, _ = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    status = wstatus
                    break
                descendants = _descendant_pids(proc.pid) + _joined_pids(job) if _PROC_CHILDREN else None
                if (forced is None and limits.processes is not None and descendants is not None
                        and len(descendants) + 1 > limits.processes):
                    # Counted before anything else is read of them: a fork bomb outgrows a slow sample.
                    reason = f"process limit {limits.processes} exceeded ({len(descendants) + 1} processes)"
                    forced = EXIT_PROCESSES
                    _kill_group(proc.pid, signal.SIGKILL)
                if descendants is not None:
                    # Counted often while the tree grows or is large, seldom while it stays small.
                    quiet = len(descendants) <= known_processes and (len(descendants) + 1) * 8 <= (limits.processes or 0)
                    count_every = PROCESS_POLL_QUIET_S if quiet else PROCESS_POLL_S
                    known_processes = len(descendants)
                elapsed = time.perf_counter() - start
                if elapsed < next_sample:
                    exited(min(count_every, next_sample - elapsed))
                    continue
                procs = _tree(ps, descendants)
                if not _PROC_CHILDREN and job is not None and _alive(job):
                    procs += [job, *job.children(recursive=True)]
                seen.update(procs[1:])
                peak = max(peak, _tree_rss(procs))
                # Every process's own high-water mark (the launcher's is not the job's).
                hwm_kb = max(hwm_kb, *(_high_water_mark_kb(p.pid) for p in procs))
                over_disk = None
                if forced is None and disk is not None and limits.disk_mb is not None and elapsed >= next_disk_check:
                    walk_start = time.perf_counter()
                    used = disk.used_bytes()
                    walked = time.perf_counter() - walk_start
                    next_disk_check = elapsed + max(DISK_POLL_MIN_S, walked / DISK_POLL_SHARE)
                    if used > limits.disk_mb * 2**20:
                        over_disk = used
                if forced is None and limits.processes is not None and len(procs) > limits.processes:
                    reason = f"process limit {limits.processes} exceeded ({len(procs)} processes)"
                    forced = EXIT_PROCESSES
                    _kill_group(proc.pid, signal.SIGKILL)
                    _signal(procs, signal.SIGKILL)
                elif over_disk is not None:
                    reason = (f"disk limit {limit_text('disk_mb', limits.disk_mb)} exceeded "
                              f"({format_bytes(over_disk)} written)")
                    forced = EXIT_DISK
                    _kill_group(proc.pid, signal.SIGKILL)
                elif forced is None and limits.memory_mb is not None and peak > limits.memory_mb * 2**20:
                    reason = f"memory limit exceeded (peak {peak / 2**20:.0f} MB > {limits.memory_mb:.0f} MB)"
                    forced = EXIT_MEMORY
                    _kill_group(proc.pid, signal.SIGKILL)
                elif forced is None and limits.time_s is not None and elapsed > limits.time_s:
                    reason = f"time limit exceeded ({limits.time_s:g} s)"
                    forced = EXIT_TIME
                    if sandboxed or job is not None:
                        _signal(procs[1:], signal.SIGTERM)
                    else:
                        _kill_group(proc.pid, signal.SIGTERM)
                    kill_at = elapsed + 5.0  # a grace period to clean up, then SIGKILL
                elif kill_at is not None and elapsed > kill_at:
                    _kill_group(proc.pid, signal.SIGKILL)
                    kill_at = None
                next_sample = elapsed + delay
                exited(min(delay, count_every) if counting else delay)
                delay = min(delay * 1.5, poll_s)
        proc.returncode = os.waitstatus_to_exitcode(status)
    # Children that outlive the script would keep writing into a work dir we are about to publish.
    _kill_group(proc.pid, signal.SIGKILL)
    if job is not None and not sandboxed:
        # A joined job outside a sandbox leads a session of its own, which no namespace's end takes with it.
        _kill_group(job.pid, signal.SIGKILL)
        _ACTIVE.discard(job.pid)
    _sweep(seen)
    _ACTIVE.discard(proc.pid)
    duration = time.perf_counter() - start
    # The processes' own high-water marks catch peaks between two polls. (ru_maxrss of wait4 would
    # not do: Linux carries the parent's resident size at fork across exec into it.)
    # What the job's launcher reported as it ended catches a peak after the last sample.
    reported_kb = peak_report.peak_kb() if peak_report is not None else 0
    peak_mb = max(peak / 2**20, hwm_kb / 1024, reported_kb / 1024)
    code = proc.returncode
    if code < 0:
        code = 128 - code
    if forced is None and disk is not None and limits.disk_mb is not None:
        # Written since the last walk, or stopped by the per-file cap (RLIMIT_FSIZE: SIGXFSZ, or EFBIG caught).
        used = disk.used_bytes()
        limit = limits.disk_mb * 2**20
        last = _last_error_line(log) if code != 0 else ""
        if used > limit or (code != 0 and (code == EXIT_DISK or used >= limit or "File too large" in last)):
            forced = EXIT_DISK
            reason = f"disk limit {limit_text('disk_mb', limits.disk_mb)} exceeded ({format_bytes(used)} written"
            reason += f"; a file reached the limit: {last})" if last else ")"
    if forced is not None:
        code = forced
    elif code != 0:
        reason = f"exited with code {code}: {_last_error_line(log)}"
    return code, reason, duration, peak_mb


def kill_active_jobs() -> None:
    """Kill the process groups of every job still running (used when a run is interrupted)."""
    for pid in list(_ACTIVE):
        _kill_group(pid, signal.SIGKILL)


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return  # the group has already gone
