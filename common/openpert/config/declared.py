"""What a file declares it holds, read from its metadata before anything reads its contents.

A file a component wrote can be small on disk and enormous once read: an HDF5 dataset declared as
71 x 10,000,000 float64 with a fill value and no chunk written takes a few kilobytes and 5.3 GB
when read; gzip-compressed chunks of zeros or a parquet column of one repeated value do the same.
:func:`declared_size` reads only metadata (HDF5 object headers through h5py, a parquet footer
through pyarrow, a text file's size) and says how much memory reading the whole file takes, so
that the harness can refuse a file, read it in its own process, or read it in a process with a
memory limit (:mod:`openpert.config.bounded`).

Two figures come out of it:

``nbytes``
    The memory the file's data takes once read, as declared: elements x item size for numeric
    arrays, about :data:`STRING_BYTES` more per string (each becomes a Python object), the values
    of every parquet column. A file is refused on it.
``peak``
    What reading the file in this process may take at most: twice ``nbytes`` (the readers and the
    checks copy) plus the largest chunk a filter may inflate; ``None`` when it cannot be bounded
    from metadata (parquet: a page header may declare more than the footer, and a dictionary or
    delta-encoded strings expand beyond their pages; an HDF5 filter of unknown ratio). Only a file
    with a known, small ``peak`` is read in the harness's own process.

HDF5 files are walked link by link, not object by object: a dataset reached through a thousand
hard links is read a thousand times by anndata, and counts so. Links to other files (external
links, external storage, virtual datasets) and link cycles are refused: reading them would read
files the component chose outside its output.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

from openpert.files import format_bytes

#: Bytes counted for each string element once read: a pointer and a Python ``str`` (49 bytes empty).
STRING_BYTES = 56
#: Most objects (links) an HDF5 file may hold: each costs a visit before reading.
MAX_OBJECTS = 200_000
#: Most column chunks (row groups x columns) of a parquet footer that are summed.
MAX_COLUMN_CHUNKS = 200_000
#: Memory of a text file once parsed, per byte on disk (Python objects for every number and string).
TEXT_FACTORS = {"csv": 16, "tsv": 16, "json": 32, "jsonl": 32, "yaml": 64}
#: Most a byte stored through an HDF5 filter can inflate to: zlib's 1032:1, LZF's 88:1 (rounded
#: up); shuffle and fletcher32 do not change sizes. A filter not listed has no known bound.
FILTER_RATIOS = {1: 1032, 2: 1, 3: 1, 32000: 100}
#: Chunks of one filtered dataset that are listed to find its largest; beyond, the total stands in.
MAX_LISTED_CHUNKS = 10_000


class RefusedFile(ValueError):
    """A file whose metadata cannot be trusted to read (links to other files, cycles, too many objects)."""


@dataclasses.dataclass(frozen=True)
class Element:
    """One HDF5 dataset as declared: where, its shape and dtype, and what reading it takes."""

    path: str
    shape: tuple[int, ...] | None
    dtype: str
    nbytes: int
    #: The most one chunk may inflate to when read; ``None``: a filter of unknown ratio.
    inflation: int | None = 0
    #: Its values live in the file's heap (variable-length strings): their lengths are not declared.
    heap: bool = False

    def describe(self) -> str:
        """``layers/extra: 71 x 10,000,000 float64 (5.3 GB)``."""
        dims = " x ".join(f"{d:,}" for d in self.shape) if self.shape else "scalar"
        return f"{self.path}: {dims} {self.dtype} ({format_bytes(self.nbytes)})"


@dataclasses.dataclass(frozen=True)
class Declared:
    """What a file declares: the memory reading it takes, and its rows and columns where it says.

    Attributes
    ----------
    nbytes
        Memory its data takes once read, as declared (see the module's notes).
    peak
        Most that reading it in this process may take; ``None`` when metadata cannot bound it.
    on_disk
        Its size on disk.
    largest
        The largest element, as a phrase for messages.
    n_obs, n_vars
        Of an h5ad file: the lengths of its obs and var indexes.
    n_rows
        Of a table: its rows (parquet); of an h5ad file: ``n_obs``.
    elements
        Of an HDF5 file: path -> :class:`Element`, every dataset, by every link.
    """

    nbytes: int
    peak: int | None
    on_disk: int
    largest: str = ""
    n_obs: int | None = None
    n_vars: int | None = None
    n_rows: int | None = None
    elements: dict[str, Element] = dataclasses.field(default_factory=dict, repr=False)

    def under(self, prefix: str) -> tuple[int, int | None]:
        """``(nbytes, peak)`` of reading the HDF5 elements at and below ``prefix`` alone.

        Variable-length strings count the file's size on top: their lengths are not declared, and
        the file holds them.
        """
        inside = [e for p, e in self.elements.items() if p == prefix or p.startswith(prefix + "/")]
        nbytes = sum(e.nbytes for e in inside) + (self.on_disk if any(e.heap for e in inside) else 0)
        inflations = [e.inflation for e in inside]
        if any(i is None for i in inflations):
            return nbytes, None
        return nbytes, 2 * nbytes + max(inflations, default=0)


def declared_size(path: str | os.PathLike, ftype: str) -> Declared:
    """What reading the file at ``path`` as ``ftype`` takes, from its metadata alone.

    Parameters
    ----------
    path
        The file.
    ftype
        One of :data:`openpert.config.formats.FILE_TYPES`.

    Raises
    ------
    RefusedFile
        When the metadata itself is hostile: links to other files, a link cycle, more than
        :data:`MAX_OBJECTS` objects.
    OSError, ValueError
        When the metadata cannot be read (not an HDF5 or parquet file); the caller says the file
        cannot be read as its type.
    """
    path = Path(path)
    if ftype == "h5ad":
        return _declared_hdf5(path)
    if ftype == "parquet":
        return _declared_parquet(path)
    size = path.stat().st_size
    return Declared(nbytes=size, peak=size * TEXT_FACTORS.get(ftype, 64), on_disk=size,
                    largest=f"{format_bytes(size)} of {ftype} text")


# --- HDF5 -----------------------------------------------------------------------------------------
def _element_bytes(dtype: Any) -> int:
    """Memory of one element of ``dtype`` once read (strings become Python objects)."""
    if dtype.kind == "O":  # variable-length strings and sequences, references
        return STRING_BYTES
    if dtype.kind in "SU":  # fixed-length strings are decoded to str objects
        return dtype.itemsize + STRING_BYTES
    if dtype.names:
        objects = sum(1 for name in dtype.names if dtype.fields[name][0].kind == "O")
        return dtype.itemsize + objects * STRING_BYTES
    return dtype.itemsize


class _HDF5Walk:
    """Every dataset of an HDF5 file, by every link that reaches it (h5py's low-level API: a visit
    costs microseconds, and a dataset file can hold thousands of objects).

    Attributes are not visited: they are stored whole and uncompressed in object headers, so what
    they take once read is bounded by the file's own size, which counts once.
    """

    def __init__(self) -> None:
        self.objects = 0
        self.elements: dict[str, Element] = {}

    def visit(self, group: Any, where: str, ancestors: frozenset) -> None:
        import h5py

        if group in ancestors:
            raise RefusedFile(f"{where}: a link back to a group that holds it (a cycle)")
        inside = ancestors | {group}
        self.objects += group.get_num_objs()
        if self.objects > MAX_OBJECTS:
            raise RefusedFile(f"{where or '/'}: more than {MAX_OBJECTS:,} objects")
        for raw in group:
            name = raw.decode(errors="replace")
            path = f"{where}/{name}" if where else name
            if group.links.get_info(raw).type == h5py.h5l.TYPE_EXTERNAL:
                target = group.links.get_val(raw)
                raise RefusedFile(f"{path}: a link to another file ({target[0].decode(errors='replace')}:"
                                  f"{target[1].decode(errors='replace')})")
            try:
                child = h5py.h5o.open(group, raw)
            except KeyError:
                raise RefusedFile(f"{path}: a link to nothing") from None
            if isinstance(child, h5py.h5g.GroupID):
                self.visit(child, path, inside)
            elif isinstance(child, h5py.h5d.DatasetID):
                self._dataset(child, path)

    def _dataset(self, dset: Any, where: str) -> None:
        import h5py

        plist = dset.get_create_plist()
        if plist.get_layout() == h5py.h5d.VIRTUAL:
            raise RefusedFile(f"{where}: a virtual dataset (its data lies in other files)")
        if plist.get_external_count():
            raise RefusedFile(f"{where}: stores its data in another file "
                              f"({plist.get_external(0)[0].decode(errors='replace')!r})")
        shape = dset.shape
        n = math.prod(shape) if shape is not None else 0
        dtype = dset.dtype
        self.elements[where] = Element(where, shape, str(dtype), n * _element_bytes(dtype), _inflation(dset, plist),
                                       heap=dtype.kind == "O" or bool(dtype.names and dtype.hasobject))


def _inflation(dset: Any, plist: Any) -> int | None:
    """The most one chunk of ``dset`` may inflate to when its filters undo (0: no filter that inflates).

    HDF5 does not hold a chunk's filtered data to its declared size: a chunk declared as 8 kB can
    hold deflate data that inflates to a gigabyte, which the library inflates whole before keeping
    8 kB of it. The bound is the largest stored chunk times the filters' largest ratio.
    """
    import h5py

    if plist.get_layout() != h5py.h5d.CHUNKED:
        return 0
    ratio = 1
    for index in range(plist.get_nfilters()):
        code = plist.get_filter(index)[0]
        if code not in FILTER_RATIOS:
            return None
        ratio *= FILTER_RATIOS[code]
    if ratio == 1:
        return 0
    stored = dset.get_storage_size()
    if stored * ratio > 2**24 and dset.get_num_chunks() <= MAX_LISTED_CHUNKS:
        largest = [0]

        def note(chunk: Any) -> None:
            largest[0] = max(largest[0], chunk.size)

        dset.chunk_iter(note)
        stored = largest[0]
    return stored * ratio


def _index_length(file: Any, axis: str, elements: dict[str, Element]) -> int | None:
    """Length of the obs or var index of an h5ad file, from its declared shape."""
    group = file.get(axis)
    if group is None:
        return None
    name = group.attrs.get("_index", "_index")
    name = name.decode() if isinstance(name, bytes) else str(name)
    element = elements.get(f"{axis}/{name}")
    return element.shape[0] if element is not None and element.shape else None


def _declared_hdf5(path: Path) -> Declared:
    import h5py

    on_disk = path.stat().st_size
    with h5py.File(path, "r") as file:
        walk = _HDF5Walk()
        walk.visit(h5py.h5g.open(file.id, b"/"), "", frozenset())
        n_obs = _index_length(file, "obs", walk.elements)
        n_vars = _index_length(file, "var", walk.elements)
    elements = walk.elements
    # Variable-length strings live in the file's heap, outside the declared shapes: the file's own
    # size bounds them.
    nbytes = sum(e.nbytes for e in elements.values()) + on_disk
    inflations = [e.inflation for e in elements.values()]
    peak = None if any(i is None for i in inflations) else 2 * nbytes + max(inflations, default=0)
    largest = max(elements.values(), key=lambda e: e.nbytes, default=None)
    return Declared(nbytes=nbytes, peak=peak, on_disk=on_disk, largest=largest.describe() if largest else "",
                    n_obs=n_obs, n_vars=n_vars, n_rows=n_obs, elements=elements)


# --- parquet --------------------------------------------------------------------------------------
#: Bytes per value of parquet's physical types once read (INT96 timestamps become 8-byte ones).
_PHYSICAL_BYTES = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 8, "FLOAT": 4, "DOUBLE": 8}


def _declared_parquet(path: Path) -> Declared:
    import pyarrow.parquet as pq

    on_disk = path.stat().st_size
    meta = pq.read_metadata(path)
    chunks = meta.num_row_groups * meta.num_columns
    if chunks > MAX_COLUMN_CHUNKS:
        raise RefusedFile(f"{meta.num_row_groups:,} row groups x {meta.num_columns:,} columns: more than "
                          f"{MAX_COLUMN_CHUNKS:,} column chunks")
    values = [0] * meta.num_columns
    encoded = [0] * meta.num_columns
    for group in range(meta.num_row_groups):
        row_group = meta.row_group(group)
        for column in range(meta.num_columns):
            chunk = row_group.column(column)
            values[column] += chunk.num_values
            encoded[column] += chunk.total_uncompressed_size
    sizes = []
    for column in range(meta.num_columns):
        leaf = meta.schema.column(column)
        n = max(values[column], meta.num_rows)
        per = _PHYSICAL_BYTES.get(leaf.physical_type)
        if per is None:  # byte arrays: a Python object per value, and the bytes themselves
            size = n * STRING_BYTES + encoded[column]
            dtype = "strings" if leaf.physical_type == "BYTE_ARRAY" else leaf.physical_type.lower()
        else:
            size, dtype = n * per, leaf.physical_type.lower()
        sizes.append((size, f"column {leaf.path}: {n:,} {dtype} ({format_bytes(size)})"))
    largest = max(sizes, default=(0, ""))[1]
    # peak None: a page header may declare (and inflate to) more than the footer says, so a parquet
    # file is only ever read in a process with a memory limit.
    return Declared(nbytes=sum(s for s, _ in sizes), peak=None, on_disk=on_disk, largest=largest, n_rows=meta.num_rows)
