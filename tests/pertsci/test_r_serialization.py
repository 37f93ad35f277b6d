"""pertsci.r_serialization: R data files written by R itself, and bytes built by hand for what R would not write."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from r_script import needs_r, save_rda

from pertsci.r_serialization import NA_INTEGER, RSerializationError, read_rda, read_serialized, to_python

#: One object of each kind a package's data file holds, in R.
OBJECTS_R = """
frame <- data.frame(s = c("a", NA, "b"), i = c(1L, NA, 3L), d = c(1.5, NA, -Inf), l = c(TRUE, NA, FALSE),
                    f = factor(c("lo", "hi", NA), levels = c("lo", "hi")), row.names = c("r1", "r2", "r3"),
                    stringsAsFactors = FALSE)
tib <- data.frame(x = 1:3, y = c("p", "q", "r"), stringsAsFactors = FALSE)
class(tib) <- c("tbl_df", "tbl", "data.frame")
list(frame = frame, tib = tib, seq = 1:1000, named = c(a = 1, b = 2), nested = list(x = list(y = 7L), z = "q"),
     unnamed = list(1, "a"), ord = factor(c("b", "a"), levels = c("a", "b"), ordered = TRUE),
     latin = iconv("caf\\u00e9", "UTF-8", "latin1"), utf8 = "\\u00e9t\\u00e9", nothing = NULL,
     many = rep(c("x", "y"), 5000), flags = c(TRUE, FALSE))
"""
#: The files R writes of OBJECTS_R: (file name, arguments of save()).
SAVES = {"v3_xz.rda": 'version = 3, compress = "xz"', "v3_gzip.rda": "version = 3, compress = TRUE",
         "v2_bzip2.rda": 'version = 2, compress = "bzip2"', "v3_plain.rda": "version = 3, compress = FALSE",
         "ascii.rda": "ascii = TRUE"}


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A folder of the files of SAVES, written by one R process."""
    folder = tmp_path_factory.mktemp("rda")
    save_rda(folder, OBJECTS_R, SAVES)
    return folder


@needs_r
@pytest.mark.parametrize("name", [n for n in SAVES if n != "ascii.rda"])
def test_every_kind_of_object_reads_as_r_holds_it(saved, name):
    objects = read_rda(saved / name)
    assert list(objects) == ["frame", "tib", "seq", "named", "nested", "unnamed", "ord", "latin", "utf8", "nothing",
                             "many", "flags"]
    frame = objects["frame"]
    assert list(frame.columns) == ["s", "i", "d", "l", "f"] and list(frame.index) == ["r1", "r2", "r3"]
    assert list(frame["s"]) == ["a", None, "b"]
    np.testing.assert_array_equal(frame["i"], [1.0, np.nan, 3.0])  # an integer column with NA: floats, NaN for NA
    np.testing.assert_array_equal(frame["d"], [1.5, np.nan, -np.inf])
    assert list(frame["l"]) == [True, None, False]
    assert list(frame["f"].cat.categories) == ["lo", "hi"] and list(frame["f"].astype(object)) == ["lo", "hi", np.nan]
    tib = objects["tib"]
    assert isinstance(tib.index, pd.RangeIndex) and tib["x"].tolist() == [1, 2, 3] and tib["y"].tolist() == ["p", "q", "r"]
    # 1:1000 is a compact sequence (ALTREP) in version 3, a plain vector in version 2: the same values
    assert objects["seq"].dtype == np.int32 and objects["seq"].tolist() == list(range(1, 1001))
    assert objects["named"].to_dict() == {"a": 1.0, "b": 2.0}
    nested = objects["nested"]
    assert set(nested) == {"x", "z"} and set(nested["x"]) == {"y"}
    assert nested["x"]["y"].dtype == np.int32 and nested["x"]["y"].tolist() == [7] and nested["z"].tolist() == ["q"]
    assert [v.tolist() for v in objects["unnamed"]] == [[1.0], ["a"]]
    assert objects["ord"].ordered and list(objects["ord"]) == ["b", "a"]
    assert objects["latin"].tolist() == ["café"] and objects["utf8"].tolist() == ["été"]
    assert objects["nothing"] is None
    assert objects["many"].tolist() == ["x", "y"] * 5000
    assert objects["flags"].dtype == bool and objects["flags"].tolist() == [True, False]


@needs_r
def test_the_ascii_format_is_refused_by_name(saved):
    with pytest.raises(RSerializationError, match=r"ascii\.rda: not a readable R data file \(\.rda\): R's ASCII format is not read"):
        read_rda(saved / "ascii.rda")


