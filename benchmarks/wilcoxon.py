"""Wilcoxon rank-sum tests of every perturbation against the controls: pertsci.wilcoxon vs scanpy and illico.

Run with ``PYTHONPATH=common python benchmarks/wilcoxon.py`` (defaults: 100,000 cells x 2,000 genes x
200 perturbations, sparse log(TP10k+1) float32, 10% control cells). Each tool runs in its own
process on the same matrix (written once to a cache file), so that its peak memory is its own; the
time is that of the test call only (reading the data is not counted). Printed: time, ratio to
pertsci.wilcoxon, peak resident memory (total, and above the loaded data), and the agreement of the
p-values with pertsci.wilcoxon's (largest |log10 p| difference over gene x perturbation pairs, and the
largest relative difference), and with ``scipy.stats.mannwhitneyu`` on 30 random pairs (the
reference, computed in the parent process). Peak memory is sampled while the test runs; "above
data" subtracts the resident memory after reading the matrix. pertsci.wilcoxon also runs a second
time under ``tracemalloc``, whose peak of traced (numpy) allocations misses no short peak.

Settings: scanpy ``rank_genes_groups(method="wilcoxon", reference=control, tie_correct=True)``
(scanpy applies no continuity correction, so its p-values differ slightly by design); illico
``asymptotic_wilcoxon(reference=control, use_continuity=True, tie_correct=True)``, once for each
number of threads given with ``--threads`` (default 1 and 2), as pertsci.wilcoxon is for
``--openpert-threads`` (``n_threads``, default 1 and 2).
illico comes with the ``bench`` extra (``pip install -e '.[bench]'``, or beside the environment:
``pip install --target DIR illico loguru`` and ``PYTHONPATH=common:DIR``); without it, it is left
out.

Targets, each tool by its fastest run: at least 100x faster than scanpy, at most half of illico's
time, and peak memory above the data (of that run) at most illico's. The figures go to ``benchmarks/results/wilcoxon.json``
(``--json``), read by ``benchmarks/summary.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing as mp
import tempfile
import time
from pathlib import Path

import numpy as np
from figures import RESULTS, write_figures

CONTROL = "non-targeting"
#: Targets: pertsci.wilcoxon at least this many times faster than scanpy ...
TARGET_SPEEDUP_SCANPY = 100.0
#: ... and taking at most this fraction of illico's time.
TARGET_TIME_VS_ILLICO = 0.5


def make_screen(path: Path, n_cells: int, n_genes: int, n_perts: int, seed: int = 0) -> None:
    """Write a synthetic screen (log(TP10k+1), CSR float32) with perturbation effects to ``path``."""
    import anndata as ad
    import pandas as pd
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    mean = np.exp(rng.normal(-1.6, 1.5, n_genes))  # counts per cell at 10,000 UMIs
    lfc = np.zeros((n_perts, n_genes))
    for k in range(n_perts):
        lfc[k, rng.choice(n_genes, 30, replace=False)] = rng.choice([-1.0, 1.0], 30) * rng.uniform(0.5, 2, 30)
        lfc[k, k % n_genes] = -3.0  # knockdown of the target
    labels = np.where(rng.random(n_cells) < 0.1, -1, rng.integers(0, n_perts, n_cells))
    blocks = []
    for start in range(0, n_cells, 10_000):
        lab = labels[start : start + 10_000]
        lib = rng.lognormal(0, 0.4, lab.size)
        fc = np.where(lab[:, None] >= 0, np.exp2(lfc[np.maximum(lab, 0)]), 1.0)
        counts = rng.poisson(lib[:, None] * mean[None, :] * fc).astype(np.float32)
        X = sp.csr_matrix(counts)
        totals = np.asarray(X.sum(axis=1)).ravel()
        X.data *= np.repeat(1e4 / np.maximum(totals, 1), np.diff(X.indptr)).astype(np.float32)
        np.log1p(X.data, out=X.data)
        blocks.append(X)
    X = sp.vstack(blocks, format="csr")
    X.sort_indices()
    names = np.array([f"P{k}" for k in range(n_perts)], dtype=object)
    obs = pd.DataFrame({"perturbation": np.where(labels < 0, CONTROL, names[np.maximum(labels, 0)])},
                       index=[f"c{i}" for i in range(n_cells)])
    obs["perturbation"] = obs["perturbation"].astype("category")
    ad.AnnData(X=X, obs=obs, var=pd.DataFrame(index=[f"g{j}" for j in range(n_genes)])).write_h5ad(path)


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


class _PeakSampler:
    """Largest resident memory seen while the block runs (sampled every 5 ms in a thread).

    ``ru_maxrss`` cannot be used: reading the data peaks higher than the tests themselves.
    """

    def __enter__(self):
        import threading

        self.peak = _rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss_mb())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mb())


def _release_free_memory() -> None:
    """Return freed heap pages to the system, so that RSS after loading is the data's size."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc: RSS may include freed pages; the figures stay comparable between tools
        return


