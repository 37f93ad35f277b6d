"""Start sandboxed jobs as forks of a clean interpreter that has imported the scientific stack.

Most of a short job's time is its imports: ``import anndata`` alone (with pandas, scipy.sparse,
h5py and zarr) takes a second or more of CPU, and a benchmark or a test suite runs hundreds of
jobs. A fork server pays it once. It is a fresh interpreter, started with the environment of a job
(no variable of the harness's), which imports :data:`PRELOADED` and then only ever forks; it never
runs a job's code itself, so a job's fork holds nothing of another job.

How a job enters its sandbox
----------------------------
The sandbox is bubblewrap's, built exactly as for any job (:meth:`openpert.run.sandbox.Sandbox.command`),
but the command bubblewrap runs is :data:`ANCHOR`: a small process, PID 1 of the sandbox's PID
namespace, that waits for the job's exit code and exits with it, so that bubblewrap ends as the job
ends. Then:

1. the harness asks the server (one request on a socket pair, the job's log, peak-memory pipe and
   the anchor's status pipe passed along as file descriptors);
2. the server forks; the fork joins every namespace of the anchor at once (``setns`` on a pidfd:
   user, mount, PID, network, IPC, UTS, cgroup; the user namespace is bubblewrap's innermost, in
   which no further one can be made) and takes the anchor's root (``chroot``);
3. it forks again: the job, the second process of the sandbox's PID namespace. The job starts a
   session of its own, keeps only its log (stdout and stderr), ``/dev/null`` (stdin) and the
   peak-memory pipe, sets its file-size limit, drops every capability (bounding, ambient,
   permitted, effective; ``no_new_privs``; it checks in ``/proc/self/status`` that none is left),
   takes the job's environment and working folder, forgets the import system's view of the host,
   and runs the launcher (:data:`openpert.run.component.FAST_EXIT_LAUNCHER`) as ``python -c``
   would;
4. the middle process waits for the job and writes its exit code to the anchor.

The job's process is not a descendant of bubblewrap on the host: :func:`openpert.run.process.execute`
watches it (memory, processes, time) beside bubblewrap's tree, by the pid the server returns.
Killing bubblewrap kills the anchor, and with the PID 1 of its namespace the kernel kills the job.

A job without a sandbox
-----------------------
Where jobs run without a sandbox (a component test in its image's environment: its whole session
is sandboxed, and a sandbox cannot be made inside another), the command is the anchor itself and
the middle process joins nothing: the job is forked beside it with the harness's privileges, as a
fresh interpreter would run, in a session of its own that :func:`openpert.run.process.execute`
signals and kills beside the anchor.

What differs from a fresh interpreter, and why it is accepted: the preloaded modules are in
``sys.modules`` already (their import-time state was computed in the same environment); the
Python environment is bound at its own path in every sandbox (the modules were imported from
there); the hash seed of ``str`` is the server's (one per server, not one per job); the global
random state of numpy is reseeded from the operating system's entropy in each job, as a fresh
import would.

Where it is used: on Linux with pidfd ``setns`` (5.8 and later), in a process that runs several
jobs (``openpert run-component``, one job per process as Nextflow runs them, starts none), for
sandboxed jobs of the harness's own interpreter and for jobs without a sandbox. Elsewhere, or when
the probe (:func:`server_for`) fails, jobs start a fresh interpreter as before;
``$OPENPERT_FORKSERVER=off`` asks for that.
"""

from __future__ import annotations

import array
import atexit
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

log_ = logging.getLogger(__name__)

