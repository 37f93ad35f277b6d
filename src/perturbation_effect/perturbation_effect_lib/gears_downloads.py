"""Files of GEARS's Harvard Dataverse downloads, derived for the data store (``derive`` of ``docs/data.md``).

GEARS (Roohani et al., Nature Biotechnology 2024; snap-stanford/GEARS 0.1.2, ``gears/pertdata.py``)
publishes its processed Perturb-seq screens as zip archives on Harvard Dataverse:
``PertData.load(data_name=...)`` downloads ``<data_name>.zip`` and extracts it beside itself,
then reads ``<data_name>/perturb_processed.h5ad``. On loading it also drops the perturbations of
genes outside its perturbation graph: the genes of ``essential_all_data_pert_genes.pkl`` that
have GO annotation in ``gene2go_all.pkl`` (two more Dataverse files). Ahlmann-Eltze, Huber &
Anders (2025) split what remains, so reproducing their splits needs that gene list too.

* :func:`perturb_processed`: the h5ad member of a dataset's zip, verified and extracted streaming.
* :func:`go_perturbable_genes`: GEARS's perturbable genes, from its two pickles, read without
  running any code they could carry.

Both follow the derivation contract of the data store: ``function(sources, output, **args)``
writes ``output`` from the downloaded originals named in ``sources``.
"""

from __future__ import annotations

import os
import pickle
import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

__all__ = ["HDF5_SIGNATURE", "perturb_processed", "go_perturbable_genes", "load_plain_pickle"]

#: The first bytes of an HDF5 file (an h5ad), at offset 0 or 512 * 2**k with a user block.
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_CHUNK = 1 << 20


def _source(sources: Mapping[str, Path], name: str, what: str) -> Path:
    """The original ``name`` of ``sources``, which must exist."""
    if name not in sources:
        raise KeyError(f"{what} needs the source {name!r}; got {sorted(sources)}")
    path = Path(sources[name])
    if not path.is_file():
        raise FileNotFoundError(f"{path}: {what} source {name!r} not found")
    return path


def _is_hdf5(path: Path) -> bool:
    """Whether ``path`` starts with the HDF5 signature (at 0, 512, 1024, ... as the format allows)."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        offset = 0
        while offset + len(HDF5_SIGNATURE) <= size:
            fh.seek(offset)
            if fh.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
                return True
            offset = 512 if offset == 0 else offset * 2
    return False


def perturb_processed(sources: Mapping[str, Path], output: Path, *, member: str) -> None:
    """Extract a GEARS dataset's ``perturb_processed.h5ad`` from its Dataverse zip.

    The archive is checked before anything is written: it must be a zip holding ``member`` as a
    file. The member is copied in 1 MiB chunks (the files are hundreds of MB to GBs), its CRC
    checked by :mod:`zipfile` as it is read, into a temporary file beside ``output`` that is
    renamed into place only once complete and recognised as HDF5 with an ``obs`` column
    ``condition`` (GEARS's layout). Nothing is left behind on failure.

    Parameters
    ----------
    sources
        ``{"zip": <path of the downloaded archive>}``.
    output
        Where the h5ad is written.
    member
        Its path inside the archive, e.g. ``norman/perturb_processed.h5ad`` (GEARS reads
        ``<data_name>/perturb_processed.h5ad`` after extracting ``<data_name>.zip``).

    Raises
    ------
    ValueError
        Naming the archive: when it is not a zip (e.g. an HTML error page saved in its place),
        lacks ``member`` (listing the h5ad members it has), holds it as a folder, or is damaged; or
        when the member is not a GEARS h5ad.
    KeyError, FileNotFoundError
        When ``sources`` has no ``zip`` or it does not exist.
    """
    archive = _source(sources, "zip", "perturb_processed")
    output = Path(output)
    if not zipfile.is_zipfile(archive):
        with archive.open("rb") as fh:
            head = fh.read(64)
        raise ValueError(f"{archive}: not a zip archive (starts with {head[:32]!r}); expected GEARS's Dataverse "
                         f"download holding {member}")
    tmp = output.with_name(f".{output.name}.partial")
    try:
        with zipfile.ZipFile(archive) as zf:
            try:
                info = zf.getinfo(member)
            except KeyError:
                names = [n for n in zf.namelist() if not n.startswith("__MACOSX/")]  # macOS resource forks
                found = sorted(n for n in names if n.endswith(".h5ad")) or sorted(names)[:10]
                raise ValueError(f"{archive}: the archive has no member {member!r}; it holds {found}") from None
            if info.is_dir():
                raise ValueError(f"{archive}: {member!r} is a folder in the archive, not a file")
            output.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, tmp.open("wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)
        if tmp.stat().st_size != info.file_size:
            raise ValueError(f"{archive}: {member} extracted to {tmp.stat().st_size} bytes, the archive says {info.file_size}")
        _check_gears_h5ad(tmp, f"{archive}: member {member}")
        os.replace(tmp, output)
    except zipfile.BadZipFile as err:
        raise ValueError(f"{archive}: damaged zip archive ({err}) while extracting {member}") from None
    except NotImplementedError as err:  # e.g. Deflate64, which zipfile cannot decompress
        raise ValueError(f"{archive}: {member} is compressed with a method Python's zipfile cannot read ({err})") from None
    finally:
        tmp.unlink(missing_ok=True)


def _check_gears_h5ad(path: Path, what: str) -> None:
    """Raise unless ``path`` is an HDF5 file whose ``obs`` has a ``condition`` column."""
    if not _is_hdf5(path):
        raise ValueError(f"{what} is not an HDF5 (h5ad) file")
    import h5py

    with h5py.File(path, "r") as fh:
        obs = fh.get("obs")
        if obs is None:
            raise ValueError(f"{what} has no obs: not an h5ad file")
        columns = set(obs.dtype.names or ()) if isinstance(obs, h5py.Dataset) else set(obs.keys())
    if "condition" not in columns:
        raise ValueError(f"{what} has no obs column 'condition' (GEARS's layout); found {sorted(columns)}")


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles containers, strings, numbers and NumPy arrays only; any other class is refused.

    A pickle can name any importable callable and call it while loading: a downloaded pickle is
    therefore read with a list of the few names plain data needs.
    """

    _ALLOWED = {
        ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "list"), ("builtins", "dict"),
        ("builtins", "tuple"), ("builtins", "str"), ("builtins", "int"), ("builtins", "float"),
        ("__builtin__", "set"), ("__builtin__", "frozenset"), ("__builtin__", "list"),
        ("__builtin__", "dict"), ("__builtin__", "tuple"), ("__builtin__", "str"),
        ("collections", "OrderedDict"),
        ("_codecs", "encode"),  # how protocol 2 writes bytes (e.g. a NumPy array's buffer): str -> bytes
    }
    _NUMPY = {"_reconstruct", "scalar", "ndarray", "dtype"}

    def find_class(self, module: str, name: str):
        if (module, name) in self._ALLOWED:
            import _codecs
            import builtins
            import collections

            return getattr({"collections": collections, "_codecs": _codecs}.get(module, builtins), name)
        if module in ("numpy.core.multiarray", "numpy._core.multiarray", "numpy") and name in self._NUMPY:
            reconstruct, scalar = np.zeros(1).__reduce__()[0], np.float64(0).__reduce__()[0]
            return {"_reconstruct": reconstruct, "scalar": scalar, "ndarray": np.ndarray, "dtype": np.dtype}[name]
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only plain data (containers, strings, "
                                     "numbers, NumPy arrays) is read from a downloaded pickle")


