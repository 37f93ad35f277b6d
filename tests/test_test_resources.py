"""resources_test/ is what scripts/create_test_resources/<task>.sh makes (floats to a stated tolerance).

Each task's generator runs into a temporary folder (``$OPENPERT_TEST_RESOURCES``) and its files are
compared with the committed ones by content (:mod:`tooling.reproducible_resources`); a
failure names the first differing file and field, and the command that regenerates the task.
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys

import anndata as ad
import pandas as pd
import pytest
from project_paths import ROOT, SHARED_DATA
from tooling import reproducible_resources as rr

TASKS = rr.generator_tasks(ROOT)
RESOURCES = ROOT / "resources_test"
GENERATORS = ROOT / rr.SCRIPTS_DIR


def test_every_task_with_test_resources_has_a_generator():
    committed = sorted(p.name for p in RESOURCES.iterdir() if p.is_dir())
    assert committed == TASKS


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data not found at {SHARED_DATA} (set OPENPERT_SHARED_DATA)")
@pytest.mark.parametrize("task", TASKS)
def test_resources_are_what_their_script_makes(task, tmp_path):
    differences = rr.check_task(ROOT, task, tmp_path)
    assert not differences, rr.report(task, differences)


# --- the comparison catches one edited value of a committed resource ------------------------------------
@pytest.fixture()
def edited_copy(tmp_path):
    """A copy of resources_test/perturbation_prediction/ to edit, and the committed folder."""
    committed = RESOURCES / "perturbation_prediction"
    copy = tmp_path / "perturbation_prediction"
    shutil.copytree(committed, copy)
    return committed, copy


def _only_difference(committed, copy):
    differences = rr.compare_folders(committed, copy, prefix="perturbation_prediction/")
    assert len(differences) == 1, differences
    return differences[0]


def test_an_unedited_copy_is_the_same(edited_copy):
    assert rr.compare_folders(*edited_copy) == []


def test_one_edited_value_of_an_h5ad_matrix_is_reported(edited_copy):
    committed, copy = edited_copy
    path = copy / "op3_synthetic" / "de_train.h5ad"
    adata = ad.read_h5ad(path)
    layer = "clipped_sign_log10_pval"  # the task's target: de files carry their matrices as layers
    row, gene = adata.obs_names[3], adata.var_names[7]
    old = float(adata.layers[layer][3, 7])
    adata.layers[layer][3, 7] = old + 0.5
    adata.write_h5ad(path)
    diff = _only_difference(committed, copy)
    field = f"layers[{layer!r}][{row!r}, {gene!r}]"
    assert diff.path == "perturbation_prediction/op3_synthetic/de_train.h5ad"
    assert diff.field == field
    assert diff.detail.startswith(f"committed {old!r}, regenerated {old + 0.5!r}, relative difference ")
    message = rr.report("perturbation_prediction", [diff])
    assert message.startswith(f"resources_test/perturbation_prediction/op3_synthetic/de_train.h5ad: {field}: ")
    assert "bash scripts/create_test_resources.sh perturbation_prediction" in message


def test_one_edited_obs_value_and_uns_value_are_reported(edited_copy):
    committed, copy = edited_copy
    path = copy / "op3_synthetic" / "de_test.h5ad"
    adata = ad.read_h5ad(path)
    column = adata.obs.columns[0]
    values = adata.obs[column].astype(object).to_numpy()
    first = adata.obs_names[0]
    values[0] = "edited"
    adata.obs[column] = pd.Categorical(values)
    adata.write_h5ad(path)
    diff = _only_difference(committed, copy)
    assert (diff.path, diff.field) == ("perturbation_prediction/op3_synthetic/de_test.h5ad", f"obs[{column!r}], row {first!r}")

    shutil.copy(committed / "op3_synthetic" / "de_test.h5ad", path)
    adata = ad.read_h5ad(path)
    adata.uns["dataset_id"] = "edited"
    adata.write_h5ad(path)
    diff = _only_difference(committed, copy)
    assert (diff.field, diff.detail.endswith("regenerated 'edited'")) == ("uns['dataset_id']", True)


def test_one_edited_table_cell_is_reported(edited_copy):
    committed, copy = edited_copy
    path = copy / "op3_synthetic" / "id_map.csv"
    table = pd.read_csv(path)
    column = table.columns[-1]
    table.loc[2, column] = "edited"
    table.to_csv(path, index=False)
    diff = _only_difference(committed, copy)
    assert (diff.path, diff.field) == ("perturbation_prediction/op3_synthetic/id_map.csv", f"column {column!r}, row 2")

    path = copy / "public_formats" / "kaggle_de_train.parquet"
    shutil.copy(committed / "op3_synthetic" / "id_map.csv", copy / "op3_synthetic" / "id_map.csv")
    table = pd.read_parquet(path)
    gene = table.columns[-1]
    table.loc[0, gene] = table.loc[0, gene] * 2 + 1
    table.to_parquet(path, index=False)
    diff = _only_difference(committed, copy)
    assert (diff.path, diff.field) == ("perturbation_prediction/public_formats/kaggle_de_train.parquet", f"column {gene!r}, row 0")


def _edit_p_value(copy, factor):
    """Multiply one P.Value of the copy's op3_synthetic/de_test.h5ad by ``factor``; its field and both values."""
    path = copy / "op3_synthetic" / "de_test.h5ad"
    adata = ad.read_h5ad(path)
    old = float(adata.layers["P.Value"][5, 9])
    adata.layers["P.Value"][5, 9] = old * factor
    adata.write_h5ad(path)
    return f"layers['P.Value'][{adata.obs_names[5]!r}, {adata.var_names[9]!r}]", old, old * factor