#: Modules the server imports before its first fork: what nearly every job imports, and the
#: slowest of it. (A module a job does not import still counts in its resident memory.)
PRELOADED = ("numpy", "scipy.sparse", "pandas", "h5py", "anndata")
#: Variables that change from one job to the next and that no preloaded module reads as it is imported
#: (pytest names the test that runs in one): the environment a server is started with leaves them out,
#: so that jobs outside a sandbox, which take the harness's environment, share a server.
PER_JOB_VARIABLES = frozenset({"PYTEST_CURRENT_TEST"})
#: The variable that turns the fork server off (``off``); anything else leaves it on where it works.
ENV_FORKSERVER = "OPENPERT_FORKSERVER"
#: The largest request (JSON) the server reads.
_MAX_REQUEST = 1 << 20
#: Seconds a request may wait for the server: its imports on first use, then a fork and ``setns``
#: (milliseconds). A server that does not answer in time is not used again.
START_TIMEOUT_S = 120.0

#: What bubblewrap runs: ``python -I -S -c ANCHOR STATUS_FD READY_FD``. PID 1 of the job's
#: namespace: it says on ``READY_FD`` that the sandbox is complete (bubblewrap gives its pid before
#: it has made the sandbox's root), reaps the processes the job orphans (``SIGCHLD`` ignored) and
#: exits with the exit code the server's middle process writes on ``STATUS_FD`` once the job has
#: ended (125 if it ends without one).
ANCHOR = """\
import os, signal, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
os.write(int(sys.argv[2]), b"ready")
os.close(int(sys.argv[2]))
code = os.read(int(sys.argv[1]), 16).strip()
os._exit(int(code) if code.isdigit() else 125)
"""

#: The server: ``python -c SERVER SOCKET_FD LAUNCHER MODULE...``.
SERVER = r'''
import array, atexit, ctypes, importlib, json, os, resource, socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
LAUNCHER = sys.argv[2]
for name in sys.argv[3:]:
    try:
        importlib.import_module(name)
    except ImportError:
        continue  # not installed in this environment: the jobs that need it fail as they would anyway
del name
libc = ctypes.CDLL(None, use_errno=True)
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
FDS = 3  # the job's log, its peak-memory pipe, the anchor's status pipe


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def drop_capabilities():
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        last = int(fh.read())
    for cap in range(last + 1):
        check(libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0), f"dropping capability {cap}")
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    check(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    with open("/proc/self/status") as fh:
        left = [line.split(":")[0] for line in fh
                if line.startswith(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")) and int(line.split()[1], 16)]
    if left:
        raise OSError(f"capabilities left after dropping them: {', '.join(left)}")


def job(request, log, report):
    """The job's process: in its sandbox already, if it has one; becomes the job (never returns)."""
    try:
        os.setsid()
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.dup2(report, 3)
        os.closerange(4, 2**31 - 1)  # close_range(2): whatever the server held
        if request["fsize"] is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (request["fsize"], request["fsize"]))
        if request["join"]:
            drop_capabilities()  # those of the sandbox's user namespace (outside one, the harness's own stay)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        if request["join"]:
            os.environ["PWD"] = request["cwd"]  # as bubblewrap (--chdir) sets it for the command it runs
        # Where a fresh interpreter puts PYTHONPATH (sandbox folders, which the server did not import
        # from); what the server's import system cached was seen from the host.
        sys.path[1:1] = [folder for folder in request["env"].get("PYTHONPATH", "").split(os.pathsep) if folder]
        sys.path_importer_cache.clear()
        importlib.invalidate_caches()
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()  # fresh entropy, as a fresh import would take
        sys.argv = ["-c", "3", str(request["tasks"]), *request["argv"]]
        code = compile(LAUNCHER, "<string>", "exec")
    except BaseException as err:
        os.write(2, f"openpert fork server: the job could not start in its sandbox: {err!r}\n".encode())
        os._exit(126)
    del request
    # As the interpreter's top level would: the launcher exits by itself once the script has
    # returned; an exception is shown (without this server's frames) and exits 1, SystemExit
    # exits with its code.
    try:
        exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
        status = 0
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
        if not isinstance(stop.code, int) and stop.code is not None:
            print(stop.code, file=sys.stderr)
    except BaseException as err:
        err = err.with_traceback(err.__traceback__.tb_next)  # from the launcher's frame on
        sys.excepthook(type(err), err, err.__traceback__)
        status = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status & 0xFF)


def middle(request, fds, reply):
    """Join the anchor's namespaces and root (if it is in a sandbox), fork the job, wait for it, tell the
    anchor (never returns)."""
    log, report, status = fds
    try:
        sock.close()
        if request["join"]:
            anchor = int(request["anchor"])
            pidfd = os.pidfd_open(anchor)
            root = os.open(f"/proc/{anchor}/root", os.O_PATH | os.O_DIRECTORY)
            check(libc.setns(pidfd, NAMESPACES), "setns")
            os.fchdir(root)
            os.chroot(".")
            os.close(root)
            os.close(pidfd)
        child = os.fork()
        if child == 0:
            try:
                os.close(reply)
                os.close(status)
                job(request, log, report)
            finally:
                os._exit(126)  # job() never returns; nothing may go back up into the server's code
        os.close(log)
        os.close(report)
        os.write(reply, str(child).encode())
        os.close(reply)
    except BaseException as err:
        os.write(reply, f"error {err!r}".encode())
        os._exit(1)
    _, wait_status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(wait_status)
    try:
        os.write(status, str(128 - code if code < 0 else code).encode())
    except OSError:
        os._exit(1)  # the anchor has gone: the sandbox was stopped, and the harness knows why
    os._exit(0)


def reap():
    """Reap the middle processes of jobs that have ended."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            continue
    except ChildProcessError:
        return  # no middle process is left


while True:
    reap()
    fds = array.array("i")
    message, ancillary, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(FDS * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    if not message:
        break  # the harness has closed its end
    if len(fds) != FDS:
        for fd in fds:
            os.close(fd)
        sock.send(f"error expected {FDS} file descriptors, got {len(fds)}".encode())
        continue
    request = json.loads(message)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            middle(request, list(fds), write_end)
        finally:
            os._exit(1)  # middle() never returns; a fork must not go on as the server
    os.close(write_end)
    for fd in fds:
        os.close(fd)
    answer = b""
    while chunk := os.read(read_end, 4096):
        answer += chunk
    os.close(read_end)
    sock.send(answer or b"error the middle process ended without an answer")

# The harness ended without closing this server (ForkServer.close kills it first), so nobody else removes
# its folder, this process's working folder: the log of its errors, which nobody will read now.
folder = os.getcwd()
for name in os.listdir(folder):
    os.unlink(os.path.join(folder, name))
os.rmdir(folder)
'''