@needs_r
def test_a_file_cut_short_says_where_it_ends(saved, tmp_path):
    whole = (saved / "v3_plain.rda").read_bytes()
    cut = tmp_path / "cut.rda"
    cut.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(RSerializationError, match=r"cut\.rda: not a readable R data file \(\.rda\): the data end"):
        read_rda(cut)


# --- bytes built by hand -------------------------------------------------------------------------------

def _flags(kind: int, *, attr: bool = False, tag: bool = False, levels: int = 0) -> bytes:
    return struct.pack(">i", kind | (attr << 9) | (tag << 10) | (levels << 12))


def _chars(text: str | None) -> bytes:
    if text is None:
        return _flags(9) + struct.pack(">i", -1)
    raw = text.encode()
    return _flags(9, levels=8) + struct.pack(">i", len(raw)) + raw


def _strings(*texts: str | None) -> bytes:
    return _flags(16) + struct.pack(">i", len(texts)) + b"".join(_chars(t) for t in texts)


def _symbol(name: str) -> bytes:
    return _flags(1) + _chars(name)


NIL = _flags(254)
HEADER = b"X\n" + struct.pack(">iii", 2, 0x040202, 0x020300)


def test_a_named_integer_vector_with_na():
    """c(a = 1L, b = NA): an integer vector, then its attributes as a tagged pairlist."""
    data = (HEADER + _flags(13, attr=True) + struct.pack(">iii", 2, 1, NA_INTEGER)
            + _flags(2, tag=True) + _symbol("names") + _strings("a", "b") + NIL)
    value = to_python(read_serialized(gzip.compress(data)))
    assert isinstance(value, pd.Series) and list(value.index) == ["a", "b"]
    np.testing.assert_array_equal(value.to_numpy(), [1.0, np.nan])


def test_a_symbol_written_once_is_read_back_by_reference():
    """list(x = 1, x = 2) as a pairlist whose second tag refers to the first symbol (REFSXP, index 1)."""
    real = _flags(14) + struct.pack(">i", 1)
    data = (HEADER + _flags(2, tag=True) + _symbol("x") + real + struct.pack(">d", 1.0)
            + _flags(2, tag=True) + struct.pack(">i", 255 | (1 << 8)) + real + struct.pack(">d", 2.0) + NIL)
    pairs = read_serialized(data).value
    assert [tag for tag, _ in pairs] == ["x", "x"] and [float(v.value[0]) for _, v in pairs] == [1.0, 2.0]


def test_a_reference_to_nothing_read_yet_is_an_error():
    with pytest.raises(RSerializationError, match="a reference to item 3 of 0"):
        read_serialized(HEADER + struct.pack(">i", 255 | (3 << 8)))


def test_byte_code_is_refused_naming_its_type():
    with pytest.raises(RSerializationError, match="type 21"):
        read_serialized(HEADER + _flags(21))


@pytest.mark.parametrize(("data", "message"), [
    (b"<html>rate limited</html>", "not R's serialization format"),
    (b"X\n" + struct.pack(">iii", 4, 0, 0), "version 4"),
    (HEADER + _flags(13) + struct.pack(">ii", 5, 1), "the data end 16 bytes early"),
    (b"\xfd7zXZ\x00broken", "the compressed data cannot be read"),
])
def test_what_is_not_r_data_says_so(data, message):
    with pytest.raises(RSerializationError, match=message):
        read_serialized(data)


def test_an_environment_has_no_python_value():
    """new.env() holding nothing: read (its frame and table are NULL), but not converted."""
    data = HEADER + _flags(4) + struct.pack(">i", 0) + _flags(242) + NIL + NIL + NIL
    env = read_serialized(data)
    with pytest.raises(RSerializationError, match="type 4"):
        to_python(env)


def test_a_string_not_in_its_encoding_is_malformed_data():
    data = HEADER + _flags(16) + struct.pack(">i", 1) + _flags(9, levels=8) + struct.pack(">i", 2) + b"\xff\xfe"
    with pytest.raises(RSerializationError, match="malformed R data .*UnicodeDecodeError"):
        read_serialized(data)


def test_a_length_past_the_data_is_refused_before_anything_is_allocated():
    data = HEADER + _flags(16) + struct.pack(">i", 2**31 - 1) + _chars("a")
    with pytest.raises(RSerializationError, match=r"the data end before the 2147483647 elements of a character vector \(9 bytes left"):
        read_serialized(data)
