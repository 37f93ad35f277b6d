"""pertsci.rda_tables: shared-data tables derived from R data files written by R (the real originals: tests/harness/data/test_derived_files.py)."""

from __future__ import annotations

import gzip
import random
import struct
from pathlib import Path

import pytest
from r_script import needs_r, run_r, save_rda

from pertsci.rda_tables import RDataError, dorothea_regulons, format_r_double, perturbplan_baseline


def _save_rda(path: Path, objects: str) -> Path:
    save_rda(path.parent, objects, {path.name: ""})
    return path


# --- numbers as R's write.table writes them -------------------------------------------------------

# Each checked against R 4.2.2's write.table on x86-64.
R_WRITES = [
    (1.1249688018027e-07, "1.1249688018027e-07"),
    (414.442808521051, "414.442808521051"),
    (0.1 + 0.2, "0.3"),
    (0.000123, "0.000123"),
    (1.234e-05, "1.234e-05"),
    (100000.0, "1e+05"),
    (123456.0, "123456"),
    (1e15, "1e+15"),
    (99999.99999999999, "1e+05"),
    (0.9999999999999999, "1"),
    (-2.5, "-2.5"),
    (-0.0, "0"),
    (1.7976931348623157e308, "1.79769313486232e+308"),
    (5e-324, "4.94065645841247e-324"),
    # R rounds to 15 digits in extended precision: a 16th digit near a half can drop the 15th.
    (float.fromhex("0x1.f19fe8c12fde8p-15"), "5.9321480429638e-05"),  # 5.93214804296379499...e-05 (T_CD8_Shifrut)
    # R's table of powers of ten holds 1e23..1e27 as the nearest doubles.
    (3.802729044790105e37, "3.80272904479010e+37"),
    (8.653342729462295e-11, "8.6533427294623e-11"),
    (6.532395866442905e-09, "6.5323958664429e-09"),
    (float("nan"), "NA"),
    (float("inf"), "Inf"),
    (float("-inf"), "-Inf"),
]


@pytest.mark.parametrize(("value", "text"), R_WRITES, ids=[t for _, t in R_WRITES])
def test_format_r_double(value, text):
    assert format_r_double(value) == text


