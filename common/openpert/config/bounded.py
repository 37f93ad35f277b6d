"""Validate a file in a process of its own, under a memory limit: for files the harness must not read itself.

:meth:`openpert.config.formats.FileFormat.validate` reads a file in the harness's process only when
the file's metadata bounds what reading it takes to a little (:data:`~openpert.config.formats.IN_PROCESS_BYTES`).
A larger file, or one whose reading metadata cannot bound (parquet, whose page headers and
dictionaries may declare more than its footer; an HDF5 chunk that inflates beyond its declared
size), is checked by a reader process (``python -m openpert.config.bounded``) that reads the file
and answers with its problems as one JSON line. Its memory is limited as a job's is
(:func:`openpert.run.process.resident_bytes`): while it reads, the harness samples its resident
size every :data:`MEMORY_POLL_S` and kills it once that rose by more than the validation's memory
(plus :data:`SLACK_BYTES`); the reader's own high-water mark, reset before each request and sent
with the answer, catches a peak between two samples. A file that needs more memory is refused
there, not read in the harness; a read that takes longer than :data:`TIMEOUT_S` is stopped with
its reader. (Not ``RLIMIT_AS``: an address-space limit counts what arrow, HDF5 and glibc reserve
without touching, and would limit no process but the reader itself.)

Starting a reader and importing anndata and pyarrow costs a second or two, so readers are kept
for the next request (a few, for validations running at once) as long as their reads stay small:
one whose memory grew by more than :data:`RECYCLE_BYTES`, or that ran out, exits after answering.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd

from openpert.config.formats import IN_PROCESS_BYTES, FileFormat, FormatError, MatchRule, compared_attribute
from openpert.files import format_bytes
from openpert.run.process import resident_bytes

#: Longest a bounded read may take (s).
TIMEOUT_S = 1800
#: Resident memory allowed above the validation's memory: allocator arenas, readers' buffers.
SLACK_BYTES = 256 * 2**20
#: Seconds between two samples of a reader's resident memory while it reads.
MEMORY_POLL_S = 0.01
#: A reader whose resident memory rose by more than this in one request exits after it (freed
#: memory is not always returned to the system, and the next limit counts from what it maps).
RECYCLE_BYTES = 256 * 2**20
#: Longest a reader may take to import its modules and say it is ready (s).
STARTUP_TIMEOUT_S = 300
#: The line a reader writes once its modules are imported.
_READY = b'{"ready": true}\n'
#: Readers kept waiting for a request.
MAX_IDLE_READERS = 4
#: One thread reads a file: numerical libraries' thread pools would only add buffers.
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
#: Largest answer of values a reader sends back (the names a rule compares).
ATTRIBUTE_MAX_BYTES = IN_PROCESS_BYTES // 4
#: Largest answer line read from a reader; a longer one is not an answer, and its reader is stopped.
_ANSWER_MAX_BYTES = ATTRIBUTE_MAX_BYTES + 2**20


class BoundedReadError(Exception):
    """No verdict: the file needs more memory or time than allowed, or killed its reader."""


def problems_in_bounded_process(fmt: FileFormat, path: Path, others: list[tuple[MatchRule, Path]], *,
                                memory_bytes: int, timeout_s: float = TIMEOUT_S) -> list[str]:
    """:meth:`FileFormat.problems` of ``path``, run in a reader limited to ``memory_bytes`` more memory.

    Parameters
    ----------
    fmt
        The file's format.
    path
        The file.
    others
        The shape rules to check, each with its other file.
    memory_bytes
        Memory the reading may take beyond the reader's own (its modules).
    timeout_s
        Longest the reading may take.

    Returns
    -------
    list of str
        The problems found (empty: the file is valid).

    Raises
    ------
    FormatError
        When the file cannot be read as its type (as in process).
    BoundedReadError
        When reading it needs more memory or time than allowed, or the reader died.
    """
    request = {"mode": "problems", "format": fmt.to_dict(), "path": str(path),
               "others": [[dataclasses.asdict(rule), str(other)] for rule, other in others]}
    answer = _ask(request, memory_bytes, timeout_s)
    if "format_error" in answer:
        # A reader that fails for want of memory does not always say so (HDF5: "filter returned failure").
        raise FormatError(f"{answer['format_error']} (read in a process limited to {format_bytes(memory_bytes)} of memory)")
    return list(answer["problems"])


def attribute_in_bounded_process(path: Path, name: str, *, memory_bytes: int, timeout_s: float = TIMEOUT_S) -> Any:
    """A ``matches`` attribute of a file too large to read here, as shape rules compare it.

    The reader reads it (:func:`openpert.config.formats.compared_attribute`) and answers with its
    values; an answer larger than :data:`ATTRIBUTE_MAX_BYTES` is refused there, so that what comes
    back is bounded too.

    Returns
    -------
    A scalar, or a ``pandas.Index`` of strings.

    Raises
    ------
    KeyError
        When the file has no such attribute.
    BoundedReadError
        When the file cannot be read, or reading it needs more memory or time than allowed, or the
        attribute's values are larger than :data:`ATTRIBUTE_MAX_BYTES`.
    """
    answer = _ask({"mode": "attribute", "path": str(path), "name": name}, memory_bytes, timeout_s)
    if "missing" in answer:
        raise KeyError(answer["missing"])
    if "unreadable" in answer:
        raise BoundedReadError(answer["unreadable"])
    if "values" in answer:
        return pd.Index(answer["values"], dtype=object)
    return answer["scalar"]


# --- the harness's side -----------------------------------------------------------------------------
class _Reader:
    """One reader process: requests on its stdin, answers on its stdout, one JSON line each."""

    def __init__(self) -> None:
        # stderr goes nowhere: nothing reads it while the reader waits, and a full pipe would block it.
        self.proc = subprocess.Popen([sys.executable, "-m", "openpert.config.bounded"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_environment())
        #: The last request made the reader's resident memory rise beyond its limit: it was killed.
        self.over_memory = False
        # Its modules are imported before it says it is ready, so that no limit counts them.
        self.limit_bytes = math.inf
        self.ready = self._line(time.monotonic() + STARTUP_TIMEOUT_S) == _READY

    def ask(self, request: dict, timeout_s: float, memory_bytes: int) -> dict | None:
        """Send one request; the answer, or ``None`` when the reader died, ran out of time or over its memory (it is then stopped)."""
        if not self.ready:
            self.stop()
            return None
        # The limit counts from what the reader holds now (its modules, what earlier reads left).
        self.limit_bytes = resident_bytes(self.proc.pid) + int(memory_bytes) + SLACK_BYTES
        self.over_memory = False
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            self.stop()
            return None
        line = self._line(time.monotonic() + timeout_s)
        if line is None:
            self.stop()
            return None
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            answer = None
        if not isinstance(answer, dict):
            self.stop()
            return None
        return answer

    def _line(self, deadline: float) -> bytes | None:
        fd = self.proc.stdout.fileno()
        got = b""
        while not got.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or len(got) > _ANSWER_MAX_BYTES:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, MEMORY_POLL_S))
            if resident_bytes(self.proc.pid) > self.limit_bytes:
                self.over_memory = True
                self.proc.kill()
                return None
            if not ready:
                continue
            block = os.read(fd, 1 << 16)
            if not block:
                return None  # the reader ended
            got += block
        return got

    def stop(self) -> None:
        """End the reader (closing its stdin ends it between requests; a kill otherwise)."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                continue  # already closed with a dead pipe: nothing left to release

    def exit_description(self) -> str:
        code = self.proc.poll()
        if code is None or code == 0:
            return "gave no answer"
        return f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"


