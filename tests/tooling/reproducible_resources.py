"""Test resources that are exactly what their scripts make.

``resources_test/<task>/`` is what every component test and the bundled benchmark run on. As in Open
Problems, it is made by ``scripts/create_test_resources/<task>.sh`` and never edited by hand. This
module regenerates a task's resources into another folder (the scripts write below
``$OPENPERT_TEST_RESOURCES`` when it is set) and compares them with the committed ones by content:

- ``.h5ad``: ``obs``, ``var``, ``X``, ``layers``, ``obsm``, ``varm``, ``obsp``, ``varp``, ``uns`` and
  ``raw`` (HDF5 files are not byte-stable: the same content can be laid out differently);
- ``.csv``, ``.tsv``, ``.parquet``: tables by value (columns, index, dtypes, cells);
- ``.json``, ``.jsonl``, ``.yaml``: parsed content;
- ``.gz``: the decompressed content, compared by the name without ``.gz`` (gzip headers carry a
  time stamp);
- anything else: bytes (text files by their first differing line).

What must be exact is compared exactly: integers, strings, booleans, categories (values, order and
whether ordered), index and column names, keys, shapes, dtypes, sparse layouts, and where the NaNs
and infinities are. Floating-point values (float and complex arrays, float columns, floats in ``uns``,
JSON and YAML) match when

    ``|a - b| <= RELATIVE_TOLERANCE * max(|a|, |b|) + ABSOLUTE_TOLERANCE``  (1e-9 and 1e-12),

NaN matching NaN and an infinity only the same infinity. The scripts are deterministic, but the same
sums in another order (another CPU's vector width, another BLAS) differ in the last digits, so
a regeneration elsewhere may differ from the committed file by a few units in the last place; a
generator that changed what it computes differs far beyond 1e-9. The absolute floor keeps values that
should be 0 (a difference of two equal sums) from failing by rounding. float32 data has a unit in the
last place of about 1e-7 relative, so for it the tolerance is exactness. A float beyond the tolerance is
reported with both values and their relative difference.

The harness does not import science or tasks: the scripts run as subprocesses, with the project's
environment. ``python tests/tooling/reproducible_resources.py [task ...]`` runs the check by hand.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: The environment variable naming the folder the scripts write ``<task>/`` into (default: the
#: project's ``resources_test``).
OUTPUT_ROOT_VARIABLE = "OPENPERT_TEST_RESOURCES"
#: Where each task's generator lives, relative to the project root.
SCRIPTS_DIR = Path("scripts") / "create_test_resources"
#: Floating-point values match within this relative difference (of the larger magnitude) ...
RELATIVE_TOLERANCE = 1e-9
#: ... plus this absolute floor, for values near 0.
ABSOLUTE_TOLERANCE = 1e-12
#: Values shown in a difference are cut to this many characters.
_SHOWN = 80


@dataclasses.dataclass(frozen=True)
class Difference:
    """The first way a committed file differs from its regeneration.

    Attributes
    ----------
    path
        The file, relative to the resources folder (``<task>/<dataset>/<file>``).
    field
        What differs inside it: ``"file"`` (missing on one side), ``"X"``, ``"obs['cell_type']"``,
        ``"uns['dataset_id']"``, ``"column 'gene'"``, ``"line 3"``...
    detail
        The committed and the regenerated value.
    """

    path: str
    field: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.field}: {self.detail}"


class _Differs(Exception):
    """Raised inside the comparison at the first difference; carries its field and detail."""

    def __init__(self, field: str, detail: str):
        super().__init__(f"{field}: {detail}")
        self.field = field
        self.detail = detail


# --- values ---------------------------------------------------------------------------------------------
def _show(value: Any) -> str:
    text = repr(value.item() if isinstance(value, np.generic) else value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _pair(committed: Any, regenerated: Any) -> str:
    text = f"committed {_show(committed)}, regenerated {_show(regenerated)}"
    if _is_float(committed) and _is_float(regenerated) and np.isfinite(committed) and np.isfinite(regenerated):
        scale = max(abs(committed), abs(regenerated))
        if scale > 0:
            text += f", relative difference {float(abs(committed - regenerated) / scale):.3g}"
    return text


def _is_float(value: Any) -> bool:
    return isinstance(value, (float, complex, np.floating, np.complexfloating))


def _close_mask(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise match of two float or complex arrays of one shape: within the tolerance, NaN
    matching NaN, an infinity matching only itself."""
    with np.errstate(invalid="ignore", over="ignore"):
        exact = (a == b) | (np.isnan(a) & np.isnan(b))
        finite = np.isfinite(a) & np.isfinite(b)
        # in float64 whatever the arrays' precision, so that the tolerance does not round to 0
        a64, b64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64), b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
        close = np.abs(a64 - b64) <= RELATIVE_TOLERANCE * np.maximum(np.abs(a64), np.abs(b64)) + ABSOLUTE_TOLERANCE
    return exact | (finite & close)