def load_plain_pickle(path: str | Path):
    """Load a pickle of plain data (containers, strings, numbers, NumPy arrays), refusing anything else.

    Raises
    ------
    ValueError
        Naming the file, when it is not a pickle of plain data.
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            return _PlainUnpickler(fh).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError) as err:
        raise ValueError(f"{path}: not a pickle of plain data ({err})") from None


def go_perturbable_genes(sources: Mapping[str, Path], output: Path) -> None:
    """GEARS's perturbable genes: the genes of its large perturbation graph that have GO annotation.

    As ``PertData.set_pert_genes`` with the default graph: the genes listed in
    ``essential_all_data_pert_genes.pkl`` that are keys of ``gene2go_all.pkl``, unique and
    sorted. ``PertData.load`` keeps a perturbation only when all its targets are among them
    (``filter_pert_in_go``); :func:`perturbation_effect_lib.pseudobulk.keep_perturbable` does
    the same with this list. Written one gene per line, after a ``#`` line naming the origin.

    Parameters
    ----------
    sources
        ``{"gene2go": <gene2go_all.pkl>, "essential": <essential_all_data_pert_genes.pkl>}``.
    output
        The gene list (text).

    Raises
    ------
    ValueError
        Naming the file, when a pickle holds anything but plain data, ``gene2go`` is not a
        mapping of gene names, ``essential`` not a collection of gene names, or they share no gene.
    """
    gene2go_path = _source(sources, "gene2go", "go_perturbable_genes")
    essential_path = _source(sources, "essential", "go_perturbable_genes")
    gene2go = load_plain_pickle(gene2go_path)
    if not isinstance(gene2go, Mapping) or not all(isinstance(g, str) for g in gene2go):
        raise ValueError(f"{gene2go_path}: expected a mapping of gene names to GO terms, got {type(gene2go).__name__}")
    essential = load_plain_pickle(essential_path)
    if isinstance(essential, np.ndarray):
        essential = essential.ravel().tolist()
    if isinstance(essential, (str, bytes)) or not isinstance(essential, (list, tuple, set, frozenset)) \
            or not all(isinstance(g, str) for g in essential):
        raise ValueError(f"{essential_path}: expected a collection of gene names, got {type(essential).__name__}")
    genes = sorted({g for g in essential if g in gene2go})
    if not genes:
        raise ValueError(f"{essential_path} and {gene2go_path} share no gene")
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.partial")
    tmp.write_text("# GEARS perturbable genes: essential_all_data_pert_genes.pkl with GO annotation in gene2go_all.pkl\n"
                   + "\n".join(genes) + "\n")
    os.replace(tmp, output)
