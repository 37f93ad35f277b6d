"""Run ``openpert run-component`` commands one after another in this one process.

The generators of the test resources run a dozen component jobs each. As separate ``openpert``
commands, every job also starts a harness process that imports anndata and pandas to validate the
job's files, and a reader process for the files validated under a memory limit
(:mod:`openpert.config.bounded`): two interpreters per job beside the job's own, more than half of
a generator's processor time. Here the harness starts once and keeps its readers from one job to the
next; each command is still exactly ``openpert run-component ARGS`` (:func:`openpert.cli.main`),
with its own work folder, sandbox, limits and validation, so it writes the same files.

Protocol (``run_component.bash`` speaks it): a request on stdin is the number of arguments, then
each argument, every field ended by a NUL byte (NUL is the one byte no argument holds); the answer on
stdout is the command's exit status and a newline. The commands' own output goes to stderr. The
process ends at the end of its input.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import BinaryIO


def _field(stream: BinaryIO) -> bytes | None:
    """The next NUL-terminated field of ``stream``; ``None`` at the end of the input."""
    data = bytearray()
    while (byte := stream.read(1)) != b"\0":
        if not byte:
            if data:
                raise ValueError(f"run_component_server: the input ends inside a request ({bytes(data)!r})")
            return None
        data += byte
    return bytes(data)


def requests(stream: BinaryIO) -> Iterator[list[str]]:
    """Each request of ``stream``: the arguments of one ``openpert run-component`` command.

    Raises
    ------
    ValueError
        When a request's count is not a number, or the input ends inside a request.
    """
    while (count := _field(stream)) is not None:
        if not count.isdigit():
            raise ValueError(f"run_component_server: a request starts with its number of arguments, not {count!r}")
        args = []
        for _ in range(int(count)):
            field = _field(stream)
            if field is None:
                raise ValueError(f"run_component_server: the input ends after {len(args)} of {int(count)} arguments")
            args.append(os.fsdecode(field))
        yield args


def exit_status(code: object) -> int:
    """The exit status of a ``SystemExit`` code, as the interpreter would exit with it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # argparse's errors and sys.exit("message") exit with status 1, after printing it
    return 1


def serve(requests_in: BinaryIO, answers: BinaryIO) -> None:
    """Run each request of ``requests_in`` as ``openpert run-component ARGS``; answer its exit status."""
    from openpert.cli import main as openpert

    for args in requests(requests_in):
        try:
            status = openpert(["run-component", *args])
        except SystemExit as stop:  # argparse's refusal of a component's arguments
            status = exit_status(stop.code)
        sys.stderr.flush()
        answers.write(f"{status}\n".encode())
        answers.flush()


if __name__ == "__main__":
    # The answers keep the original stdout; whatever else writes to stdout (this process, the jobs it
    # starts) writes to stderr, so that it cannot be taken for an answer.
    answers_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, answers_out)