def _run(tool: str, path: str, threads: int, n_groups: int | None, out: str, queue) -> None:
    """Child process: load, run one tool, save its p-values (groups x genes), report time and memory."""
    import anndata as ad

    adata = ad.read_h5ad(path)
    groups = [g for g in adata.obs["perturbation"].cat.categories if g != CONTROL][:n_groups]
    _release_free_memory()
    loaded = _rss_mb()
    sampler = _PeakSampler().__enter__()
    start, cpu_start = time.perf_counter(), time.process_time()
    if tool.startswith("openpert"):
        from pertsci.wilcoxon import rank_sum_test

        res = rank_sum_test(adata.X, adata.obs["perturbation"].to_numpy(), CONTROL, genes=adata.var_names,
                            group_order=groups, n_threads=threads)
        pvals = res.pvalue
    elif tool == "scanpy":
        import scanpy as sc

        sc.tl.rank_genes_groups(adata, "perturbation", groups=groups, reference=CONTROL, method="wilcoxon",
                                tie_correct=True, n_genes=adata.n_vars, corr_method="benjamini-hochberg")
        rgg = adata.uns["rank_genes_groups"]
        pvals = np.vstack([_reorder(rgg["names"][g], rgg["pvals"][g], adata.var_names) for g in groups])
    elif tool.startswith("illico"):
        from illico import asymptotic_wilcoxon

        df = asymptotic_wilcoxon(adata, is_log1p=True, group_keys="perturbation", reference=CONTROL,
                                 n_threads=threads, use_continuity=True, tie_correct=True)
        table = df["p_value"].unstack()
        pvals = table.loc[groups].reindex(columns=adata.var_names.astype(table.columns.dtype)).to_numpy()
    else:
        raise ValueError(tool)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    sampler.__exit__(None, None, None)
    peak = sampler.peak
    np.save(out, np.asarray(pvals, dtype=np.float64))
    report = {"seconds": seconds, "cpu_seconds": cpu_seconds, "peak_mb": peak, "loaded_mb": loaded}
    if tool == "openpert":
        # Sampled RSS can miss a short peak; numpy's allocations, traced, cannot. A second run,
        # untimed (tracing slows it), gives the exact peak of the arrays it allocates.
        import tracemalloc

        del res, pvals
        tracemalloc.start()
        rank_sum_test(adata.X, adata.obs["perturbation"].to_numpy(), CONTROL, genes=adata.var_names, group_order=groups)
        report["traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    queue.put(report)


def _reorder(names, values, var_names) -> np.ndarray:
    import pandas as pd

    return pd.Series(np.asarray(values, dtype=float), index=np.asarray(names).astype(str)).reindex(var_names).to_numpy()


def run_tool(tool: str, path: Path, threads: int, workdir: Path, n_groups: int | None = None) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    out = workdir / f"{tool}.npy"
    proc = ctx.Process(target=_run, args=(tool, str(path), threads, n_groups, str(out), queue))
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        raise RuntimeError(f"{tool} failed with exit code {proc.exitcode}")
    result = queue.get()
    result["pvals"] = np.load(out)
    return result


def scipy_spot_check(path: Path, n_pairs: int = 30, seed: int = 0) -> tuple[list[tuple[int, int]], np.ndarray]:
    """scipy.stats.mannwhitneyu p-values of random (perturbation, gene) pairs: the reference."""
    import anndata as ad
    from scipy import stats

    adata = ad.read_h5ad(path)
    groups = [g for g in adata.obs["perturbation"].cat.categories if g != CONTROL]
    labels = adata.obs["perturbation"].to_numpy()
    ctrl = adata.X[labels == CONTROL]
    rng = np.random.default_rng(seed)
    picks = [(int(rng.integers(len(groups))), int(rng.integers(adata.n_vars))) for _ in range(n_pairs)]
    ref = []
    for k, j in picks:
        x = adata.X[labels == groups[k], j].toarray().ravel().astype(np.float64)
        y = ctrl[:, j].toarray().ravel().astype(np.float64)
        ref.append(stats.mannwhitneyu(x, y, method="asymptotic", use_continuity=True, alternative="two-sided").pvalue)
    return picks, np.asarray(ref)


def agreement(p: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    ok = np.isfinite(p) & np.isfinite(ref) & (p > 0) & (ref > 0)
    dlog = float(np.max(np.abs(np.log10(p[ok]) - np.log10(ref[ok])))) if ok.any() else float("nan")
    rel = float(np.max(np.abs(p[ok] - ref[ok]) / ref[ok])) if ok.any() else float("nan")
    return dlog, rel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=100_000)
    parser.add_argument("--genes", type=int, default=2_000)
    parser.add_argument("--perturbations", type=int, default=200)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="illico threads, one run per value")
    parser.add_argument("--openpert-threads", type=int, nargs="+", default=[1, 2],
                        help="also run pertsci.wilcoxon with these thread counts (n_threads); 1 is always run")
    parser.add_argument("--tools", nargs="+", default=["openpert", "illico", "scanpy"])
    parser.add_argument("--cache", default=None, help="where to keep the synthetic screen (default: a temp dir)")
    parser.add_argument("--scanpy-groups", type=int, default=None,
                        help="run scanpy on the first N perturbations only and scale its time by (all / N): its cost "
                             "with a reference group is linear in the number of groups (default: all)")
    parser.add_argument("--json", default=str(RESULTS / "wilcoxon.json"), help="where to write the figures")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="wilcoxon-bench-"))
    path = Path(args.cache) if args.cache else workdir / "screen.h5ad"
    if not path.exists():
        start = time.perf_counter()
        make_screen(path, args.cells, args.genes, args.perturbations)
        print(f"synthetic screen written in {time.perf_counter() - start:.0f} s: {path}")
    import anndata as ad

    info = ad.read_h5ad(path)
    n_perts = info.obs["perturbation"].nunique() - 1
    shape = {"cells": info.n_obs, "genes": info.n_vars, "perturbations": n_perts, "stored_values": int(info.X.nnz)}
    print(f"{info.n_obs} cells x {info.n_vars} genes, {n_perts} perturbations, "
          f"{info.X.nnz} stored values ({info.X.nnz / info.n_obs / info.n_vars:.0%} of entries)")
    del info

    runs: list[tuple[str, str, int]] = []  # (label, tool, illico threads)
    for tool in args.tools:
        if tool == "illico":
            if importlib.util.find_spec("illico") is None:
                print("  illico is not installed: left out (see the module's docstring)")
                continue
            runs += [(f"illico@{t}", "illico", t) for t in args.threads]
        elif tool == "openpert":
            runs.append(("openpert", "openpert", 1))
            runs += [(f"openpert@{t}", "openpert", t) for t in args.openpert_threads if t > 1]
        else:
            runs.append((tool, tool, 1))
    results = {}
    for label, tool, threads in runs:
        subset = args.scanpy_groups if tool == "scanpy" else None
        results[label] = run_tool(label, path, threads, workdir, subset)
        if subset and subset < n_perts:
            measured = results[label]["seconds"]
            results[label]["seconds"] = measured * n_perts / subset
            results[label]["cpu_seconds"] *= n_perts / subset
            print(f"  {label}: {measured:.1f} s for {subset} perturbations, "
                  f"{results[label]['seconds']:.1f} s scaled to {n_perts}", flush=True)
        else:
            print(f"  {label}: {results[label]['seconds']:.1f} s", flush=True)
    base = results.get("openpert")
    picks, ref = scipy_spot_check(path)
    print()
    print(f"{'tool':10s} {'time (s)':>10s} {'CPU (s)':>9s} {'x openpert':>11s} {'peak MB':>9s} {'above data':>11s} "
          f"{'max |dlog10 p|':>15s} {'max rel dp':>11s} {'vs scipy, rel':>14s}")
    table = {}
    for label, r in results.items():
        ratio = r["seconds"] / base["seconds"] if base else float("nan")
        dlog, rel = agreement(r["pvals"], base["pvals"][: len(r["pvals"])]) if base else (float("nan"),) * 2
        mine = [(k, j) for k, j in picks if k < len(r["pvals"])]
        got = np.array([r["pvals"][k, j] for k, j in mine])
        want = np.array([ref[picks.index(kj)] for kj in mine])
        vs_scipy = float(np.max(np.abs(got - want) / want)) if mine else float("nan")
        above = r["peak_mb"] - r["loaded_mb"]
        print(f"{label:10s} {r['seconds']:10.1f} {r['cpu_seconds']:9.1f} {ratio:11.2f} {r['peak_mb']:9.0f} {above:11.0f} "
              f"{dlog:15.2e} {rel:11.2e} {vs_scipy:14.2e}")
        table[label] = {"seconds": r["seconds"], "cpu_seconds": r["cpu_seconds"], "peak_mb": r["peak_mb"], "above_data_mb": above,
                        "max_dlog10_p_vs_openpert": dlog, "max_rel_dp_vs_openpert": rel, "max_rel_dp_vs_scipy": vs_scipy}
    figures: dict[str, float] = {}
    if base:
        # The targets compare the fastest run of each tool: scanpy runs on every core of an idle
        # machine, illico on the threads it is given, pertsci.wilcoxon on its n_threads.
        mine = {label: r for label, r in results.items() if label.startswith("openpert")}
        best_label = min(mine, key=lambda label: mine[label]["seconds"])
        best = mine[best_label]
        figures["openpert_seconds"] = best["seconds"]
        figures["openpert_threads"] = float(best_label.split("@")[1]) if "@" in best_label else 1.0
        figures["openpert_1_thread_seconds"] = base["seconds"]
        figures["openpert_above_data_mb"] = best["peak_mb"] - best["loaded_mb"]
        figures["openpert_1_thread_above_data_mb"] = base["peak_mb"] - base["loaded_mb"]
        figures["openpert_max_rel_dp_vs_scipy"] = max(table[label]["max_rel_dp_vs_scipy"] for label in mine)
        figures["openpert_traced_peak_mb"] = base["traced_peak_mb"]
        print(f"pertsci.wilcoxon's arrays peak at {base['traced_peak_mb']:.0f} MB (tracemalloc, 1 thread)")
        print(f"pertsci.wilcoxon's fastest run: {best_label}, {best['seconds']:.2f} s")
        if "scanpy" in results:
            figures["speedup_vs_scanpy"] = results["scanpy"]["seconds"] / best["seconds"]
            # CPU time depends less on the machine's load and on how many threads a tool starts.
            figures["cpu_speedup_vs_scanpy"] = results["scanpy"]["cpu_seconds"] / base["cpu_seconds"]
            print(f"\npertsci.wilcoxon is {figures['speedup_vs_scanpy']:.1f}x faster than scanpy "
                  f"(target >= {TARGET_SPEEDUP_SCANPY:g}x); by CPU time, 1 thread: {figures['cpu_speedup_vs_scanpy']:.1f}x")
        illico = {label: r for label, r in results.items() if label.startswith("illico")}
        if illico:
            fastest = min(illico, key=lambda label: illico[label]["seconds"])
            figures["time_vs_illico"] = best["seconds"] / illico[fastest]["seconds"]
            figures["illico_above_data_mb"] = illico[fastest]["peak_mb"] - illico[fastest]["loaded_mb"]
            for label in mine:
                threads = label.split("@")[1] if "@" in label else "1"
                if f"illico@{threads}" in illico:
                    ratio = results[label]["seconds"] / illico[f"illico@{threads}"]["seconds"]
                    figures[f"time_vs_illico_{threads}_thread{'s' if threads != '1' else ''}"] = ratio
                    print(f"{label} takes {ratio:.2f}x the time of illico@{threads}")
            if "illico@1" in illico:
                figures["cpu_time_vs_illico_1_thread"] = base["cpu_seconds"] / illico["illico@1"]["cpu_seconds"]
            print(f"pertsci.wilcoxon ({best_label}) takes {figures['time_vs_illico']:.2f}x the time of {fastest}, "
                  f"the fastest illico (target <= {TARGET_TIME_VS_ILLICO:g}x)")
            print(f"memory above the data: pertsci.wilcoxon ({best_label}) {figures['openpert_above_data_mb']:.0f} MB, "
                  f"{fastest} {figures['illico_above_data_mb']:.0f} MB (target: at most illico's)")
    dest = write_figures("wilcoxon", figures, path=args.json, screen=shape, tools=table)
    print(f"figures: {dest}")


if __name__ == "__main__":
    main()