def _hard_numbers(n: int, seed: int) -> list[float]:
    """Doubles of every magnitude, and many whose 16th digit is near a half (R's double rounding)."""
    rng = random.Random(seed)
    out = [rng.choice([1, -1]) * 10 ** rng.uniform(-320, 308) for _ in range(n)]
    out += [float(f"{rng.randrange(10**14, 10**15)}5e{rng.randint(-45, 45) - 15}") for _ in range(n)]
    out += [float(f"9.99999999999999{rng.randint(0, 99):02d}e{rng.randint(-30, 30)}") for _ in range(n // 5)]
    out += [rng.randint(0, 10 ** rng.randint(1, 18)) / 10 ** rng.randint(0, 6) for _ in range(n // 5)]
    out += [v for v, _ in R_WRITES]
    return out


@needs_r
def test_format_r_double_equals_r_write_table(tmp_path):
    """Thousands of hard numbers, read by R from their bytes and written by write.table: the same text."""
    values = _hard_numbers(3000, seed=7)
    (tmp_path / "x.bin").write_bytes(struct.pack(f"<{len(values)}d", *values))
    run_r(f'x <- readBin("x.bin", "double", n = {len(values)}, endian = "little"); '
          'write.table(data.frame(x = x), "x.tsv", quote = FALSE, row.names = FALSE, col.names = FALSE)', tmp_path)
    expected = (tmp_path / "x.tsv").read_text().splitlines()
    got = [format_r_double(v) for v in values]
    wrong = [(v.hex(), e, g) for v, e, g in zip(values, expected, got) if e != g]
    assert len(expected) == len(values)
    assert not wrong, f"{len(wrong)} numbers written differently from R (hex, R, ours): {wrong[:10]}"


# --- DoRothEA -----------------------------------------------------------------------------------

#: A small regulon table, in R.
REGULONS_R = ('data.frame(tf = c("ADNP", "AHR", "AR", "AR", "ZEB1", "ZEB1", "MYC"), '
              'confidence = c("D", "C", "A", "B", "E", "A", "C"), '
              'target = c("ATF7IP", "CYP1A1", "KLK3", "TMPRSS2", "VIM", "CDH1", "NPM1"), '
              'mor = c(1, 1, 1, -1, 1, -1, 1), stringsAsFactors = FALSE)')
REGULONS_ABC = ("tf\tconfidence\ttarget\tmor\n"
                "AHR\tC\tCYP1A1\t1.0\n"
                "AR\tA\tKLK3\t1.0\n"
                "AR\tB\tTMPRSS2\t-1.0\n"
                "ZEB1\tA\tCDH1\t-1.0\n"
                "MYC\tC\tNPM1\t1.0\n")


@needs_r
def test_dorothea_keeps_levels_in_order(tmp_path):
    rda = _save_rda(tmp_path / "dorothea_hs.rda", f"list(dorothea_hs = {REGULONS_R})")
    out = tmp_path / "out.tsv"
    dorothea_regulons({"rda": rda}, out, confidence=["A", "B", "C"])
    assert out.read_bytes() == REGULONS_ABC.encode()
    dorothea_regulons({"rda": rda}, out, confidence=["E"])
    assert out.read_text() == "tf\tconfidence\ttarget\tmor\nZEB1\tE\tVIM\t1.0\n"


@needs_r
def test_dorothea_from_an_r_saved_tibble(tmp_path):
    """As the package ships it: a tibble saved by R (bzip2 here), strings and a double mor."""
    run_r(f'd <- {REGULONS_R}; '
          'class(d) <- c("tbl_df", "tbl", "data.frame"); dorothea_hs <- d; '
          'save(dorothea_hs, file = "dorothea_hs.rda", compress = "bzip2")', tmp_path)
    out = tmp_path / "out.tsv"
    dorothea_regulons({"rda": tmp_path / "dorothea_hs.rda"}, out, confidence=["A", "B", "C"])
    assert out.read_bytes() == REGULONS_ABC.encode()


@pytest.mark.parametrize("confidence", [[], ["F"], ["a"]])
def test_dorothea_refuses_unknown_levels(tmp_path, confidence):
    with pytest.raises(ValueError, match="confidence"):
        dorothea_regulons({"rda": tmp_path / "x.rda"}, tmp_path / "out.tsv", confidence=confidence)


@needs_r
def test_dorothea_refuses_a_table_without_its_columns(tmp_path):
    rda = _save_rda(tmp_path / "other.rda", f"list(x = {REGULONS_R}[, 1:3])")
    with pytest.raises(RDataError, match=r"other\.rda.*lacks the columns \['mor'\]"):
        dorothea_regulons({"rda": rda}, tmp_path / "out.tsv", confidence=["A"])


# --- perturbplan ---------------------------------------------------------------------------------

#: A small baseline table, in R: numbers R writes in fixed and scientific notation, one whose
#: 16th digit is near a half (as a hexadecimal literal, exact).
BASELINE_R = ('data.frame(response_id = c("ENSG00000243485", "ENSG00000262879", "ENSG00000000003", "ENSG00000000005"), '
              'relative_expression = c(1.1249688018027e-07, 0x1.f19fe8c12fde8p-15, 0.000123, 0.1 + 0.2), '
              'expression_size = c(414.442808521051, 100000, 123456, 0), stringsAsFactors = FALSE)')
BASELINE_TSV = ("response_id\trelative_expression\texpression_size\n"
                "ENSG00000243485\t1.1249688018027e-07\t414.442808521051\n"
                "ENSG00000262879\t5.9321480429638e-05\t1e+05\n"
                "ENSG00000000003\t0.000123\t123456\n"
                "ENSG00000000005\t0.3\t0\n")


def _perturbplan_object(stats: str) -> str:
    """A perturbplan reference as the package's data/<dataset>.rda holds it, in R: a named list."""
    return (f"list(baseline_expression_stats = {stats}, "
            "library_parameters = list(UMI_per_cell = 59163.3, variation = 0.397), mapping_efficiency = 0.711)")


@needs_r
def test_perturbplan_writes_the_table_as_r_does(tmp_path):
    rda = _save_rda(tmp_path / "K562_test.rda", f"list(K562_test = {_perturbplan_object(BASELINE_R)})")
    out = tmp_path / "out.tsv"
    perturbplan_baseline({"rda": rda}, out)
    assert out.read_bytes() == BASELINE_TSV.encode()


@needs_r
def test_perturbplan_equals_r_write_table(tmp_path):
    """An R-saved perturbplan-like list of hard numbers: derived file == R's own write.table, byte for byte."""
    values = _hard_numbers(1500, seed=11)
    values = [abs(v) for v in values]
    half = len(values) // 2
    (tmp_path / "x.bin").write_bytes(struct.pack(f"<{2 * half}d", *values[:2 * half]))
    run_r(f'x <- readBin("x.bin", "double", n = {2 * half}, endian = "little"); '
          f'd <- data.frame(response_id = sprintf("ENSG%011d", seq_len({half})), '
          f'relative_expression = x[1:{half}], expression_size = x[{half + 1}:{2 * half}], stringsAsFactors = FALSE); '
          'THP1_test <- list(baseline_expression_stats = d, library_parameters = list(UMI_per_cell = 77799.2, variation = 0.354), '
          'mapping_efficiency = 0.677); save(THP1_test, file = "THP1_test.rda", compress = "xz"); '
          'write.table(d, "expected.tsv", sep = "\\t", quote = FALSE, row.names = FALSE)', tmp_path)
    out = tmp_path / "out.tsv"
    perturbplan_baseline({"rda": tmp_path / "THP1_test.rda"}, out)
    expected, got = (tmp_path / "expected.tsv").read_text().splitlines(), out.read_text().splitlines()
    assert len(got) == len(expected) == half + 1
    wrong = [(e, g) for e, g in zip(expected, got) if e != g]
    assert not wrong, f"{len(wrong)} lines differ from R's (R, ours): {wrong[:5]}"
    assert out.read_bytes() == (tmp_path / "expected.tsv").read_bytes()


@needs_r
def test_perturbplan_names_the_object_among_several(tmp_path):
    rda = _save_rda(tmp_path / "two.rda", f"list(a = {_perturbplan_object(BASELINE_R)}, "
                                         f"b = {_perturbplan_object(BASELINE_R + '[1, ]')})")
    with pytest.raises(RDataError, match=r"two\.rda: holds 2 R objects"):
        perturbplan_baseline({"rda": rda}, tmp_path / "out.tsv")
    perturbplan_baseline({"rda": rda}, tmp_path / "out.tsv", object_name="b")
    assert (tmp_path / "out.tsv").read_text().splitlines() == BASELINE_TSV.splitlines()[:2]


@needs_r
def test_perturbplan_refuses_a_data_frame(tmp_path):
    rda = _save_rda(tmp_path / "frame.rda", f"list(x = {BASELINE_R})")
    with pytest.raises(RDataError, match=r"frame\.rda: the R object is not a list with an element 'baseline_expression_stats'"):
        perturbplan_baseline({"rda": rda}, tmp_path / "out.tsv")


# --- originals that are wrong or unreadable --------------------------------------------------------

def test_unreadable_original_names_the_file(tmp_path):
    bad = tmp_path / "not_r.rda"
    bad.write_text("<html>rate limited</html>\n")
    with pytest.raises(RDataError, match=r"not_r\.rda: not a readable R data file"):
        perturbplan_baseline({"rda": bad}, tmp_path / "out.tsv")
    with pytest.raises(RDataError, match=r"not_r\.rda: not a readable R data file"):
        dorothea_regulons({"rda": bad}, tmp_path / "out.tsv", confidence=["A"])
    assert not (tmp_path / "out.tsv").exists()


def test_truncated_original_names_the_file(tmp_path):
    cut = tmp_path / "cut.rda"
    cut.write_bytes(gzip.compress(b"RDX3\nX\n" + bytes(range(256)) * 4)[:200])
    with pytest.raises(RDataError, match=r"cut\.rda: not a readable R data file"):
        perturbplan_baseline({"rda": cut}, tmp_path / "out.tsv")


def test_missing_original_names_the_file(tmp_path):
    with pytest.raises(RDataError, match=r"absent\.rda: no such R data file"):
        perturbplan_baseline({"rda": tmp_path / "absent.rda"}, tmp_path / "out.tsv")


def test_sources_must_name_the_rda(tmp_path):
    with pytest.raises(ValueError, match=r"sources must be \{'rda'"):
        perturbplan_baseline({"original": tmp_path / "x.rda"}, tmp_path / "out.tsv")

