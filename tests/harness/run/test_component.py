"""Running one component: the VIASH block, staging, limits, validation, and what a failure records."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import anndata as ad
import numpy as np
import pytest

from openpert.config.viash import ConfigError, read_config
from openpert.run.component import FAST_EXIT_LAUNCHER, TASKS_PER_PROCESS, run_component, task_limit
from openpert.run.process import Limits
from openpert.run.records import EXIT_INVALID, EXIT_MEMORY, EXIT_TIME
from openpert.run.viash_block import render_block, substitute_block

SCRIPT = '''import sys
## VIASH START
par = {"input": "example.h5ad"}
meta = {"name": "example"}
## VIASH END
print(par, meta)
'''


def test_block_is_replaced_by_real_values(tmp_path):
    out = substitute_block(SCRIPT, {"input": "/data/x y.h5ad", "n": 3, "flag": True, "none": None}, {"name": "m", "cpus": 2}, path=Path("s.py"))
    assert "example.h5ad" not in out
    namespace: dict = {}
    exec(out.split("print(")[0], namespace)
    assert namespace["par"] == {"input": "/data/x y.h5ad", "n": 3, "flag": True, "none": None}
    assert namespace["meta"] == {"name": "m", "cpus": 2}
    assert namespace["dep"] == {}
    assert render_block({}, {}) == "par = {}\nmeta = {}\ndep = {}\n"


@pytest.mark.parametrize("middle", [0, 1, 5])
def test_block_keeps_the_line_numbers_of_the_source(middle):
    """Every line after the block keeps its number, so that a job's traceback names the source's lines."""
    source = "import sys\n## VIASH START\n" + "par = {}\n" * middle + "## VIASH END\nraise SystemExit(par['a'])\n"
    out = substitute_block(source, {"a": "/job/x y"}, {"name": "m"}, path=Path("s.py"))
    assert out.splitlines().index("raise SystemExit(par['a'])") == source.splitlines().index("raise SystemExit(par['a'])")
    namespace: dict = {}
    exec(out.split("raise")[0], namespace)
    assert namespace["par"] == {"a": "/job/x y"} and namespace["meta"] == {"name": "m"}


def test_script_without_block_is_an_error():
    with pytest.raises(ConfigError, match="no '## VIASH START'"):
        substitute_block("print(1)\n", {}, {}, path=Path("s.py"))
    with pytest.raises(ConfigError, match="more than one"):
        substitute_block(SCRIPT + SCRIPT, {}, {}, path=Path("s.py"))


def data(project: Path, name: str) -> Path:
    return project / "resources_test" / "tiny" / "syn" / name


def method_args(project: Path, out: Path) -> dict:
    return {"input_train": data(project, "train.h5ad"), "input_test": data(project, "test.h5ad"), "output": out}


def test_method_runs_and_output_is_published(tiny_project, tmp_path):
    config = read_config(tiny_project / "src/tiny/methods/shrunk_mean/config.vsh.yaml")
    out = tmp_path / "published" / "prediction.h5ad"
    result = run_component(config, {**method_args(tiny_project, out), "alpha": "1.0"}, work_dir=tmp_path / "w")
    assert result.succeeded, result.reason
    assert result.outputs == {"output": out}
    pred = ad.read_h5ad(out)
    train = ad.read_h5ad(data(tiny_project, "train.h5ad"))
    # alpha = 1 gives the overall training mean for every row: proves the parameter reached the script
    np.testing.assert_allclose(pred.layers["prediction"], np.tile(np.asarray(train.X).mean(0), (pred.n_obs, 1)))
    assert result.peak_memory_mb > 10 and result.duration_s > 0


def test_an_output_named_like_an_input_is_written_beside_it(tiny_project, tmp_path):
    """An output file named like a staged input (train.h5ad in, train.h5ad out) never lands on the input."""
    config = read_config(tiny_project / "src/tiny/methods/shrunk_mean/config.vsh.yaml")
    out = tmp_path / "published" / "train.h5ad"
    before = data(tiny_project, "train.h5ad").read_bytes()
    result = run_component(config, {**method_args(tiny_project, out), "alpha": "1.0"}, work_dir=tmp_path / "w")
    assert result.succeeded, result.reason
    assert result.outputs == {"output": out} and "prediction" in ad.read_h5ad(out).layers
    assert data(tiny_project, "train.h5ad").read_bytes() == before


def test_work_dir_holds_only_declared_inputs(tiny_project, tmp_path):
    config = read_config(tiny_project / "src/tiny/methods/spy_workdir/config.vsh.yaml")
    out = tmp_path / "prediction.h5ad"
    result = run_component(config, method_args(tiny_project, out), work_dir=tmp_path / "w")
    assert result.succeeded, result.reason
    seen = [s.rsplit(":", 1) for s in ad.read_h5ad(out).uns["seen"]]
    names = {os.path.basename(p) for p, _ in seen}
    inodes = {int(i) for _, i in seen}
    assert {"train.h5ad", "test.h5ad"} <= names
    assert "solution.h5ad" not in names and "prediction.h5ad" not in names
    # hard links share inodes: none of the dataset's restricted files is reachable under another name
    assert os.stat(data(tiny_project, "solution.h5ad")).st_ino not in inodes
    assert os.stat(data(tiny_project, "prediction.h5ad")).st_ino not in inodes
    assert os.stat(data(tiny_project, "train.h5ad")).st_ino in inodes


@pytest.mark.parametrize(
    ("method", "code", "reason"),
    [
        ("fail_raise", 1, "RuntimeError: this method fails on purpose"),
        # the reason names the label that set the limit and the next one up, not a rerun
        ("fail_timeout", EXIT_TIME, "time limit exceeded (4 s); label tinytime (4 s) set the limit: replace it with "
                                    "lowtime (10 min) in the nextflow runner's label list of "
                                    "src/tiny/methods/fail_timeout/config.vsh.yaml"),
        ("fail_memory", EXIT_MEMORY, "; label tinymem (300 MB) set the limit: replace it with lowmem (4 GB)"),
        ("fail_invalid", EXIT_INVALID, "layers['prediction'] has 120 non-finite values (120 NaN, 0 inf)"),
    ],
)
def test_failures_are_recorded_with_their_reason(tiny_project, tmp_path, method, code, reason):
    from openpert.engines.plan import label_resources, limits_for

    config = read_config(tiny_project / f"src/tiny/methods/{method}/config.vsh.yaml")
    out = tmp_path / "out" / "prediction.h5ad"
    limits = limits_for(config.labels, label_resources(tiny_project), where=method)
    result = run_component(config, method_args(tiny_project, out), work_dir=tmp_path / "w", limits=limits,
                           context={"file_solution": data(tiny_project, "solution.h5ad")})
    assert not result.succeeded
    assert result.exit_code == code
    assert reason in result.reason
    assert not out.exists(), "a failed job must not publish its output"
    assert result.log.exists()


def _method(project: Path, name: str, body: str) -> Path:
    """A method of the fixture task whose script is ``body`` after the VIASH block (4 lines).

    It may import ``tiny_lib.h5ad_files``, which reads and writes h5ad files with h5py alone: a job
    run without the fork server does not spend a second importing anndata.
    """
    folder = project / "src/tiny/methods" / name
    shutil.copytree(project / "src/tiny/methods/fail_raise", folder)
    config = folder / "config.vsh.yaml"
    resource = "    path: script.py\n"
    text = config.read_text().replace("name: fail_raise", f"name: {name}")
    assert resource in text
    config.write_text(text.replace(resource, resource + "  - {type: file, path: /src/tiny/tiny_lib/h5ad_files.py, "
                                                        "dest: tiny_lib/h5ad_files.py}\n"))
    script = (folder / "script.py").read_text()
    (folder / "script.py").write_text(script[: script.index("## VIASH END")] + "## VIASH END\n" + body)
    return config


def test_a_hard_coded_output_name_fails_and_the_reason_names_par_output(project_copy, tmp_path):
    """A job does not start in its output folder: a script that writes 'prediction.h5ad' itself fails at once."""
    config = read_config(_method(project_copy, "hard_coded", (
        "import numpy as np\n"
        "from tiny_lib import h5ad_files\n"
        "test = h5ad_files.read(par['input_test'])\n"
        "uns = {'dataset_id': test.uns['dataset_id'], 'method_id': 'hard_coded'}\n"
        "h5ad_files.write('prediction.h5ad', test.obs_names, test.var_names, layers={'prediction': np.zeros(test.shape)},\n"
        "                 uns=uns)\n")))
    for sandbox in (False, None):
        work = tmp_path / f"w{sandbox}"
        result = run_component(config, method_args(project_copy, tmp_path / "out" / "prediction.h5ad"), work_dir=work,
                               sandbox=sandbox)
        assert result.exit_code == EXIT_INVALID
        given = "/job/prediction.h5ad" if result.sandbox == "bubblewrap" else str(work / "prediction.h5ad")
        assert (f"output --output: the script did not write par['output'] ({given}); write the output to the path "
                "par['output'] holds, not to a name of its own (it wrote prediction.h5ad in the folder it started in)"
                ) == result.reason
        assert not (work / "prediction.h5ad").exists()


def test_resources_are_laid_out_at_their_dest_and_a_missing_one_fails_naming_it(project_copy, tmp_path):
    config = read_config(_method(project_copy, "laid_out", "from tiny_lib import h5ad_files\nprint(h5ad_files.__name__)\n"))
    result = run_component(config, method_args(project_copy, tmp_path / "out" / "prediction.h5ad"), work_dir=tmp_path / "w",
                           sandbox=False)
    assert "tiny_lib.h5ad_files" in result.log.read_text()  # at its dest, not beside the script
    script = "    path: script.py\n"
    config.path.write_text(config.path.read_text().replace(script, script + "  - {type: file, path: /src/tiny/tiny_lib/gone.py}\n"))
    result = run_component(read_config(config.path), method_args(project_copy, tmp_path / "out2" / "prediction.h5ad"),
                           work_dir=tmp_path / "w2", sandbox=False)
    assert result.exit_code == EXIT_INVALID
    assert result.reason == f"{config.path}: resource '/src/tiny/tiny_lib/gone.py' not found"


def test_a_job_starts_in_an_empty_writable_folder_that_is_not_its_output_folder(project_copy, tmp_path):
    config = read_config(_method(project_copy, "where_am_i", (
        "import os, numpy as np\n"
        "from tiny_lib import h5ad_files\n"
        "start = os.getcwd()\n"
        "listed = sorted(os.listdir(start))\n"
        "open('scratch.txt', 'w').write('x')\n"
        "test = h5ad_files.read(par['input_test'])\n"
        "uns = {'dataset_id': test.uns['dataset_id'], 'method_id': 'where_am_i',\n"
        "       'start': [start, os.path.dirname(par['output']), str(len(listed))]}\n"
        "h5ad_files.write(par['output'], test.obs_names, test.var_names, layers={'prediction': np.zeros(test.shape)},\n"
        "                 uns=uns)\n")))
    for sandbox in (False, None):
        out = tmp_path / f"out{sandbox}" / "prediction.h5ad"
        result = run_component(config, method_args(project_copy, out), work_dir=tmp_path / f"w{sandbox}", sandbox=sandbox)
        assert result.succeeded, result.reason
        start, output_folder, entries = ad.read_h5ad(out).uns["start"]
        assert start != output_folder and entries == "0"
        assert start == ("/job/.start" if result.sandbox == "bubblewrap" else str(tmp_path / f"w{sandbox}" / ".start"))


def test_a_traceback_names_the_line_of_the_source_script(project_copy, tmp_path):
    config = read_config(_method(project_copy, "raises_late", "x = 1\n\n\nraise ValueError('on purpose')\n"))
    line = (config.path.parent / "script.py").read_text().splitlines().index("raise ValueError('on purpose')") + 1
    for sandbox in (False, None):
        result = run_component(config, method_args(project_copy, tmp_path / "p.h5ad"), work_dir=tmp_path / f"w{sandbox}",
                               sandbox=sandbox)
        assert "ValueError: on purpose" in result.reason
        assert f", line {line}, in <module>" in result.log.read_text()


def test_method_may_not_read_the_solution(tiny_project, tmp_path):
    config = read_config(tiny_project / "src/tiny/methods/reads_solution/config.vsh.yaml")
    args = {**method_args(tiny_project, tmp_path / "p.h5ad"), "input_solution": data(tiny_project, "solution.h5ad")}
    with pytest.raises(ConfigError, match="reads file_solution, which a method may not read"):
        run_component(config, args, work_dir=tmp_path / "w", allowed_input_formats={"file_train", "file_test"})
    assert not (tmp_path / "w").exists(), "nothing may run (or be staged) for a refused call"


def test_invalid_input_and_bad_arguments(tiny_project, tmp_path):
    config = read_config(tiny_project / "src/tiny/methods/group_mean/config.vsh.yaml")
    # a training file without X is refused before the script runs
    bad_train = tmp_path / "train.h5ad"
    ad.read_h5ad(data(tiny_project, "test.h5ad")).write_h5ad(bad_train)
    result = run_component(config, {**method_args(tiny_project, tmp_path / "p.h5ad"), "input_train": bad_train}, work_dir=tmp_path / "w")
    assert result.exit_code == EXIT_INVALID and "invalid input --input_train" in result.reason and "required X is missing" in result.reason
    with pytest.raises(ConfigError, match="unknown argument"):
        run_component(config, {**method_args(tiny_project, tmp_path / "p.h5ad"), "alpha": 1}, work_dir=tmp_path / "w2")
    with pytest.raises(ConfigError, match="--input_test is required"):
        run_component(config, {"input_train": data(tiny_project, "train.h5ad"), "output": tmp_path / "p.h5ad"}, work_dir=tmp_path / "w3")


def test_peak_memory_is_the_job_s_own(tmp_path):
    """A job's peak memory is its own, not the harness's (which a forked child starts from)."""
    from openpert.run.process import Limits, execute

    # Sizes that tell the cases apart at a fraction of the page faults (each megabyte costs about a
    # millisecond of system time): a peak carried over from this process would be at least the
    # ballast and the interpreter under it, above both bounds.
    ballast = np.ones(200 * 2**20 // 8)  # 200 MB resident in this process
    code, _, _, small = execute([sys.executable, "-c", "import time; time.sleep(0.3)"], cwd=tmp_path, log=tmp_path / "a.log", limits=Limits())
    code2, _, _, big = execute([sys.executable, "-c", "import numpy, time; a = numpy.ones(100 * 2**20 // 8); time.sleep(0.5)"],
                               cwd=tmp_path, log=tmp_path / "b.log", limits=Limits())
    assert ballast.sum() > 0
    assert code == code2 == 0
    assert small < 100, small
    assert 95 < big < 180, big


def test_meta_names_no_repository_path(tiny_project, tmp_path):
    """A script learns where its resources are, not where the repository or the dataset lie."""
    import yaml

    config = read_config(tiny_project / "src/tiny/methods/spy_workdir/config.vsh.yaml")
    inputs = tiny_project / "resources_test" / "tiny" / "syn"
    result = run_component(config, {"input_train": inputs / "train.h5ad", "input_test": inputs / "test.h5ad",
                                    "output": tmp_path / "out" / "prediction.h5ad"}, work_dir=tmp_path / "work")
    assert result.succeeded, result.reason
    script = (tmp_path / "work" / ".resources" / "script.py").read_text()
    block = script[: script.index("dep = {}")]
    assert str(tiny_project) not in block
    merged = yaml.safe_load((tmp_path / "work" / ".resources" / ".config.vsh.yaml").read_text())
    assert merged["name"] == "spy_workdir"


def test_only_regular_files_and_folders_of_them_are_outputs(tmp_path):
    import os

    from openpert.run.component import output_file_problem

    (tmp_path / "real.h5ad").write_text("x")
    assert output_file_problem(tmp_path / "real.h5ad") == ""
    os.symlink(tmp_path / "real.h5ad", tmp_path / "link.h5ad")
    assert "link.h5ad is a symbolic link" in output_file_problem(tmp_path / "link.h5ad")
    os.mkfifo(tmp_path / "pipe.h5ad")
    assert "pipe.h5ad is a FIFO" in output_file_problem(tmp_path / "pipe.h5ad")
    folder = tmp_path / "out"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("a")
    assert output_file_problem(folder) == ""
    os.symlink("/etc/passwd", folder / "sub" / "b.txt")
    assert "out/sub/b.txt is a symbolic link" in output_file_problem(folder)


def _launch(tmp_path, body: str, report_fd: int = -1, tasks: int = -1) -> subprocess.CompletedProcess:
    script = tmp_path / "job" / "script.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(body)
    return subprocess.run([sys.executable, "-c", FAST_EXIT_LAUNCHER, str(report_fd), str(tasks), str(script)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120, pass_fds=(report_fd,) if report_fd >= 0 else ())


def test_the_launcher_runs_a_script_as_python_would(tmp_path):
    done = _launch(tmp_path, (
        "import atexit, os, sys\n"
        "atexit.register(lambda: open(os.path.join(os.path.dirname(__file__), 'atexit'), 'w').write('ran'))\n"
        "if __name__ == '__main__':\n"
        "    print(sys.argv[0].endswith('script.py'), sys.path[0] == os.path.dirname(os.path.abspath(__file__)))\n"
        "    sys.stdout.write('no newline at the end')\n"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True True\nno newline at the end"  # flushed before the fast exit
    assert (tmp_path / "job" / "atexit").read_text() == "ran"  # exit handlers ran


@pytest.mark.parametrize(("body", "code", "message"), [
    ("raise ValueError('bad input')\n", 1, "ValueError: bad input"),
    ("import sys\nsys.exit(3)\n", 3, ""),
    ("import sys\nsys.exit('stopped')\n", 1, "stopped"),
])
def test_the_launcher_keeps_failures(tmp_path, body, code, message):
    done = _launch(tmp_path, body)
    assert done.returncode == code
    assert message in done.stderr


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="VmHWM comes from /proc (Linux)")
@pytest.mark.parametrize(("tail", "code"), [("", 0), ("raise ValueError('late')\n", 1), ("import sys\nsys.exit(3)\n", 3)])
def test_the_launcher_reports_its_peak_as_the_script_ends(tmp_path, tail, code):
    from openpert.run.process import PeakReport

    report = PeakReport()
    # 150 MB filled, then the end at once: no sampling between the two would see it.
    done = _launch(tmp_path, "import numpy as np\nblock = np.ones(150 * 2**20 // 8)\n" + tail, report.write_fd)
    assert done.returncode == code, done.stderr
    assert 150 * 1024 < report.peak_kb() < 400 * 1024


def test_a_closed_report_pipe_costs_the_report_not_the_exit_code(tmp_path):
    from openpert.run.process import PeakReport

    report = PeakReport()
    done = _launch(tmp_path, f"import os, sys\nos.close({report.write_fd})\nsys.exit(4)\n", report.write_fd)
    assert done.returncode == 4
    assert "peak memory not reported" in done.stderr and report.peak_kb() == 0


def test_a_peak_report_only_reads_numbers_and_never_waits():
    from openpert.run.process import PeakReport

    report = PeakReport()
    os.write(report.write_fd, b"junk 123 -5 4567\n")
    assert report.peak_kb() == 4567
    held = PeakReport()
    writer = os.dup(held.write_fd)  # a process that still holds the write end: no EOF
    try:
        assert held.peak_kb() == 0
    finally:
        os.close(writer)


def test_the_launcher_sets_the_task_limit_it_is_given(tmp_path):
    body = "import resource\nprint(resource.getrlimit(resource.RLIMIT_NPROC))\n"
    assert _launch(tmp_path, body, tasks=1000).stdout.strip() == "(1000, 1000)"
    unlimited = _launch(tmp_path, body).stdout.strip()
    assert unlimited == str(resource.getrlimit(resource.RLIMIT_NPROC))


@pytest.mark.parametrize(("sandboxed", "uid", "kernel", "expected"), [
    (True, 1000, "6.8.0-45-generic", 256 * TASKS_PER_PROCESS),  # the job's own user namespace: its tasks only
    (True, 1000, "5.14.0", 256 * TASKS_PER_PROCESS),
    (True, 1000, "5.13.19", None),  # counted per user on the whole machine before 5.14
    (False, 1000, "6.8.0", None),  # no user namespace of its own: every process of the user would count
    (True, 0, "6.8.0", None),  # root: the kernel does not apply it
    (True, 1000, "unknown", None),
])
def test_the_task_limit_is_set_only_where_it_counts_the_job_alone(sandboxed, uid, kernel, expected):
    limits = Limits(processes=256)
    assert task_limit(limits, sandboxed=sandboxed, uid=uid, kernel=kernel) == expected
    assert task_limit(Limits(), sandboxed=sandboxed, uid=uid, kernel=kernel) is None


@pytest.mark.parametrize("line", [
    "FileNotFoundError: [Errno 2] No such file or directory: '/data/solution.h5ad'",
    "FileNotFoundError: [Errno 2] Unable to synchronously open file (unable to open file: name = '/data/solution.h5ad', "
    "errno = 2, error message = 'No such file or directory', flags = 0, o_flags = 0)",
    "Error: ENOENT: no such file or directory, open '/data/solution.h5ad'",
])
def test_a_missing_path_in_the_log_is_named_with_where_inputs_are_declared(tiny_project, tmp_path, line):
    from openpert.run.component import undeclared_path_hint

    config = read_config(tiny_project / "src/tiny/methods/group_mean/config.vsh.yaml")
    log = tmp_path / "log"
    log.write_text(f"Traceback (most recent call last):\n  ...\n{line}\n")
    hint = undeclared_path_hint(config, log, f"exited with code 1: {line}")
    assert hint.startswith(" (/data/solution.h5ad does not exist for the job")
    assert hint.endswith("listed in src/tiny/methods/group_mean/config.vsh.yaml and src/tiny/api/comp_method.yaml)")
    log.write_text("ValueError: shapes (3,) and (4,) not aligned\n")
    assert undeclared_path_hint(config, log, "exited with code 1: ValueError") == ""


@pytest.mark.parametrize(("claim", "reason"), [
    ('"method_id": "truth"', "uns['method_id'] is 'truth', but the job ran 'group_mean'"),
    ('"dataset_id": "elsewhere"', "uns['dataset_id'] is 'elsewhere', but its inputs are of dataset syn"),
])
def test_a_prediction_claiming_another_method_or_dataset_is_refused(project_copy, tmp_path, claim, reason):
    """A method cannot pass itself off as the positive control, nor file its prediction under another dataset."""
    script = project_copy / "src/tiny/methods/group_mean/script.py"
    key = claim.split(":")[0]
    script.write_text(script.read_text().replace("uns = {", "uns = {" + claim + ", ").replace(
        f'{key}: test.uns["dataset_id"], ' if "dataset" in key else f'{key}: meta["name"]', ""))
    config = read_config(script.parent / "config.vsh.yaml")
    out = tmp_path / "out" / "prediction.h5ad"
    result = run_component(config, method_args(project_copy, out), work_dir=tmp_path / "w")
    assert result.exit_code == EXIT_INVALID and result.reason == f"invalid output --output: {reason}", result.reason
    assert not out.exists()
