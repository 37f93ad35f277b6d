"""Every failed check of a CI run in one line with its fix, as Markdown.

A pull request's author should see what failed and what to do without opening a log. This module
reads what the checks leave behind (ruff's and actionlint's one-line output, ``openpert lint``'s
output, pytest's JUnit XML, a benchmark's ``results.json``, ``scripts/test_images.sh``'s output)
and writes one line per failure:
what failed, where, and the command that fixes or reproduces it. CI appends it to the job summary
(``$GITHUB_STEP_SUMMARY``). An output that is missing (its step never ran) or unreadable is a line
too: the summary never claims a check passed that it could not read.

It is the workflows' tool, not the harness's: ``python tests/tooling/ci_summary.py --ruff ruff.txt ... -o
"$GITHUB_STEP_SUMMARY"`` (the standard library only, so any Python of the job runs it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path

#: ruff's concise output: ``path:line:col: CODE [*] message`` (``[*]``: ``--fix`` repairs it).
_RUFF = re.compile(r"^(?P<where>[^:\s][^:]*:\d+:\d+): (?P<code>[A-Z]+\d+) (?P<fixable>\[\*\] )?(?P<message>.+)$")
#: actionlint's default output: ``path:line:col: message [rule]``.
_ACTIONLINT = re.compile(r"^(?P<where>[^:\s][^:]*:\d+:\d+): (?P<message>.+?)(?: \[(?P<rule>[a-z-]+)\])?$")
#: Lines of ``openpert lint`` that are totals, not problems.
_LINT_TOTALS = re.compile(r"^(layout: \d+ violation|\d+ problem\(s\)$|no problems found$)")
#: Exit codes of jobs stopped at a limit (``openpert.run.records``): time 143, memory 137, disk 153.
_LIMIT_EXITS = (143, 137, 153)
#: A job's reason when it was stopped at a limit (``openpert.run.process``).
_LIMIT_REASON = re.compile(r"\b(time|memory|disk) limit (\S+ )?exceeded")
#: The fix of a job stopped at a limit: rerunning it would stop at the same limit; the reason names the label to raise.
_LIMIT_FIX = "a larger resource label in `{config}`, as the reason says, or a faster, smaller component"
#: Longest message kept on a line: the summary points at the problem, the log holds the rest.
MESSAGE_MAX = 300


@dataclasses.dataclass(frozen=True)
class Failure:
    """One failed check: which tool, where, what, and the command that fixes or reproduces it."""

    check: str
    where: str
    message: str
    fix: str

    def markdown(self) -> str:
        """The failure as one Markdown list item."""
        where = f" `{self.where}`" if self.where else ""
        return f"- **{self.check}**{where}: {_one_line(self.message)} — fix: {self.fix}"


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= MESSAGE_MAX else line[: MESSAGE_MAX - 1] + "…"


def _read(path: Path, check: str) -> tuple[str | None, list[Failure]]:
    """The text of a check's output, or a failure saying why it cannot be read."""
    try:
        return path.read_text(errors="replace"), []
    except FileNotFoundError:
        return None, [Failure(check, str(path), "no output: the step did not run (an earlier step failed)",
                              "fix the failures above, then push again")]
    except OSError as err:
        return None, [Failure(check, str(path), f"output not readable: {err}", "rerun the job")]


def ruff_failures(path: Path) -> list[Failure]:
    """Problems in ruff's ``--output-format=concise`` output."""
    text, failures = _read(path, "ruff")
    for line in (text or "").splitlines():
        match = _RUFF.match(line.strip())
        if match:
            fix = "`ruff check --fix .`" if match["fixable"] else f"edit the line (`ruff rule {match['code']}` explains the rule)"
            failures.append(Failure("ruff", match["where"], f"{match['code']} {match['message']}", fix))
    return failures


def actionlint_failures(path: Path) -> list[Failure]:
    """Problems in actionlint's output."""
    text, failures = _read(path, "actionlint")
    for line in (text or "").splitlines():
        match = _ACTIONLINT.match(line.strip())
        if match:
            rule = f" (rule `{match['rule']}`)" if match["rule"] else ""
            failures.append(Failure("actionlint", match["where"], match["message"],
                                    f"edit the workflow{rule}, then run `actionlint {match['where'].split(':')[0]}`"))
    return failures


def lint_failures(path: Path) -> list[Failure]:
    """Problems in ``openpert lint``'s output: every line but its totals is one problem that names
    its file and says what is wrong."""
    text, failures = _read(path, "openpert lint")
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or _LINT_TOTALS.match(line):
            continue
        where, _, message = line.partition(": ")
        target = where.split(":")[0] if message else ""
        if target.endswith(".py") or (Path(target).suffix and Path(target).name != "config.vsh.yaml"):
            # lint reads configs: a problem in a script (an import) is checked again through its component's folder
            target = str(Path(target).parent)
        failures.append(Failure("openpert lint", where if message else "", message or line,
                                f"as the message says, then `openpert lint {target}`".rstrip()))
    return failures