_IDLE: list[_Reader] = []
_IDLE_LOCK = threading.Lock()


def _ask(request: dict, memory_bytes: int, timeout_s: float) -> dict:
    """Have a reader answer ``request``; its answer, or :class:`BoundedReadError` when it gave none."""
    with _IDLE_LOCK:
        reader = _IDLE.pop() if _IDLE else None
    if reader is None or reader.proc.poll() is not None:
        reader = _Reader()
    limit = f"its memory limit of {format_bytes(memory_bytes)}"
    start = time.monotonic()
    answer = reader.ask(request, timeout_s, memory_bytes)
    if answer is None:
        if reader.over_memory:
            raise BoundedReadError(f"reading it needs more than {limit}: refused (the reader was stopped)")
        if time.monotonic() - start >= timeout_s:
            raise BoundedReadError(f"reading it took more than {timeout_s:g} s (within {limit}): refused")
        raise BoundedReadError(f"the process reading it (within {limit}) {reader.exit_description()}: refused")
    # A peak between two samples: the reader's own high-water mark of this request tells.
    over_peak = int(answer.get("rise_bytes") or 0) > int(memory_bytes) + SLACK_BYTES
    if answer.get("recycle") or over_peak:
        reader.stop()
    else:
        with _IDLE_LOCK:
            keep = len(_IDLE) < MAX_IDLE_READERS
            if keep:
                _IDLE.append(reader)
        if not keep:
            reader.stop()
    if over_peak:
        raise BoundedReadError(f"reading it needs more than {limit} (its peak rose by "
                               f"{format_bytes(int(answer['rise_bytes']))}): refused")
    if answer.get("memory"):
        raise BoundedReadError(f"reading it needs more than {limit} ({answer.get('error', 'MemoryError')}): refused")
    return answer