class ForkServerError(RuntimeError):
    """The fork server could not start a job (the job did not run)."""


class ForkServer:
    """One fork server: a clean interpreter with :data:`PRELOADED` imported, for jobs of one environment.

    Parameters
    ----------
    env
        The server's environment: a job's (:func:`openpert.run.sandbox.job_environment`), so that
        what the preloaded modules read at import is what a job would have given them; but not
        ``PYTHONPATH``, whose folders are the sandbox's (each job puts them on its ``sys.path``).
    launcher
        The code each job runs as ``python -c`` would
        (:data:`openpert.run.component.FAST_EXIT_LAUNCHER`).
    """

    def __init__(self, env: Mapping[str, str], launcher: str):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.settimeout(START_TIMEOUT_S)
        self._lock = threading.Lock()
        self._folder = tempfile.TemporaryDirectory(prefix="openpert-forkserver-")
        # A file rather than a pipe: nobody reads the server's errors until it fails.
        self._stderr = Path(self._folder.name) / "stderr.log"
        try:
            with open(self._stderr, "wb") as stderr:
                self._process = subprocess.Popen(
                    [sys.executable, "--check-hash-based-pycs", "always", "-c", SERVER, str(theirs.fileno()), launcher,
                     *PRELOADED],
                    env={k: v for k, v in env.items() if k != "PYTHONPATH"}, cwd=self._folder.name,
                    pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                    start_new_session=True)
        finally:
            theirs.close()
        self._socket = ours

    def start(self, *, anchor: int, argv: list[str], env: Mapping[str, str], cwd: str, tasks: int | None,
              fsize: int | None, log_fd: int, report_fd: int, status_fd: int, join: bool) -> int:
        """Fork a job into the sandbox whose PID 1 is ``anchor`` (a host pid); return the job's host pid.

        Parameters
        ----------
        anchor
            The host pid of the sandbox's :data:`ANCHOR` (or of an anchor outside any sandbox: ``join``).
        argv
            The script (a sandbox path) and its arguments.
        env, cwd
            The job's whole environment and its working folder (a sandbox path).
        tasks
            The job's ``RLIMIT_NPROC`` (``None``: not set; :func:`openpert.run.component.task_limit`).
        fsize
            The job's ``RLIMIT_FSIZE`` in bytes (``None``: not set).
        log_fd, report_fd, status_fd
            The job's log (its stdout and stderr), its peak-memory pipe, and the anchor's status pipe.
        join
            Join the anchor's namespaces and root, and drop every capability; ``False``: the job has no
            sandbox and runs as the harness's own process would (a fresh interpreter's privileges).

        Raises
        ------
        ForkServerError
            When the server has gone or the job could not join its sandbox.
        """
        request = json.dumps({"anchor": anchor, "argv": argv, "env": dict(env), "cwd": cwd, "join": join,
                              "tasks": -1 if tasks is None else tasks, "fsize": fsize}).encode()
        if len(request) > _MAX_REQUEST:
            raise ForkServerError(f"the job's request is {len(request)} bytes, more than the server reads")
        fds = array.array("i", [log_fd, report_fd, status_fd])
        with self._lock:
            try:
                self._socket.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
                answer = self._socket.recv(4096).decode(errors="replace")
            except OSError as err:
                raise ForkServerError(f"the fork server is not answering: {err}{self._server_error()}") from err
        if not answer:
            raise ForkServerError(f"the fork server has ended{self._server_error()}")
        if not answer.isdigit():
            raise ForkServerError(f"the fork server could not start the job: {answer.removeprefix('error ')}")
        return int(answer)

    def _server_error(self) -> str:
        if self._process.poll() is None:
            return ""
        lines = self._stderr.read_text(errors="replace").strip().splitlines()
        return f" (exit {self._process.returncode}: {lines[-1]})" if lines else f" (exit {self._process.returncode})"

    def close(self) -> None:
        """End the server at once (jobs it started run on).

        Closing its socket would end an idle server, but one still importing :data:`PRELOADED`
        (a server retired or closed before it served) would first spend its second of CPU on
        imports nobody uses. The server holds nothing a job needs: its middle processes and their
        jobs are processes of their own, which its end does not stop. (It is killed before its
        socket closes: a server that sees its socket close removes its folder itself.)
        """
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        self._socket.close()
        self._folder.cleanup()