@pytest.mark.parametrize("factor", [1 + 2.2e-16, 1 + 1e-12, 1 + 1.9e-14])
def test_a_regeneration_elsewhere_differing_in_the_last_digits_is_the_same(edited_copy, factor):
    # another CPU's sums in another order: the 14th digit of a p-value (0.8609785310815921 became
    # 0.8609785310816085, a relative difference of 1.9e-14)
    committed, copy = edited_copy
    _, old, new = _edit_p_value(copy, factor)
    assert old != new
    assert rr.compare_folders(committed, copy) == []


@pytest.mark.parametrize("factor", [1 + 1e-6, 1 + 1e-3])
def test_a_changed_p_value_is_still_reported(edited_copy, factor):
    # 1e-3: a generator that computes something else than what was committed
    committed, copy = edited_copy
    field, old, new = _edit_p_value(copy, factor)
    diff = _only_difference(committed, copy)
    assert (diff.path, diff.field) == ("perturbation_prediction/op3_synthetic/de_test.h5ad", field)
    assert diff.detail == f"committed {old!r}, regenerated {new!r}, relative difference {abs(new - old) / max(abs(old), abs(new)):.3g}"


# --- the generators' one harness process (run_component.bash and run_component_server.py) -------------
def _server():
    spec = importlib.util.spec_from_file_location("run_component_server", GENERATORS / "run_component_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _request(*args: str) -> bytes:
    return b"".join(field.encode() + b"\0" for field in (str(len(args)), *args))


#: A real component (its arguments are parsed; nothing here runs it) and a config that does not exist.
A_CONFIG = str(ROOT / "src" / "perturbation_effect" / "metrics" / "pearson_delta" / "config.vsh.yaml")
NO_CONFIG = str(ROOT / "src" / "no_such_task" / "config.vsh.yaml")


def test_the_server_reads_each_request_whole():
    requests = _request("a.yaml", "--x", "1;2", "") + _request("b.yaml", "--name", "two words\nand a line")
    assert list(_server().requests(io.BytesIO(requests))) == [["a.yaml", "--x", "1;2", ""],
                                                              ["b.yaml", "--name", "two words\nand a line"]]


@pytest.mark.parametrize("broken, message", [(b"2\0a.yaml\0", "ends after 1 of 2 arguments"),
                                             (b"a.yaml\0", "number of arguments, not b'a.yaml'"),
                                             (b"1\0a.ya", "ends inside a request")])
def test_a_broken_request_is_an_error(broken, message):
    with pytest.raises(ValueError, match=message):
        list(_server().requests(io.BytesIO(broken)))


def test_the_server_answers_each_command_with_its_exit_status(capsys):
    answers = io.BytesIO()
    _server().serve(io.BytesIO(_request(A_CONFIG, "--help") + _request(NO_CONFIG) + _request(A_CONFIG, "--no_such_argument", "1")),
                    answers)
    assert answers.getvalue() == b"0\n2\n2\n"
    err = capsys.readouterr().err
    assert f"{NO_CONFIG}: file not found" in err
    assert "unrecognized arguments: --no_such_argument 1" in err


def test_a_generator_runs_its_components_in_one_harness_per_shell_and_stops_at_a_failure():
    script = f"""set -euo pipefail
source scripts/create_test_resources/run_component.bash
run_component {A_CONFIG} --help
harness=$_RUN_COMPONENT_PID
run_component {NO_CONFIG} && exit 10 || echo "status $?"
[ "$_RUN_COMPONENT_PID" = "$harness" ] && echo "one harness"
( run_component {A_CONFIG} --help; [ "$_RUN_COMPONENT_PID" != "$harness" ] && echo "a subshell's own harness" ) &
wait $!
run_component {NO_CONFIG}
echo "not reached"
"""
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stdout.splitlines()) == (2, ["status 2", "one harness", "a subshell's own harness"]), proc.stderr
    assert proc.stderr.count(f"{NO_CONFIG}: file not found") == 2


def test_at_once_runs_every_function_to_its_end_and_returns_the_first_failure(tmp_path):
    script = f"""set -euo pipefail
source scripts/create_test_resources/run_component.bash
fails() {{ exit 3; }}
fails_later() {{ sleep 1; exit 4; }}
succeeds_last() {{ sleep 2; touch {tmp_path}/ran; }}
at_once fails fails_later succeeds_last || echo "status $?"
[ -f {tmp_path}/ran ] && echo "every function ran to its end"
at_once succeeds_last
echo "success"
"""
    proc = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.stdout.splitlines() == ["status 3", "every function ran to its end", "success"], proc.stderr