@atexit.register
def stop_readers() -> None:
    """End the idle readers (they also end on their own when this process does: their stdin closes)."""
    with _IDLE_LOCK:
        readers, _IDLE[:] = list(_IDLE), []
    for reader in readers:
        reader.stop()


def _environment() -> dict[str, str]:
    """The reader's environment: this one, the harness importable, one thread, a plain allocator."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH", "")]))
    for var in _THREAD_VARIABLES:
        env[var] = "1"
    # Freed memory goes back to the system sooner with few glibc arenas and arrow's system pool
    # (jemalloc keeps it), so that a reader's next limit starts from what it really holds.
    env["MALLOC_ARENA_MAX"] = "2"
    env["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    return env


# --- the reader -----------------------------------------------------------------------------------
def _status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None  # no /proc: the caller falls back
    return None


def _reset_peak() -> bool:
    """Reset this process's resident high-water mark (``VmHWM``); whether it could."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def _import_readers() -> None:
    """Import every reader before any limit: their code is the process's, not a file's."""
    import anndata  # noqa: F401
    import h5py  # noqa: F401
    import pyarrow as pa
    import pyarrow.parquet  # noqa: F401

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


def _memory_error(err: BaseException | None) -> BaseException | None:
    """The deepest of ``err`` and what it arose from that is a failure to allocate memory, else ``None``.

    The deepest: the reader's own error (``ArrowMemoryError: malloc of size ... failed``), not the
    message that wraps it.
    """
    seen, found = set(), None
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        text = str(err).lower()
        if isinstance(err, MemoryError) or ("memory" in text and "alloc" in text):
            found = err
        err = err.__cause__ or err.__context__
    return found


def _validate(request: dict) -> dict:
    fmt = FileFormat.from_dict(request["format"])
    others = [(MatchRule(**rule), Path(other)) for rule, other in request["others"]]
    return {"problems": fmt.problems(Path(request["path"]), others, bounded=True)}


def _attribute(request: dict) -> dict:
    path = Path(request["path"])
    try:
        value = compared_attribute(path, request["name"], bounded=True)
    except KeyError as err:
        return {"missing": str(err.args[0]) if err.args else request["name"]}
    except Exception as err:  # noqa: BLE001 - unreadable: the answer says why (a memory failure included)
        if _memory_error(err) is not None:
            raise MemoryError(str(err)) from err
        return {"unreadable": str(err)}
    if not isinstance(value, pd.Index):
        return {"scalar": value.item() if hasattr(value, "item") else value}
    values = [str(v) for v in value]
    size = sum(len(v) + 4 for v in values)
    if size > ATTRIBUTE_MAX_BYTES:
        return {"unreadable": f"{path}: its {request['name']} holds {format_bytes(size)}; at most "
                              f"{format_bytes(ATTRIBUTE_MAX_BYTES)} of it is compared"}
    return {"values": values}


def _answer(request: dict) -> dict:
    """The answer to one request (the harness watches its memory)."""
    try:
        return _attribute(request) if request["mode"] == "attribute" else _validate(request)
    except (FormatError, MemoryError) as err:
        cause = _memory_error(err)
        if cause is None:
            return {"format_error": str(err)}
        return {"memory": True, "error": f"{type(cause).__name__}: {str(cause)[:160]}"}


def main() -> None:
    """Answer requests (one JSON line each, on stdin) until stdin ends or a read was large."""
    answers = os.fdopen(os.dup(1), "w")
    # Whatever a library prints must not be taken for an answer.
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    sys.stdout = sys.stderr
    _import_readers()
    answers.write(_READY.decode())
    answers.flush()
    for line in sys.stdin:
        request = json.loads(line)
        # The high-water mark of this request alone; where it cannot be reset, what stays resident.
        peak_key = "VmHWM" if _reset_peak() else "VmRSS"
        before = _status_kb("VmRSS") or 0
        answer = _answer(request)
        rise = ((_status_kb(peak_key) or 0) - before) * 1024
        answer["peak_mb"] = round((_status_kb("VmHWM") or 0) / 1024, 1)
        answer["rise_bytes"] = max(0, rise)
        # After a large read or a failed allocation, a fresh reader is a cleaner start.
        answer["recycle"] = bool(rise > RECYCLE_BYTES or answer.get("memory"))
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
        if answer["recycle"]:
            break


if __name__ == "__main__":
    main()