class JobStart:
    """How :func:`openpert.run.process.execute` starts one job through a fork server.

    In a sandbox (``sandboxed``), the command it runs is bubblewrap with :data:`ANCHOR`
    (:meth:`anchor_argv`); bubblewrap writes the anchor's host pid on :attr:`info_fd`
    (``--info-fd``) and passes the anchor :attr:`status_fd`. Without one, the command is the anchor
    itself, and the job is forked beside it with the harness's privileges and namespaces, as a
    fresh interpreter would run.
    """

    def __init__(self, server: ForkServer, *, argv: list[str], env: Mapping[str, str], cwd: str, tasks: int | None,
                 report_fd: int, sandboxed: bool):
        self.server = server
        self.argv, self.env, self.cwd, self.tasks, self.report_fd = argv, dict(env), cwd, tasks, report_fd
        self.sandboxed = sandboxed
        self._info_read, self.info_fd = os.pipe() if sandboxed else (-1, -1)
        self.status_fd, self._status_write = os.pipe()
        self._ready_read, self.ready_fd = os.pipe()

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """The descriptors the command (bubblewrap, or the anchor without a sandbox) inherits."""
        return (self.info_fd, self.status_fd, self.ready_fd) if self.sandboxed else (self.status_fd, self.ready_fd)

    def anchor_argv(self, python: str) -> list[str]:
        """The anchor's command line (``python`` is the interpreter's path where the anchor runs)."""
        return [python, "-I", "-S", "-c", ANCHOR, str(self.status_fd), str(self.ready_fd)]

    def __call__(self, command_pid: int, log_fd: int, file_size: int | None) -> int | None:
        """Once the command (``command_pid``) runs: fork the job into its sandbox, if it has one (its log
        ``log_fd``, its files capped at ``file_size`` bytes); return the job's host pid.

        ``None`` when bubblewrap or the anchor ended before the sandbox was complete: their own
        error, in the job's log, is the job's (a fresh interpreter would not have started either).
        """
        try:
            for fd in self.pass_fds:
                os.close(fd)
            # bubblewrap says where its sandbox is before the anchor says it is complete.
            info = _read_all(self._info_read) if self.sandboxed else b""
            if (self.sandboxed and not info) or _read_all(self._ready_read) != b"ready":
                return None
            anchor = _sandbox_anchor(info) if self.sandboxed else command_pid
            return self.server.start(anchor=anchor, argv=self.argv, env=self.env, cwd=self.cwd, tasks=self.tasks,
                                     fsize=file_size, log_fd=log_fd, report_fd=self.report_fd,
                                     status_fd=self._status_write, join=self.sandboxed)
        finally:
            for fd in (self._info_read, self._status_write, self._ready_read):
                if fd >= 0:
                    os.close(fd)