def _scalars_match(a: Any, b: Any) -> bool:
    """Two scalars are of one type and equal, or both floats within the tolerance."""
    if type(a) is not type(b):
        return False
    if _is_float(a):
        return bool(_close_mask(np.asarray(a), np.asarray(b)))
    return bool(a == b)


def _match_mask(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise match of two arrays of one shape and dtype: floats within the tolerance, the rest exactly."""
    if a.dtype.kind in "fc":
        return _close_mask(a, b)
    if a.dtype.kind == "O":
        return np.array([_scalars_match(x, y) for x, y in zip(a.ravel(), b.ravel())], dtype=bool).reshape(a.shape)
    return a == b


def _compare_arrays(field: str, a: np.ndarray, b: np.ndarray, labels: Sequence[Sequence[Any] | None] = ()) -> None:
    """Compare two dense arrays; ``labels`` name the positions along each axis (obs and var names)."""
    if a.shape != b.shape:
        raise _Differs(f"{field} shape", _pair(a.shape, b.shape))
    if a.dtype != b.dtype:
        raise _Differs(f"{field} dtype", _pair(str(a.dtype), str(b.dtype)))
    equal = _match_mask(a, b)
    if bool(np.all(equal)):
        return
    where = tuple(int(i) for i in np.argwhere(~equal)[0])
    names = [f"{labels[k][i]!r}" if k < len(labels) and labels[k] is not None else str(i) for k, i in enumerate(where)]
    raise _Differs(f"{field}[{', '.join(names)}]", _pair(a[where], b[where]))


def _compare_matrices(field: str, a: Any, b: Any, labels: Sequence[Sequence[Any] | None] = ()) -> None:
    """Compare two matrices of an AnnData (dense, sparse or data frames) element by element."""
    import scipy.sparse as sp

    if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
        if not (isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame)):
            raise _Differs(f"{field} type", _pair(type(a).__name__, type(b).__name__))
        _compare_frames(field, a, b)
        return
    if sp.issparse(a) != sp.issparse(b):
        raise _Differs(f"{field} storage", _pair("sparse" if sp.issparse(a) else "dense", "sparse" if sp.issparse(b) else "dense"))
    if not sp.issparse(a):
        _compare_arrays(field, np.asarray(a), np.asarray(b), labels)
        return
    if a.format != b.format:
        raise _Differs(f"{field} sparse format", _pair(a.format, b.format))
    if a.shape != b.shape:
        raise _Differs(f"{field} shape", _pair(a.shape, b.shape))
    if a.dtype != b.dtype:
        raise _Differs(f"{field} dtype", _pair(str(a.dtype), str(b.dtype)))
    # Row by row (column by column for CSC): the first differing slice is made dense to name the
    # element, without making a whole matrix of the test resources dense.
    by_column = a.format == "csc"
    a, b = (sp.csc_matrix(a, copy=True), sp.csc_matrix(b, copy=True)) if by_column else (sp.csr_matrix(a, copy=True), sp.csr_matrix(b, copy=True))
    for m in (a, b):
        m.sum_duplicates()  # canonical: sorted indices, no duplicates
    if (np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
            and bool(np.all(_match_mask(a.data, b.data)))):
        return
    for i in range(a.shape[1] if by_column else a.shape[0]):
        sa = a[:, i].toarray().ravel() if by_column else a[i].toarray().ravel()
        sb = b[:, i].toarray().ravel() if by_column else b[i].toarray().ravel()
        if not bool(np.all(_match_mask(sa, sb))):
            j = int(np.argwhere(~_match_mask(sa, sb))[0][0])
            pos = (j, i) if by_column else (i, j)
            names = [f"{labels[k][p]!r}" if k < len(labels) and labels[k] is not None else str(p) for k, p in enumerate(pos)]
            raise _Differs(f"{field}[{', '.join(names)}]", _pair(sa[j], sb[j]))
    # Equal values, different stored entries (an explicit zero): the layout is content too.
    if a.nnz != b.nnz:
        raise _Differs(f"{field} stored entries", _pair(a.nnz, b.nnz))


def _compare_series(field: str, a: pd.Series, b: pd.Series) -> None:
    categorical = isinstance(a.dtype, pd.CategoricalDtype) and isinstance(b.dtype, pd.CategoricalDtype)
    if a.dtype != b.dtype and not categorical:
        raise _Differs(f"{field} dtype", _pair(str(a.dtype), str(b.dtype)))
    if categorical:
        # Values first (a changed value changes the categories too, and the row says more); then the
        # categories: unordered categoricals compare equal whatever their order, but the order is
        # content (it orders codes and groupby results).
        _compare_series(field, a.astype(object), b.astype(object))
        if list(a.cat.categories) != list(b.cat.categories):
            raise _Differs(f"{field} categories", _pair(list(a.cat.categories), list(b.cat.categories)))
        if a.cat.ordered != b.cat.ordered:
            raise _Differs(f"{field} ordered", _pair(a.cat.ordered, b.cat.ordered))
        return
    va, vb = a.to_numpy(), b.to_numpy()
    if va.dtype.kind == "O" or vb.dtype.kind == "O":
        # Missing values of object columns (None, nan, pd.NA) are one missing value.
        na_a, na_b = pd.isna(a).to_numpy(), pd.isna(b).to_numpy()
        equal = (na_a & na_b) | np.array([not (x or y) and _scalars_match(p, q) for p, q, x, y in zip(va, vb, na_a, na_b)], dtype=bool)
    else:
        equal = _match_mask(va, vb)
    if not bool(np.all(equal)):
        i = int(np.argwhere(~equal)[0][0])
        raise _Differs(f"{field}, row {a.index[i]!r}", _pair(va[i], vb[i]))


def _compare_frames(field: str, a: pd.DataFrame, b: pd.DataFrame) -> None:
    """Compare two data frames: shape, columns, index, then each column's dtype and values."""
    prefix = f"{field} " if field else ""
    if a.shape != b.shape:
        raise _Differs(f"{prefix}shape", _pair(a.shape, b.shape))
    if list(a.columns) != list(b.columns):
        raise _Differs(f"{prefix}columns", _pair(list(a.columns), list(b.columns)))
    if not a.index.equals(b.index) or a.index.dtype != b.index.dtype:
        _compare_series(f"{prefix}index", a.index.to_series(index=range(len(a))), b.index.to_series(index=range(len(b))))
        if a.index.dtype != b.index.dtype:
            raise _Differs(f"{prefix}index dtype", _pair(str(a.index.dtype), str(b.index.dtype)))
        # Labels are names, exact even when they are floats within the tolerance.
        va, vb = a.index.to_numpy(), b.index.to_numpy()
        i = int(np.flatnonzero(~((va == vb) | (pd.isna(va) & pd.isna(vb))))[0])
        raise _Differs(f"{prefix}index, row {i}", _pair(va[i], vb[i]))
    for column in a.columns:
        _compare_series(f"{field}[{column!r}]" if field else f"column {column!r}", a[column], b[column])


def _compare_nested(field: str, a: Any, b: Any) -> None:
    """Compare parsed content (uns, JSON, YAML): mappings key by key, lists item by item."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if list(a) != list(b):
            missing, extra = [k for k in a if k not in b], [k for k in b if k not in a]
            if missing or extra:
                raise _Differs(f"{field} keys", f"only committed {missing}, only regenerated {extra}")
            raise _Differs(f"{field} key order", _pair(list(a), list(b)))
        for key in a:
            _compare_nested(f"{field}[{key!r}]", a[key], b[key])
        return
    if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
        if type(a) is not type(b):
            raise _Differs(f"{field} type", _pair(type(a).__name__, type(b).__name__))
        _compare_frames(field, a, b)
        return
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if type(a) is not type(b):
            raise _Differs(f"{field} type", _pair(type(a).__name__, type(b).__name__))
        _compare_arrays(field, a, b)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            raise _Differs(f"{field} length", _pair(len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            _compare_nested(f"{field}[{i}]", x, y)
        return
    if not _scalars_match(a, b):
        raise _Differs(field or "value", _pair(a, b))


# --- files ----------------------------------------------------------------------------------------------
def _compare_h5ad(a_path: Path, b_path: Path) -> None:
    import anndata as ad

    a, b = ad.read_h5ad(a_path), ad.read_h5ad(b_path)
    if a.shape != b.shape:
        raise _Differs("shape (obs x var)", _pair(a.shape, b.shape))
    _compare_frames("obs", a.obs, b.obs)
    _compare_frames("var", a.var, b.var)
    obs, var = list(a.obs_names), list(a.var_names)
    if (a.X is None) != (b.X is None):
        raise _Differs("X", _pair("a matrix" if a.X is not None else None, "a matrix" if b.X is not None else None))
    if a.X is not None:
        _compare_matrices("X", a.X, b.X, (obs, var))
    for name, axes in (("layers", (obs, var)), ("obsm", (obs, None)), ("varm", (var, None)),
                       ("obsp", (obs, obs)), ("varp", (var, var))):
        ma, mb = getattr(a, name), getattr(b, name)
        if list(ma.keys()) != list(mb.keys()):
            raise _Differs(f"{name} keys", _pair(list(ma.keys()), list(mb.keys())))
        for key in ma.keys():
            _compare_matrices(f"{name}[{key!r}]", ma[key], mb[key], axes)
    _compare_nested("uns", dict(a.uns), dict(b.uns))
    if (a.raw is None) != (b.raw is None):
        raise _Differs("raw", _pair(a.raw is not None, b.raw is not None))
    if a.raw is not None:
        _compare_frames("raw.var", a.raw.var, b.raw.var)
        _compare_matrices("raw.X", a.raw.X, b.raw.X, (obs, list(a.raw.var_names)))


def _read_table(name: str, data: bytes) -> pd.DataFrame:
    if name.endswith(".parquet"):
        return pd.read_parquet(io.BytesIO(data))
    # round_trip: the float parser that gives back exactly the value written
    return pd.read_csv(io.BytesIO(data), sep="\t" if name.endswith(".tsv") else ",", float_precision="round_trip", low_memory=False)


def _compare_text_bytes(a: bytes, b: bytes) -> None:
    if a == b:
        return
    try:
        la, lb = a.decode().splitlines(), b.decode().splitlines()
    except UnicodeDecodeError:
        i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        raise _Differs(f"byte {i}", f"committed {len(a)} bytes, regenerated {len(b)} bytes") from None
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            raise _Differs(f"line {i + 1}", _pair(x, y))
    if len(la) != len(lb):
        raise _Differs("lines", _pair(len(la), len(lb)))
    raise _Differs("bytes", "line endings or a final newline differ")


def _compare_content(name: str, a: bytes, b: bytes) -> None:
    """Compare two files' contents by the kind of file ``name`` is."""
    if name.endswith(".gz"):
        _compare_content(name[:-3], gzip.decompress(a), gzip.decompress(b))
    elif name.endswith((".csv", ".tsv", ".parquet")):
        if a != b:  # equal bytes are equal tables; parsing only to say where they differ
            _compare_frames("", _read_table(name, a), _read_table(name, b))
    elif name.endswith(".json"):
        _compare_nested("", json.loads(a), json.loads(b))
    elif name.endswith(".jsonl"):
        la, lb = a.decode().splitlines(), b.decode().splitlines()
        if len(la) != len(lb):
            raise _Differs("lines", _pair(len(la), len(lb)))
        for i, (x, y) in enumerate(zip(la, lb)):
            _compare_nested(f"line {i + 1}", json.loads(x), json.loads(y))
    elif name.endswith((".yaml", ".yml")):
        import yaml

        _compare_nested("", yaml.safe_load(a), yaml.safe_load(b))
    else:
        _compare_text_bytes(a, b)


def compare_files(committed: Path, regenerated: Path, name: str | None = None) -> Difference | None:
    """The first difference between a committed file and its regeneration, or ``None``.

    Parameters
    ----------
    committed, regenerated
        The two files.
    name
        How the difference names the file (default: ``committed``).

    Returns
    -------
    Difference or None
        ``None`` when the two have the same content (see the module's description of "content").
    """
    name = name or str(committed)
    try:
        if committed.name.endswith(".h5ad"):
            if committed.read_bytes() == regenerated.read_bytes():
                return None  # the same bytes are the same content; parsing only says where they differ
            _compare_h5ad(committed, regenerated)
        else:
            _compare_content(committed.name, committed.read_bytes(), regenerated.read_bytes())
    except _Differs as diff:
        return Difference(name, diff.field or "content", diff.detail)
    return None


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else set()


def compare_folders(committed: Path, regenerated: Path, prefix: str = "") -> list[Difference]:
    """Every file that differs between two folders, each with its first difference, by path.

    Parameters
    ----------
    committed, regenerated
        The folders (``resources_test/<task>`` and its regeneration).
    prefix
        Put before each file's path in the differences (``"<task>/"``).

    Returns
    -------
    list of Difference
        Empty when both folders hold the same files with the same content.
    """
    old, new = _files(committed), _files(regenerated)
    out = []
    for rel in sorted(old | new):
        if rel not in new:
            out.append(Difference(prefix + rel, "file", "committed, but the script no longer makes it"))
        elif rel not in old:
            out.append(Difference(prefix + rel, "file", "made by the script, but not committed"))
        else:
            diff = compare_files(committed / rel, regenerated / rel, prefix + rel)
            if diff is not None:
                out.append(diff)
    return out


# --- regeneration ---------------------------------------------------------------------------------------
def generator_tasks(root: Path) -> list[str]:
    """The tasks with a test-resource generator (``scripts/create_test_resources/<task>.sh``)."""
    return sorted(p.stem for p in (Path(root) / SCRIPTS_DIR).glob("*.sh"))


def fix_command(task: str) -> str:
    """The command that regenerates ``resources_test/<task>/`` in place."""
    return f"bash scripts/create_test_resources.sh {task}"


def regenerate(root: Path, task: str, out_root: Path, tmp_dir: Path | None = None, timeout_s: float = 900,
               env: Mapping[str, str | None] | None = None) -> None:
    """Run ``task``'s generator with its output below ``out_root/<task>/``.

    The script runs with this Python's environment first on ``PATH`` (so ``python`` and
    ``openpert`` are the ones running this check) and its shared data folder as given by
    ``$OPENPERT_SHARED_DATA`` or its default.

    Parameters
    ----------
    root
        The project root (holding ``scripts/create_test_resources/<task>.sh``).
    task
        The task's name.
    out_root
        Passed to the script as ``$OPENPERT_TEST_RESOURCES``.
    tmp_dir
        The script's ``$TMPDIR`` (default: inherited). ``openpert run-component`` keeps each job's
        work folder there, so a check that passes its own leaves nothing behind.
    timeout_s
        The script is stopped after this many seconds.
    env
        Variables set for the script on top of this process's environment; ``None`` as a value
        unsets the variable (e.g. ``{"OPENBLAS_CORETYPE": None}``).

    Raises
    ------
    RuntimeError
        When the script fails; the message ends with the end of its output.
    """
    root = Path(root).resolve()
    script = root / SCRIPTS_DIR / f"{task}.sh"
    if not script.is_file():
        raise FileNotFoundError(f"{script}: no generator for task {task}")
    script_env = dict(os.environ)
    for name, value in (env or {}).items():
        if value is None:
            script_env.pop(name, None)
        else:
            script_env[name] = value
    script_env[OUTPUT_ROOT_VARIABLE] = str(Path(out_root).resolve())
    script_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{script_env.get('PATH', '')}"
    if tmp_dir is not None:
        Path(tmp_dir).mkdir(parents=True, exist_ok=True)
        script_env["TMPDIR"] = str(Path(tmp_dir).resolve())
    proc = subprocess.run(["bash", str(script)], cwd=root, env=script_env, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise RuntimeError(f"{script.relative_to(root)} failed (exit {proc.returncode}):\n{tail}")


def check_task(root: Path, task: str, work_dir: Path, env: Mapping[str, str | None] | None = None) -> list[Difference]:
    """Regenerate ``task``'s test resources into ``work_dir`` and compare them with the committed ones.

    Parameters
    ----------
    root
        The project root.
    task
        The task's name.
    work_dir
        Where the script writes (``work_dir/resources/<task>/``) and keeps its temporary files
        (``work_dir/tmp``).
    env
        Variables set (a string) or unset (``None``) for the script, as :func:`regenerate` takes them.

    Returns
    -------
    list of Difference
        Every differing file of ``resources_test/<task>/`` (each with its first difference), by path.

    Raises
    ------
    RuntimeError
        When the script fails, or writes into ``resources_test/<task>/`` itself.
    """
    committed = Path(root) / "resources_test" / task
    before = _snapshot(committed)
    out_root = Path(work_dir) / "resources"
    regenerate(root, task, out_root, tmp_dir=Path(work_dir) / "tmp", env=env)
    # A script that ignores $OPENPERT_TEST_RESOURCES would remake the committed files in place and
    # compare them with themselves; it must be fixed, not trusted.
    if _snapshot(committed) != before:
        raise RuntimeError(f"scripts/create_test_resources/{task}.sh wrote into resources_test/{task} although "
                           f"{OUTPUT_ROOT_VARIABLE} named {out_root}: its output folder must follow that variable")
    return compare_folders(committed, out_root / task, prefix=f"{task}/")


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Each file below ``folder`` with its size and modification time."""
    return {p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else {}


def report(task: str, differences: Sequence[Difference]) -> str:
    """What a failed check says: the first difference, how many files differ, and the fix."""
    first = differences[0]
    n = len(differences) - 1
    more = f" (and {n} more file{'s' if n > 1 else ''})" if n else ""
    return (f"resources_test/{first}{more}\n"
            f"resources_test/{task} is not what scripts/create_test_resources/{task}.sh makes; "
            f"regenerate it with: {fix_command(task)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Check the tasks named (default: all) and print each differing file; 1 when any differs."""
    parser = argparse.ArgumentParser(prog="python tests/tooling/reproducible_resources.py",
                                     description="Regenerate test resources into a temporary folder and compare them with resources_test/.")
    parser.add_argument("tasks", nargs="*", help="tasks to check (default: every task with a generator)")
    parser.add_argument("--root", default=".", help="the project root (default: the current folder)")
    ns = parser.parse_args(argv)
    root = Path(ns.root).resolve()
    status = 0
    for task in ns.tasks or generator_tasks(root):
        with tempfile.TemporaryDirectory(prefix=f"openpert-resources-{task}-") as work:
            differences = check_task(root, task, Path(work))
        if differences:
            status = 1
            print("\n".join(f"resources_test/{d}" for d in differences))
            print(f"-> {fix_command(task)}")
        else:
            print(f"resources_test/{task}: as its script makes it")
    return status


if __name__ == "__main__":
    sys.exit(main())
