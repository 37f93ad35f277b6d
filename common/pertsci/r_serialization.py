"""Read R data files (``.rda``, ``.RData``) as R's ``save()`` writes them, into Python objects.

A data file is R's serialization format (*R Internals*, section 1.8 "Serialization Formats"; the
reference is R's ``src/main/serialize.c``), in XDR (big-endian binary), version 2 or 3, behind
the magic line ``RDX2`` / ``RDX3`` and compressed with gzip, bzip2 or xz (or not at all). It is
a pairlist of the saved objects, each tagged with its name.

Every item starts with a 32-bit flags word: its type (the low 8 bits), whether it is an object
(bit 8), has attributes (bit 9) or a tag (bit 10), and its "levels" (the high bits: a string's
encoding). What follows depends on the type:

- vectors (logical, integer, double, complex, character, list, expression, raw): a length, then
  the elements, then the attributes when it has them;
- pairlists (and calls, closures, promises): attributes, tag, head, then the rest of the list;
- symbols, environments, namespaces and packages are written once and later referred to by their
  index in a table of references (``REFSXP``);
- ALTREP objects (R >= 3.5: compact integer and double sequences, wrappers): their class, their
  state and their attributes.

:func:`read_rda` reads what packages' data files hold (vectors, factors, data frames and tibbles,
lists) and converts it as :func:`to_python` says. It reads the format itself rather than through
a general R-object library, because such libraries bring array-labelling packages that then load
with every anndata import of every job (``anndata`` imports ``xarray`` whenever it is installed).
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# The item types read here (serialize.c / Rinternals.h); any other (byte code, ...) is an error.
SYMSXP, LISTSXP, CLOSXP, ENVSXP, PROMSXP, LANGSXP = 1, 2, 3, 4, 5, 6
SPECIALSXP, BUILTINSXP, CHARSXP, LGLSXP, INTSXP, REALSXP, CPLXSXP = 7, 8, 9, 10, 13, 14, 15
STRSXP, DOTSXP, VECSXP, EXPRSXP, EXTPTRSXP, WEAKREFSXP, RAWSXP, S4SXP = 16, 17, 19, 20, 22, 23, 24, 25
ALTREP_SXP, ATTRLISTSXP, ATTRLANGSXP, BASEENV_SXP, EMPTYENV_SXP = 238, 239, 240, 241, 242
PERSISTSXP, PACKAGESXP, NAMESPACESXP, BASENAMESPACE_SXP = 247, 248, 249, 250
MISSINGARG_SXP, UNBOUNDVALUE_SXP, GLOBALENV_SXP, NILVALUE_SXP, REFSXP = 251, 252, 253, 254, 255

#: R's missing integer and logical value.
NA_INTEGER = -(2**31)

_PAIRLISTS = {LISTSXP, LANGSXP, CLOSXP, PROMSXP, DOTSXP, ATTRLISTSXP, ATTRLANGSXP}
_SINGLETONS = {NILVALUE_SXP: "NULL", EMPTYENV_SXP: "emptyenv", BASEENV_SXP: "baseenv", GLOBALENV_SXP: "globalenv",
               UNBOUNDVALUE_SXP: "unbound", MISSINGARG_SXP: "missing", BASENAMESPACE_SXP: "base namespace"}
_NUMERIC = {LGLSXP: ">i4", INTSXP: ">i4", REALSXP: ">f8", CPLXSXP: ">c16"}
# A string's encoding, from its levels: Latin-1, else UTF-8 (ASCII included).
_LATIN1 = 1 << 2


class RSerializationError(ValueError):
    """The bytes are not R's serialization format, or hold something this reader does not read."""


@dataclass
class RObject:
    """One R object as serialized: its type, its value and its attributes (name -> object).

    ``value`` is a numpy array for an atomic vector (strings: an object array, ``None`` for
    ``NA``), a list of :class:`RObject` for a list, a list of ``(tag, RObject)`` for a pairlist,
    the name for a symbol, ``None`` for ``NULL``.
    """

    type: int
    value: Any = None
    attributes: dict[str, RObject] = field(default_factory=dict)

    def classes(self) -> list[str]:
        """The object's ``class`` attribute (empty when it has none)."""
        cls = self.attributes.get("class")
        return [str(c) for c in cls.value] if cls is not None and cls.type == STRSXP else []


NULL = RObject(NILVALUE_SXP)


def _decompress(data: bytes) -> bytes:
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if data[:3] == b"BZh":
        return bz2.decompress(data)
    if data[:6] == b"\xfd7zXZ\x00":
        return lzma.decompress(data)
    return data