def _sandbox_anchor(info: bytes) -> int:
    """The host pid of the sandbox's anchor, from what bubblewrap wrote on ``--info-fd``."""
    try:
        return int(json.loads(info)["child-pid"])
    except (ValueError, KeyError, TypeError) as err:
        raise ForkServerError(f"bubblewrap did not say where its sandbox is ({info[:200]!r})") from err


def _read_all(fd: int) -> bytes:
    """What is written on a pipe until its write ends close."""
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    return data


#: Servers by their environment (the CPU count's thread variables, the BLAS kernel's settings...).
_servers: dict[frozenset[tuple[str, str]], ForkServer | None] = {}
_servers_lock = threading.Lock()


def enabled(host_env: Mapping[str, str] = os.environ) -> bool:
    """Whether jobs may start through a fork server here (Linux with pidfds; not turned off)."""
    return (sys.platform == "linux" and hasattr(os, "pidfd_open")
            and host_env.get(ENV_FORKSERVER, "").strip().lower() != "off")


def server_for(env: Mapping[str, str], launcher: str) -> ForkServer | None:
    """The fork server started with ``env`` (started on first use), or ``None`` where there is none.

    ``env`` is the environment jobs share before each is given its own variables
    (:func:`openpert.run.sandbox.job_environment` without a job's caches or model, or the harness's
    own outside a sandbox, less :data:`PER_JOB_VARIABLES`): their CPU count's thread variables and
    the host's BLAS kernel settings, which the preloaded modules read as they are imported. Jobs of
    another environment get a server of their own.
    """
    if not enabled():
        return None
    env = {name: value for name, value in env.items() if name not in PER_JOB_VARIABLES}
    key = frozenset(env.items())
    with _servers_lock:
        if key not in _servers:
            try:
                _servers[key] = ForkServer(env, launcher)
            except OSError as err:
                log_.warning("openpert: no fork server (%s); jobs start a fresh interpreter", err)
                _servers[key] = None
        return _servers[key]


def retire(server: ForkServer) -> None:
    """Stop using a server that failed (its environment gets no other: those jobs start fresh interpreters)."""
    with _servers_lock:
        for key, known in list(_servers.items()):
            if known is server:
                _servers[key] = None
    server.close()


def close_all() -> None:
    """End every fork server of this process (called at exit)."""
    with _servers_lock:
        servers = [s for s in _servers.values() if s is not None]
        _servers.clear()
    for server in servers:
        server.close()


atexit.register(close_all)
