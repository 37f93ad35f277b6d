"""benchmarks/kernel_invariance.py: the variants it runs, the ones it skips, and one real regeneration under another kernel."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from project_paths import ROOT, SHARED_DATA
from tooling import reproducible_resources as rr

_spec = importlib.util.spec_from_file_location("kernel_invariance", ROOT / "benchmarks" / "kernel_invariance.py")
ki = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ki  # dataclasses look their module up there
_spec.loader.exec_module(ki)

AVX2 = frozenset({"avx", "avx2", "fma"})


def test_the_full_matrix_and_the_quick_set():
    full = ki.variants()
    assert len(full) == 16 and len(set(full)) == 16
    assert {v.coretype for v in full} == {None, "Haswell", "SkylakeX", "Sandybridge"}
    quick = ki.variants(quick=True)
    assert [(v.coretype, v.threads, v.sandbox) for v in quick] == [(None, 1, None), (None, 2, None),
                                                                   ("Sandybridge", 1, None), ("Sandybridge", 2, None)]


def test_a_variant_sets_the_thread_counts_and_unsets_an_absent_kernel():
    env = ki.Variant(None, 2, "on").env()
    assert env == {"OPENBLAS_CORETYPE": None, "NPY_DISABLE_CPU_FEATURES": None, "OMP_NUM_THREADS": "2",
                   "OPENBLAS_NUM_THREADS": "2", "OPENPERT_SANDBOX": "on"}
    assert "OPENPERT_SANDBOX" not in ki.Variant("Haswell", 1, None).env()
    assert ki.Variant(None, 1, "off", numpy_disabled="X86_V3").env()["NPY_DISABLE_CPU_FEATURES"] == "X86_V3"


def test_a_kernel_the_cpu_cannot_run_or_a_missing_sandbox_is_skipped_with_the_reason():
    assert "avx512f" in ki.skip_reason(ki.Variant("SkylakeX", 1, "off"), AVX2, None)
    assert ki.skip_reason(ki.Variant("Haswell", 1, "off"), AVX2, None) is None
    assert ki.skip_reason(ki.Variant("Sandybridge", 1, "on"), AVX2, "bwrap is not installed") == "sandbox on, but bwrap is not installed"
    assert ki.skip_reason(ki.Variant("Sandybridge", 1, "off"), AVX2, "bwrap is not installed") is None


def test_a_skipped_variant_never_runs_and_a_difference_is_reported(tmp_path):
    calls = []

    def check(root, task, work, env):
        calls.append(env)
        return [rr.Difference(f"{task}/a.h5ad", "X", "committed 1.0, regenerated 1.0000000000000002")]

    skipped = ki.run_variant(ROOT, "t", ki.Variant("SkylakeX", 1, "off"), AVX2, None, check=check)
    assert skipped.status == "skipped" and calls == []
    differs = ki.run_variant(ROOT, "t", ki.Variant(None, 1, "off"), AVX2, None, check=check)
    assert differs.status == "differs" and differs.detail.startswith("t/a.h5ad: X: committed 1.0")
    assert calls == [ki.Variant(None, 1, "off").env()]
    assert "differs" in ki.format_row(differs) and "skipped" in ki.format_row(skipped)


def test_cpu_flags_reads_the_first_flags_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx avx2\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert ki.cpu_flags(info) == frozenset({"fpu", "avx", "avx2"})
    assert ki.cpu_flags(tmp_path / "missing") == frozenset()


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data not found at {SHARED_DATA} (set OPENPERT_SHARED_DATA)")
@pytest.mark.skipif("avx" not in ki.cpu_flags(), reason="the CPU lacks avx, which OpenBLAS's Sandybridge kernel executes")
def test_a_blas_heavy_generator_is_the_same_under_another_kernel_and_thread_count():
    # perturbation_prediction's generator fits limma-style linear models with BLAS (about 19 s on an
    # idle 2-core machine); its floats match within the resources check's tolerance.
    outcome = ki.run_variant(ROOT, "perturbation_prediction", ki.Variant("Sandybridge", 1, "off"), ki.cpu_flags(), None)
    assert outcome.kernel == "Sandybridge/1", outcome
    assert outcome.status == "identical", ki.format_row(outcome)