class _Reader:
    """Reads items from the XDR bytes of one serialization, keeping its table of references."""

    def __init__(self, data: bytes, offset: int):
        self.data = data
        self.pos = offset
        self.refs: list[RObject] = []

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise RSerializationError(f"the data end {end - len(self.data)} bytes early (at byte {self.pos})")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def int(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def length(self) -> int:
        n = self.int()
        if n == -1:  # a long vector: two more words
            upper, lower = struct.unpack(">II", self._take(8))
            n = (upper << 32) + lower
        if n < 0:
            raise RSerializationError(f"a negative length ({n}) at byte {self.pos}")
        return n

    def string(self, flags: int) -> str | None:
        """A CHARSXP's text (after its flags), ``None`` for ``NA``."""
        n = self.int()
        if n == -1:
            return None
        return self._take(n).decode("latin-1" if (flags >> 12) & _LATIN1 else "utf-8")

    def strings(self) -> np.ndarray:
        """A character vector's elements (after its flags): one loop over the bytes, the format's hot path."""
        n = self.length()
        if 8 * n > len(self.data) - self.pos:  # each element takes 8 bytes at least: no allocation for a false length
            raise RSerializationError(f"the data end before the {n} elements of a character vector "
                                      f"({len(self.data) - self.pos} bytes left at byte {self.pos})")
        out = np.empty(n, dtype=object)
        data, pos, unpack = self.data, self.pos, struct.unpack_from
        for i in range(n):
            if pos + 8 > len(data):
                raise RSerializationError(f"the data end inside a character vector (at byte {pos})")
            flags, size = unpack(">ii", data, pos)
            pos += 8
            if flags & 0xFF != CHARSXP:
                raise RSerializationError(f"a character vector holds an item of type {flags & 0xFF} at byte {pos - 8}")
            if size == -1:
                out[i] = None
                continue
            if pos + size > len(data):
                raise RSerializationError(f"the data end inside a character vector (at byte {pos})")
            out[i] = data[pos:pos + size].decode("latin-1" if (flags >> 12) & _LATIN1 else "utf-8")
            pos += size
        self.pos = pos
        return out

    def attributes(self) -> dict[str, RObject]:
        pairs = self.item()
        if pairs.type not in _PAIRLISTS:
            raise RSerializationError(f"attributes that are no pairlist (type {pairs.type}) before byte {self.pos}")
        return {str(tag): value for tag, value in pairs.value}

    def item(self) -> RObject:  # noqa: C901 - one branch per kind of item, as the format lists them
        flags = self.int()
        kind = flags & 0xFF
        if kind in _SINGLETONS:
            return NULL if kind == NILVALUE_SXP else RObject(kind, _SINGLETONS[kind])
        if kind == REFSXP:
            index = flags >> 8 or self.int()
            if not 0 < index <= len(self.refs):
                raise RSerializationError(f"a reference to item {index} of {len(self.refs)} at byte {self.pos}")
            return self.refs[index - 1]
        if kind in (PERSISTSXP, PACKAGESXP, NAMESPACESXP):
            if self.int() != 0:
                raise RSerializationError(f"a malformed name of a namespace or package at byte {self.pos}")
            obj = RObject(kind, self.strings())
            self.refs.append(obj)
            return obj
        if kind == SYMSXP:
            name = self.item()
            obj = RObject(SYMSXP, name.value)
            self.refs.append(obj)
            return obj
        if kind == ENVSXP:
            self.int()  # locked
            obj = RObject(ENVSXP)
            self.refs.append(obj)  # before its contents, which may refer to it
            enclosure, frame, table = self.item(), self.item(), self.item()
            obj.value = {"enclosure": enclosure, "frame": frame, "hashtab": table}
            attributes = self.item()
            if attributes.type in _PAIRLISTS:
                obj.attributes = {str(tag): value for tag, value in attributes.value}
            return obj
        if kind in _PAIRLISTS:
            return self._pairlist(flags)
        if kind == CHARSXP:
            return RObject(CHARSXP, self.string(flags))
        if kind in _NUMERIC:
            n = self.length()
            size = np.dtype(_NUMERIC[kind]).itemsize
            obj = RObject(kind, np.frombuffer(self._take(n * size), dtype=_NUMERIC[kind]).astype(_NUMERIC[kind][1:]))
        elif kind == STRSXP:
            obj = RObject(kind, self.strings())
        elif kind in (VECSXP, EXPRSXP):
            obj = RObject(kind, [self.item() for _ in range(self.length())])
        elif kind == RAWSXP:
            obj = RObject(kind, self._take(self.length()))
        elif kind in (SPECIALSXP, BUILTINSXP):
            obj = RObject(kind, self._take(self.int()).decode("ascii"))
        elif kind == S4SXP:
            obj = RObject(kind)
        elif kind == EXTPTRSXP:
            obj = RObject(kind)
            self.refs.append(obj)
            obj.value = (self.item(), self.item())  # protected value, tag
        elif kind == WEAKREFSXP:
            obj = RObject(kind)
            self.refs.append(obj)
        elif kind == ALTREP_SXP:
            return self._altrep()
        else:
            raise RSerializationError(f"an R object of type {kind} (byte code or another kind this reader does not "
                                      f"read) at byte {self.pos - 4}")
        if flags & (1 << 9):
            obj.attributes = self.attributes()
        return obj

    def _pairlist(self, flags: int) -> RObject:
        """A pairlist and its rest, read as a loop (a long list would otherwise recurse once per element)."""
        head = RObject(flags & 0xFF, [])
        while True:
            if flags & (1 << 9):
                attributes = self.attributes()
                if not head.value:
                    head.attributes = attributes
            tag = self.item().value if flags & (1 << 10) else None
            head.value.append((tag, self.item()))
            flags = self.int()
            if flags & 0xFF not in _PAIRLISTS:
                self.pos -= 4  # not a cell of this list: its end (NULL) or a value to read as an item
                rest = self.item()
                if rest.type != NILVALUE_SXP:
                    head.value.append((None, rest))  # a dotted pair's last value
                return head

    def _altrep(self) -> RObject:
        """An ALTREP object: its class, state and attributes, expanded to the vector it stands for."""
        info, state, attributes = self.item(), self.item(), self.item()
        name = info.value[0][1].value if info.type in _PAIRLISTS and info.value else None
        if name in ("compact_intseq", "compact_realseq"):
            n, start, step = (float(v) for v in state.value[:3])
            if not 0 <= n < 2**52:
                raise RSerializationError(f"a compact sequence of {n} elements before byte {self.pos}")
            values = start + step * np.arange(int(n))
            obj = RObject(INTSXP, values.astype(np.int32)) if name == "compact_intseq" else RObject(REALSXP, values)
        elif isinstance(name, str) and name.startswith("wrap_"):
            obj = RObject(state.value[0].type, state.value[0].value, dict(state.value[0].attributes))
        elif name == "deferred_string":
            source = state.value[0][1]
            if source.type != INTSXP:
                raise RSerializationError(f"a deferred string vector of R type {source.type} (only integers are read) "
                                          f"before byte {self.pos}")
            obj = RObject(STRSXP, np.array([None if v == NA_INTEGER else str(v) for v in source.value.tolist()], dtype=object))
        else:
            raise RSerializationError(f"an ALTREP object of class {name!r}, which this reader does not read, before byte {self.pos}")
        if attributes.type in _PAIRLISTS:
            obj.attributes = {str(tag): value for tag, value in attributes.value}
        return obj


def read_serialized(data: bytes) -> RObject:
    """The object of one R serialization, or of a data file (``RDX2``/``RDX3`` first), from its bytes.

    Parameters
    ----------
    data
        The file's bytes, compressed or not.

    Returns
    -------
    RObject
        For a data file, the pairlist of its objects, each tagged with its name.

    Raises
    ------
    RSerializationError
        When the bytes are not XDR serialization of version 2 or 3, or end early, or hold an object
        this reader does not read (byte code, an unknown ALTREP class); the message says which.
    """
    try:
        data = _decompress(data)
    except (OSError, EOFError, lzma.LZMAError, ValueError) as err:
        raise RSerializationError(f"the compressed data cannot be read: {err}") from None
    # A data file's magic line names its format too: RDX (XDR), RDA (ASCII), RDB (native binary).
    offset = 5 if data[:2] == b"RD" and data[2:3] in b"XAB" and data[3:5] in (b"2\n", b"3\n") else 0
    if data[offset:offset + 2] != b"X\n":
        other = {b"A\n": "R's ASCII format", b"B\n": "R's native binary format"}.get(data[offset:offset + 2])
        raise RSerializationError(f"{other} is not read (only XDR)" if other else
                                  f"not R's serialization format (it starts {data[:offset + 2]!r})")
    reader = _Reader(data, offset + 2)
    version = reader.int()
    reader.int()  # the R version that wrote it
    reader.int()  # the oldest R version that reads it
    if version == 3:
        reader._take(reader.int())  # the writer's native encoding
    elif version != 2:
        raise RSerializationError(f"serialization format version {version} (versions 2 and 3 are read)")
    try:
        return reader.item()
    except (UnicodeDecodeError, RecursionError, IndexError, TypeError, AttributeError) as err:
        # Bytes that follow the format's grammar but not its rules (a string not in its encoding,
        # an ALTREP state of the wrong shape, nesting past Python's stack).
        raise RSerializationError(f"malformed R data before byte {reader.pos}: {type(err).__name__}: {err}") from None


def _numeric(obj: RObject) -> np.ndarray:
    values = obj.value
    if obj.type == LGLSXP:
        missing = values == NA_INTEGER
        return np.where(missing, None, values != 0).astype(object) if missing.any() else values != 0
    if obj.type == INTSXP:
        missing = values == NA_INTEGER
        return np.where(missing, np.nan, values) if missing.any() else values
    return values


def _data_frame(obj: RObject) -> pd.DataFrame:
    names = [str(n) for n in obj.attributes["names"].value] if "names" in obj.attributes else []
    # A column with names of its own keeps its values only: the frame's rows are its row names.
    columns = [np.asarray(c) if isinstance(c, pd.Series) else c for c in map(to_python, obj.value)]
    if len(names) != len(columns):
        raise RSerializationError(f"a data frame of {len(columns)} columns with {len(names)} names")
    frame = pd.DataFrame(dict(enumerate(columns)))
    frame.columns = names
    rows = obj.attributes.get("row.names")
    # Automatic row names are stored compactly, c(NA, -n): they stay pandas' default index.
    if rows is not None and rows.type == STRSXP:
        frame.index = pd.Index(rows.value, dtype=object)
    elif rows is not None and rows.type == INTSXP and not (len(rows.value) == 2 and rows.value[0] == NA_INTEGER):
        frame.index = pd.Index(rows.value)
    return frame


def to_python(obj: RObject) -> Any:
    """A Python value for an R object.

    Parameters
    ----------
    obj
        The object, as :func:`read_serialized` reads it.

    Returns
    -------
    Any
        ``NULL``: ``None``. A data frame (tibbles too): a :class:`pandas.DataFrame`, with the row
        names as its index unless they are R's automatic ones. A factor: a
        :class:`pandas.Categorical` (ordered for an ordered factor). A list: a ``dict`` by name
        when it has names, else a ``list``; a pairlist alike. An atomic vector: a
        :class:`numpy.ndarray` (logical: ``bool``, or ``object`` with ``None`` where ``NA``;
        integer: ``int32``, or ``float64`` with NaN where ``NA``; character: ``object``, ``None``
        where ``NA``), a :class:`pandas.Series` indexed by its names when it has them.

    Raises
    ------
    RSerializationError
        For an object with no such value (an environment, a function, ...).
    """
    classes = obj.classes()
    if obj.type == NILVALUE_SXP:
        return None
    if obj.type == INTSXP and "factor" in classes:
        levels = obj.attributes["levels"].value if "levels" in obj.attributes else np.array([], dtype=object)
        codes = np.where(obj.value == NA_INTEGER, -1, obj.value - 1)
        return pd.Categorical.from_codes(codes, categories=pd.Index(levels, dtype=object), ordered="ordered" in classes)
    if obj.type == VECSXP and "data.frame" in classes:
        return _data_frame(obj)
    if obj.type in (VECSXP, EXPRSXP):
        values = [to_python(v) for v in obj.value]
        if "names" in obj.attributes:
            return {str(name): value for name, value in zip(obj.attributes["names"].value, values)}
        return values
    if obj.type in _PAIRLISTS:
        return {str(tag): to_python(value) for tag, value in obj.value}
    if obj.type in (LGLSXP, INTSXP, REALSXP, CPLXSXP, STRSXP):
        values = obj.value if obj.type == STRSXP else _numeric(obj)
        if "names" in obj.attributes:
            return pd.Series(values, index=pd.Index(obj.attributes["names"].value, dtype=object))
        return values
    if obj.type == RAWSXP:
        return obj.value
    raise RSerializationError(f"an R object of type {obj.type} (an environment, a function or another object "
                              "that holds no data) has no Python value")


def read_rda(path: str | Path) -> dict[str, Any]:
    """The objects of an R data file, by name, converted by :func:`to_python`.

    Parameters
    ----------
    path
        A file written by R's ``save()`` (``.rda``, ``.RData``; any compression).

    Returns
    -------
    dict
        Object name -> value.

    Raises
    ------
    RSerializationError
        When the file is not such a file, or holds what this reader does not read: "<path>: not
        a readable R data file (.rda): <the problem>".
    OSError
        When the file cannot be read.
    """
    path = Path(path)
    try:
        saved = read_serialized(path.read_bytes())
        if saved.type not in _PAIRLISTS:
            raise RSerializationError(f"no saved objects (the file holds an R object of type {saved.type})")
        return {str(name): to_python(value) for name, value in saved.value}
    except RSerializationError as err:
        raise RSerializationError(f"{path}: not a readable R data file (.rda): {err}") from None
