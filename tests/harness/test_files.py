"""Small file helpers: bounded reads and copies of files a component wrote."""

from __future__ import annotations

import io

from openpert.files import copy_head_and_tail, format_bytes, read_tail


def test_read_tail_reads_the_end_only(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"abcdef")
    assert read_tail(path, 4) == b"cdef" and read_tail(path, 100) == b"abcdef"


def test_a_long_file_keeps_its_head_and_tail_and_says_what_was_left_out(tmp_path):
    path = tmp_path / "log"
    with open(path, "wb") as fh:
        fh.write(b"HEAD")
        fh.truncate(2**30)  # sparse: no disk
        fh.seek(0, 2)
        fh.write(b"TAIL")
    out = io.BytesIO()
    assert copy_head_and_tail(path, out, head=8, tail=4) == 2**30 + 4 - 12
    assert out.getvalue() == (b"HEAD\0\0\0\0\n[openpert] 1,073,741,816 bytes of this log left out (it had 1,073,741,828); "
                              b"its start and end are kept\nTAIL")


def test_a_short_file_is_copied_whole(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"0123456789")
    out = io.BytesIO()
    assert copy_head_and_tail(path, out, head=6, tail=4) == 0 and out.getvalue() == b"0123456789"


def test_sizes_read_as_the_harness_says_mb():
    assert [format_bytes(n) for n in (512, 2048, 64 * 2**20, 5.3 * 2**30, 3.5 * 2**40)] == \
        ["512 bytes", "2 kB", "64 MB", "5.3 GB", "3.5 TB"]