def _node_id(case: ET.Element) -> str:
    """pytest's id of a test case, from JUnit's dotted ``classname`` and ``name``."""
    classname = case.get("classname") or ""
    name = case.get("name") or "?"
    if classname.endswith(".config.vsh.yaml"):  # a component's test, collected from its config
        return classname[: -len(".config.vsh.yaml")].replace(".", "/") + f"/config.vsh.yaml::{name}"
    parts = classname.split(".")
    # The longest dotted prefix that is a test module becomes a path; the rest are classes.
    for cut in range(len(parts), 0, -1):
        if parts[cut - 1].startswith("test") or parts[cut - 1].endswith("_test"):
            return "::".join(["/".join(parts[:cut]) + ".py", *parts[cut:], name])
    return "::".join([*filter(None, parts), name])


def junit_failures(path: Path) -> list[Failure]:
    """Failed and erroring test cases of a pytest JUnit XML report (``--junitxml``)."""
    text, failures = _read(path, "tests")
    if text is None:
        return failures
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        return [Failure("tests", str(path), f"not valid JUnit XML ({err}): the test run was cut short",
                        "open the job's log; rerun the job")]
    for case in root.iter("testcase"):
        for kind in ("failure", "error"):
            outcome = case.find(kind)
            if outcome is not None:
                node = _node_id(case)
                details = (outcome.text or "").strip().splitlines()
                message = outcome.get("message") or (details[-1] if details else "(no message)")
                label = "test failed" if kind == "failure" else "test error"
                component = node.partition("/config.vsh.yaml::")
                fix = f"`openpert test {component[0]}`" if component[1] else f"reproduce with `python -m pytest '{node}'`"
                if component[1] and _LIMIT_REASON.search(message):
                    fix = _LIMIT_FIX.format(config=f"{component[0]}/config.vsh.yaml")
                failures.append(Failure("tests", node, f"{label}: {message}", fix))
    return failures


#: ``openpert images test``'s heading of a failed component: ``--- failed: <folder> [<environment>]``.
_IMAGE_TEST = re.compile(r"^--- (?P<status>failed|error): (?P<folder>\S+) \[(?P<env>[^\]]+)\]$")


#: Python's error for an import that the environment cannot satisfy.
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")


def image_test_failures(path: Path) -> list[Failure]:
    """Components whose test failed in their image's environment (``scripts/test_images.sh``'s output)."""
    text, failures = _read(path, "image tests")
    lines = (text or "").splitlines()
    for i, line in enumerate(lines):
        match = _IMAGE_TEST.match(line.strip())
        if not match:
            continue
        block = []
        for following in lines[i + 1:]:
            if _IMAGE_TEST.match(following.strip()) or re.match(r"^\d+ passed, \d+ failed", following):
                break
            block.append(following.strip())
        reason = next((b for b in block if b.startswith(("FAILED ", "ERROR "))), "") or next(
            (b for b in reversed(block) if b), f"component test {match['status']}")
        rerun = f"`bash scripts/test_images.sh {match['folder']}`"
        missing = [m for b in block for m in _MISSING_MODULE.findall(b)]
        if missing:
            # The module is the fact to act on; pytest's summary line names only the test.
            module = missing[-1].split(".")[0]
            failures.append(Failure("image tests", match["folder"],
                                    f"in the {match['env']} environment: no module named {module!r}: the image does not hold it",
                                    f"declare its distribution in the docker engine of `{match['folder']}/config.vsh.yaml` "
                                    f"(`setup: [{{type: python, packages: [<distribution>==<version>]}}]`; "
                                    f"`openpert lint {match['folder']}` names it), then {rerun}"))
            continue
        failures.append(Failure("image tests", match["folder"], f"in the {match['env']} environment: {reason}",
                                f"{rerun} (a missing package: declare it in the config's `setup`)"))
    return failures


def _results_files(folder: Path) -> list[Path]:
    return [folder] if folder.is_file() else sorted(folder.rglob("results.json"))


