"""Derive the plain-text tables of the shared data from the R data files (``.rda``) they were made from.

Two public R packages ship data this project uses as tab-separated files of its shared data folder:

- DoRothEA (saezlab/dorothea, ``data/dorothea_hs.rda``): human TF → target regulons with a confidence
  level (A, most confident, to E) and a sign (``mor``, mode of regulation). :func:`dorothea_regulons`
  keeps the edges of the given confidence levels: ``knowledge_graphs/dorothea_hs_ABC.tsv``.
- perturbplan (Katsevich-Lab/perturbplan, ``data/<dataset>.rda``): per gene of a single-cell reference,
  the relative expression and the negative-binomial size. :func:`perturbplan_baseline` writes that
  table: ``basal_expression/singlecell_baseline_<dataset>.tsv``.

Both follow the ``derive`` contract of the data manifests (docs/data.md): ``function(sources, output,
**args)``, where ``sources`` maps the ``name`` of each original (here ``rda``) to its path in the data
store. Each writes the file byte for byte as the shared data folder holds it, so that the result is
verified by the manifest's sha256:

- the DoRothEA table was written by pandas (``to_csv(sep="\\t", index=False)``): ``mor`` as Python
  writes a float (``1.0``, ``-1.0``);
- the perturbplan tables were written by R (``write.table(sep="\\t", quote=FALSE, row.names=FALSE)``):
  numbers with up to 15 significant digits, in fixed or scientific notation as R chooses
  (:func:`format_r_double`).

Rows keep the order of the original, the files have a header line and end lines with ``\\n``.
R data files are read by :mod:`pertsci.r_serialization` (R lists included, which perturbplan's
objects are). An original that cannot be read, or does not hold the expected table, raises
:class:`RDataError` naming the file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pertsci import r_serialization

#: The columns of DoRothEA's regulon table, in the order written.
DOROTHEA_COLUMNS = ("tf", "confidence", "target", "mor")
#: DoRothEA's confidence levels.
DOROTHEA_LEVELS = ("A", "B", "C", "D", "E")
#: The columns of perturbplan's ``baseline_expression_stats``, in the order written.
BASELINE_COLUMNS = ("response_id", "relative_expression", "expression_size")

#: The key of the original in ``sources`` (the ``name`` of its ``derive.from`` entry).
SOURCE = "rda"

# R's print precision for write.table (DBL_DIG).
_R_DIGITS = 15


class RDataError(ValueError):
    """An original R data file that cannot be read, or does not hold the table expected of it."""


def read_rda(path: Path) -> dict[str, Any]:
    """The objects of an R data file, converted to Python (:func:`pertsci.r_serialization.to_python`).

    Parameters
    ----------
    path
        An ``.rda`` / ``.RData`` file, as R's ``save()`` writes it (any compression).

    Returns
    -------
    dict
        Object name → value: a data frame (also a tibble) as a :class:`pandas.DataFrame`, a named
        list as a ``dict``, a vector as a :class:`numpy.ndarray`.

    Raises
    ------
    RDataError
        When the file is missing or is not a readable R data file; the message names it.
    """
    path = Path(path)
    if not path.is_file():
        raise RDataError(f"{path}: no such R data file")
    try:
        return r_serialization.read_rda(path)
    except r_serialization.RSerializationError as err:  # its message names the file
        raise RDataError(str(err)) from None


def format_r_double(x: float) -> str:
    """A double as R's ``write.table`` writes it (R on x86-64, ``scipen = 0``).

    R writes each number with at most 15 significant digits, without trailing zeros, in fixed
    notation unless scientific notation is narrower: ``1.1249688018027e-07``, ``0.000123``,
    ``414.442808521051``, ``1e+05``. Missing values and not-a-number are ``NA``, infinities
    ``Inf`` / ``-Inf``.

    Parameters
    ----------
    x
        The number.

    Returns
    -------
    str
        Its text, byte for byte as R writes it.

    Notes
    -----
    How many digits R keeps is not the correctly rounded 15-digit decimal: R scales ``|x|`` by a
    power of ten in x87 extended precision (a 64-bit significand, rounded to nearest even) and
    rounds that to an integer, so a number whose 16th and later digits are within rounding error of
    a half can lose a digit (``5.93214804296379499...e-05`` is written ``5.9321480429638e-05``, not
    ``5.93214804296379e-05``). This function does the same arithmetic exactly, with integers
    (:func:`_r_significant_digits`); the digits themselves are then those of C's ``printf``, which
    Python's formatting equals.
    """
    x = float(x)
    if math.isnan(x):
        return "NA"  # write.table writes NA and NaN alike
    if math.isinf(x):
        return "Inf" if x > 0 else "-Inf"
    if x == 0.0:
        return "0"  # R drops the sign of a zero
    neg = int(x < 0)
    kpower, nsig, widens = _r_significant_digits(abs(x))
    left = kpower + 1 - widens
    sleft = neg + (left if left > 0 else 1)
    rgt = max(nsig - left, 0)
    width_fixed = sleft + rgt + (rgt != 0)
    exp_digits = 2 if (left > 100 or left <= -99) else 1
    width_sci = neg + (nsig > 1) + (nsig - 1) + 4 + exp_digits
    if width_fixed <= width_sci:
        return f"{x:.{rgt}f}"
    return f"{x:.{nsig - 1}e}"


# x87 extended precision: the significand has 64 bits.
_LD_BITS = 64
# The largest power of ten in R's table of them (larger ones come from powl).
_KP_MAX = 27


def _ld_round(num: int, den: int) -> tuple[int, int]:
    """``num / den`` (both > 0) rounded to a 64-bit significand, to nearest even: ``(q, s)``, value ``q * 2**s``."""
    s = num.bit_length() - den.bit_length() - _LD_BITS
    while True:
        n, d = (num, den << s) if s >= 0 else (num << -s, den)
        q, rem = divmod(n, d)
        if q >= 1 << _LD_BITS:
            s += 1
        elif q < 1 << (_LD_BITS - 1):
            s -= 1
        else:
            break
    if 2 * rem > d or (2 * rem == d and q & 1):
        q += 1
        if q == 1 << _LD_BITS:
            q, s = q >> 1, s + 1
    return q, s


def _ld_ratio(q: int, s: int) -> tuple[int, int]:
    """``q * 2**s`` as ``(num, den)``."""
    return (q << s, 1) if s >= 0 else (q, 1 << -s)


def _r_power_of_ten(k: int) -> tuple[int, int]:
    """R's table entry for ``10**k`` (0 <= k <= 27) as ``(num, den)``.

    The table is of long doubles but written with double constants: ``1e23`` to ``1e27`` are the
    doubles nearest those powers, not the powers themselves.
    """
    return (10**k, 1) if k <= 22 else float(10**k).as_integer_ratio()


def _r_significant_digits(r: float) -> tuple[int, int, bool]:
    """R's decimal exponent, number of significant digits (at most 15) and "rounding widens" of ``r > 0``.

    The arithmetic of R's ``scientific()`` (src/main/format.c) at 15 digits, done exactly: ``r``
    scaled to 15 integer digits in extended precision, rounded to an integer (half to even), its
    trailing zeros dropped. "Rounding widens" is true when that rounding reached the next power of
    ten although ``r`` is further below it than fixed notation rounds: fixed notation then has one
    integer digit fewer than the exponent says.
    """
    digits = _R_DIGITS
    num, den = r.as_integer_ratio()
    kp = math.floor(math.log10(r)) - digits + 1  # the C library's log10, as R's
    if kp > 0 and kp <= _KP_MAX:
        pn, pd = _r_power_of_ten(kp)
        q, s = _ld_round(num * pd, den * pn)
    elif kp < 0 and -kp <= _KP_MAX:
        pn, pd = _r_power_of_ten(-kp)
        q, s = _ld_round(num * pn, den * pd)
    elif kp == 0:
        q, s = _ld_round(num, den)
    else:  # powl(10, kp), taken as correctly rounded, then a rounded division
        pn, pd = _ld_ratio(*(_ld_round(10**kp, 1) if kp > 0 else _ld_round(1, 10**-kp)))
        q, s = _ld_round(num * pd, den * pn)
    n, d = _ld_ratio(q, s)
    if n < 10 ** (digits - 1) * d:
        q, s = _ld_round(10 * n, d)
        kp -= 1
    n, d = _ld_ratio(q, s)
    alpha, rem = divmod(n, d)  # nearbyintl: to nearest, ties to even
    if 2 * rem > d or (2 * rem == d and alpha & 1):
        alpha += 1
    value = float(alpha)
    nsig = digits
    for _ in range(digits):
        value /= 10.0
        if value == math.floor(value):
            nsig -= 1
        else:
            break
    if nsig == 0:
        nsig, kp = 1, kp + 1
    kpower = kp + digits - 1
    rgt = min(max(digits - kpower, 0), _KP_MAX)
    fuzz = 0.5 / float(10**rgt)  # (double) of the table entry, then a double division
    widens = False
    if 0 < kpower <= _KP_MAX:
        fn, fd = fuzz.as_integer_ratio()
        pn, pd = _r_power_of_ten(kpower)
        tn, td = _ld_ratio(*_ld_round(pn * fd - fn * pd, pd * fd))
        widens = num * td < tn * den
    return kpower, nsig, widens


def _source(sources: Mapping[str, Path], function: str) -> Path:
    if set(sources) != {SOURCE}:
        raise ValueError(f"{function}: sources must be {{{SOURCE!r}: <path of the .rda>}}, got the names {sorted(sources)}")
    return Path(sources[SOURCE])


def _single_object(objects: dict[str, Any], path: Path, name: str | None) -> Any:
    if name is not None:
        if name not in objects:
            raise RDataError(f"{path}: holds no R object {name!r} (it holds {sorted(objects)})")
        return objects[name]
    if len(objects) != 1:
        raise RDataError(f"{path}: holds {len(objects)} R objects {sorted(objects)}; name the one to read")
    return next(iter(objects.values()))


def _table(value: Any, path: Path, what: str, columns: Sequence[str]) -> pd.DataFrame:
    if not isinstance(value, pd.DataFrame):
        raise RDataError(f"{path}: {what} is not a data frame (found {type(value).__name__})")
    missing = [c for c in columns if c not in value.columns]
    if missing:
        raise RDataError(f"{path}: {what} lacks the columns {missing} (it has {list(value.columns)})")
    return value


def _text_column(values: pd.Series, path: Path, column: str) -> list[str]:
    out = []
    for v in values:
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            raise RDataError(f"{path}: column {column!r} has a missing value")
        s = str(v)
        if "\t" in s or "\n" in s or "\r" in s:
            raise RDataError(f"{path}: column {column!r} has a value with a tab or line break: {s!r}")
        out.append(s)
    return out


def _number_column(values: pd.Series, path: Path, column: str, fmt: Callable[[float], str]) -> list[str]:
    try:
        numbers = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise RDataError(f"{path}: column {column!r} is not numeric (dtype {values.dtype})") from None
    return [fmt(v) for v in numbers.tolist()]


def _write_tsv(output: Path, header: Sequence[str], columns: Iterable[list[str]]) -> None:
    lines = ["\t".join(header)] + ["\t".join(row) for row in zip(*columns)]
    Path(output).write_text("\n".join(lines) + "\n", encoding="utf-8", newline="\n")


def dorothea_regulons(sources: dict[str, Path], output: Path, *, confidence: list[str]) -> None:
    """Write DoRothEA's regulons of the given confidence levels as a tab-separated file.

    Parameters
    ----------
    sources
        ``{"rda": path}``: DoRothEA's ``data/dorothea_hs.rda`` (or ``dorothea_mm.rda``): one data
        frame with the columns ``tf``, ``confidence``, ``target``, ``mor``.
    output
        The file to write: a header line of the four column names, then the kept edges in the
        original's order, tab-separated; ``mor`` as Python writes a float (``1.0``, ``-1.0``).
    confidence
        The confidence levels to keep, e.g. ``["A", "B", "C"]``.

    Raises
    ------
    RDataError
        When the original cannot be read or is not such a table (the message names the file).
    ValueError
        When ``confidence`` is empty or names a level other than A-E.
    """
    levels = list(confidence)
    if not levels or any(c not in DOROTHEA_LEVELS for c in levels):
        raise ValueError(f"dorothea_regulons: confidence must be a non-empty list of {list(DOROTHEA_LEVELS)}, got {confidence!r}")
    path = _source(sources, "dorothea_regulons")
    table = _table(_single_object(read_rda(path), path, None), path, "the regulon table", DOROTHEA_COLUMNS)
    kept = table[table["confidence"].astype(object).isin(levels).to_numpy(dtype=bool)]
    columns = [_text_column(kept[c], path, c) for c in DOROTHEA_COLUMNS[:3]]
    columns.append(_number_column(kept["mor"], path, "mor", repr))
    _write_tsv(output, DOROTHEA_COLUMNS, columns)


def perturbplan_baseline(sources: dict[str, Path], output: Path, *, object_name: str | None = None,
                         table: str = "baseline_expression_stats") -> None:
    """Write a perturbplan reference's per-gene expression statistics as a tab-separated file.

    Parameters
    ----------
    sources
        ``{"rda": path}``: a perturbplan ``data/<dataset>.rda`` (``K562_Gasperini.rda``, ...): a
        list whose element ``table`` is a data frame with the columns ``response_id`` (Ensembl gene
        id), ``relative_expression`` (fraction of a cell's UMIs) and ``expression_size`` (the
        negative-binomial size).
    output
        The file to write, as R's ``write.table(sep = "\\t", quote = FALSE, row.names = FALSE)``
        writes the table: a header line of the three column names, rows in the original's order,
        numbers as :func:`format_r_double`.
    object_name
        The name of the R object in the file; ``None``: the file's only object.
    table
        The element of the list to write.

    Raises
    ------
    RDataError
        When the original cannot be read or does not hold such a table (the message names the file).
    """
    path = _source(sources, "perturbplan_baseline")
    value = _single_object(read_rda(path), path, object_name)
    if not isinstance(value, dict) or table not in value:
        found = sorted(map(str, value)) if isinstance(value, dict) else type(value).__name__
        raise RDataError(f"{path}: the R object is not a list with an element {table!r} (found {found})")
    stats = _table(value[table], path, f"element {table!r}", BASELINE_COLUMNS)
    columns = [_text_column(stats["response_id"], path, "response_id")]
    columns += [_number_column(stats[c], path, c, format_r_double) for c in BASELINE_COLUMNS[1:]]
    _write_tsv(output, BASELINE_COLUMNS, columns)