def benchmark_failures(folder: Path) -> list[Failure]:
    """Failed jobs and left-out components of every ``results.json`` in or below ``folder``."""
    if not folder.exists():
        return [Failure("benchmark", str(folder), "no results: the benchmark did not run or wrote nothing",
                        "fix the failures above, then push again")]
    failures: list[Failure] = []
    files = _results_files(folder)
    if not files:
        failures.append(Failure("benchmark", str(folder), "no results.json: the benchmark stopped before writing results",
                                "open the job's log; run `bash scripts/run_benchmark.sh` locally"))
    for path in files:
        try:
            results = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            failures.append(Failure("benchmark", str(path), f"not readable as results.json: {err}", "rerun the job"))
            continue
        if not isinstance(results, dict):
            failures.append(Failure("benchmark", str(path), "not a results.json object", "rerun the job"))
            continue
        configs = {entry.get("id"): entry.get("config") for key in ("methods", "metrics", "datasets")
                   for entry in results.get(key) or [] if isinstance(entry, dict)}
        for job in results.get("failures") or []:
            if not isinstance(job, dict):
                continue
            config = configs.get(job.get("component"))
            folder_of = str(Path(config).parent) if config else f"the {job.get('component')} component"
            log = f" (log: `{job['log']}`)" if job.get("log") else ""
            if job.get("exit_code") in _LIMIT_EXITS and config:
                fix = _LIMIT_FIX.format(config=config)
            else:
                fix = f"`openpert test {folder_of}`" if config else f"see the log of {folder_of}"
            failures.append(Failure("benchmark", str(job.get("job_id")),
                                    f"{job.get('stage')} job failed (exit {job.get('exit_code')}): {job.get('reason')}{log}",
                                    fix))
        for error in results.get("config_errors") or []:
            if isinstance(error, dict):
                failures.append(Failure("benchmark", str(error.get("config")), f"left out: {error.get('reason')}",
                                        f"fix the config, then `openpert lint {error.get('config')}`"))
    return failures


def summary_markdown(failures: Sequence[Failure], checks: Iterable[str]) -> str:
    """The job summary: a heading with the count, then one line per failure; a line of the checks
    that passed when none failed."""
    checks = list(dict.fromkeys(checks))
    if not failures:
        return f"### All checks passed\n\n{', '.join(checks)}: no problem.\n"
    lines = [f"### {len(failures)} failed check(s)", ""]
    lines += [f.markdown() for f in failures]
    passed = [c for c in checks if c not in {f.check for f in failures}]
    if passed:
        lines += ["", f"Passed: {', '.join(passed)}."]
    return "\n".join(lines) + "\n"


def collect(*, ruff: Sequence[Path] = (), lint: Sequence[Path] = (), actionlint: Sequence[Path] = (),
            junit: Sequence[Path] = (), results: Sequence[Path] = (),
            image_tests: Sequence[Path] = ()) -> tuple[list[Failure], list[str]]:
    """Failures of every given output, and the names of the checks that were read."""
    readers = (("ruff", ruff, ruff_failures), ("openpert lint", lint, lint_failures),
               ("actionlint", actionlint, actionlint_failures), ("tests", junit, junit_failures),
               ("benchmark", results, benchmark_failures), ("image tests", image_tests, image_test_failures))
    failures: list[Failure] = []
    checks: list[str] = []
    for check, paths, reader in readers:
        for path in paths:
            checks.append(check)
            failures.extend(reader(Path(path)))
    return failures, checks


def main(argv: Sequence[str] | None = None) -> int:
    """``python tests/tooling/ci_summary.py``: append the summary of the given outputs to ``-o`` (or print it); 2 without any."""
    parser = argparse.ArgumentParser(prog="python tests/tooling/ci_summary.py", description=__doc__.splitlines()[0])
    parser.add_argument("--ruff", action="append", default=[], metavar="FILE", help="ruff's --output-format=concise output")
    parser.add_argument("--lint", action="append", default=[], metavar="FILE", help="openpert lint's output")
    parser.add_argument("--actionlint", action="append", default=[], metavar="FILE", help="actionlint's output")
    parser.add_argument("--junit", action="append", default=[], metavar="FILE", help="pytest's --junitxml report")
    parser.add_argument("--results", action="append", default=[], metavar="DIR", help="benchmark results (results.json in or below)")
    parser.add_argument("--image-tests", action="append", default=[], metavar="FILE", help="scripts/test_images.sh's output")
    parser.add_argument("-o", "--output", help="append to this file (e.g. $GITHUB_STEP_SUMMARY) instead of printing")
    ns = parser.parse_args(argv)
    failures, checks = collect(ruff=ns.ruff, lint=ns.lint, actionlint=ns.actionlint, junit=ns.junit, results=ns.results,
                               image_tests=ns.image_tests)
    if not checks:
        print("ci_summary: give at least one of --ruff, --lint, --actionlint, --junit, --results, --image-tests", file=sys.stderr)
        return 2
    text = summary_markdown(failures, checks)
    if ns.output:
        with open(ns.output, "a", encoding="utf-8") as out:
            out.write(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
