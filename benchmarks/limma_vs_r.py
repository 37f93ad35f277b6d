"""pertsci's limma-voom port (edger, limma_voom, limma_ebayes) against R's limma/edgeR: runtimes and agreement.

Both sides run the OP3 DE steps on the same simulated pseudobulk matrix: TMM factors, voom,
weighted lmFit with the design ``~0 + cell_type:compound + plate``, one contrast per (cell type,
compound) against DMSO, ``eBayes(robust=TRUE)``. R's time is measured inside R (without reading
the CSV files); Python's is the same steps in process. Prints both runtimes, their ratio and the
agreement (Pearson r of -log10 p, median relative difference of logFC).

Run with ``PYTHONPATH=common python benchmarks/limma_vs_r.py [--compounds 40] [--genes 4000]``
(needs ``Rscript`` with limma, edgeR and statmod). The default size is a reduced OP3 design;
``--compounds 0 --genes 0`` uses all 146 compounds and 18,211 simulated genes (the gene filter
then keeps several thousand). The real OP3 design is read from ``--data-dir`` (default: the
project's shared data folder); without it the design has made-up names.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from figures import write_figures

from openpert.config.project import shared_data_dir
from pertsci import edger, limma_ebayes, limma_voom, op3_processing, op3_simulation

ROOT = Path(__file__).resolve().parents[1]
R_SCRIPT = ROOT / "tests" / "pertsci" / "limma_voom_reference.R"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compounds", type=int, default=40, help="compounds incl. positive controls (0: all 146)")
    ap.add_argument("--genes", type=int, default=4000, help="simulated genes before filtering (0: all 18,211)")
    ap.add_argument("--cells-per-well", type=float, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=shared_data_dir(ROOT), help="folder holding op3/ (the real design)")
    ns = ap.parse_args()
    if shutil.which("Rscript") is None:
        raise SystemExit("Rscript not found: apt-get install r-base-core r-bioc-limma r-bioc-edger r-cran-statmod")
    try:
        meta = op3_simulation.load_op3_metadata(ns.data_dir)
    except FileNotFoundError:
        meta = op3_simulation.synthetic_metadata(n_genes=max(ns.genes, 1000), n_compounds=max(ns.compounds, 20))
    pb = op3_simulation.simulate_op3_pseudobulk(meta, n_genes=ns.genes or None, n_compounds=ns.compounds or None,
                                         cells_per_well=ns.cells_per_well, seed=ns.seed, min_cells=10)
    pb = pb[:, op3_processing.filter_genes(pb)].copy()
    rows = op3_processing.row_table(pb, ["train", "control", "test"], op3_processing.CONTROL_COMPOUND)
    rows = op3_processing.estimable_rows(pb, rows)
    design, contrasts = op3_processing.design_and_contrasts(pb, rows)
    counts = np.asarray(pb.X).T
    print(f"pseudobulk: {counts.shape[0]} genes x {counts.shape[1]} samples, {design.shape[1]} coefficients, "
          f"{contrasts.shape[1]} contrasts")

    start = time.perf_counter()
    nf = edger.calc_norm_factors(counts)
    v = limma_voom.voom(counts, design, lib_size=counts.sum(axis=0) * nf)
    fit = limma_ebayes.ebayes(limma_voom.contrasts_fit(limma_voom.lm_fit(v.E, design, v.weights), contrasts), robust=True)
    py_seconds = time.perf_counter() - start

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        samples = [f"s{i}" for i in range(counts.shape[1])]
        coefs = [f"c{j}" for j in range(design.shape[1])]
        pd.DataFrame(counts, index=pb.var_names, columns=samples).to_csv(d / "counts.csv")
        pd.DataFrame(design.to_numpy(), index=samples, columns=coefs).to_csv(d / "design.csv")
        pd.DataFrame(contrasts.toarray(), index=coefs, columns=[f"k{j}" for j in range(contrasts.shape[1])]).to_csv(d / "contrasts.csv")
        wall = time.perf_counter()
        res = subprocess.run(["Rscript", str(R_SCRIPT), str(d)], capture_output=True, text=True)
        r_wall = time.perf_counter() - wall
        if res.returncode != 0:
            raise SystemExit(f"R failed:\n{res.stderr}")
        info = dict(line.split("=", 1) for line in (d / "r_info.txt").read_text().split())
        r_seconds = float(info["seconds"])
        r_logfc = pd.read_csv(d / "r_logfc.csv", index_col=0).to_numpy()
        r_p = pd.read_csv(d / "r_pvalue.csv", index_col=0).to_numpy()

    rel = np.abs(fit.coefficients - r_logfc) / np.maximum(np.abs(r_logfc), 1e-12)
    # p-values that underflow to 0 (in both) are set to the smallest positive double.
    tiny = np.finfo(float).tiny
    r = np.corrcoef(-np.log10(np.maximum(fit.p_value, tiny)).ravel(), -np.log10(np.maximum(r_p, tiny)).ravel())[0, 1]
    print(f"{'step':45s} {'seconds':>10s}")
    print(f"{'R limma (TMM..eBayes, timed in R)':45s} {r_seconds:10.2f}")
    print(f"{'R total (Rscript incl. reading/writing CSV)':45s} {r_wall:10.2f}")
    print(f"{'pertsci (TMM..eBayes)':45s} {py_seconds:10.2f}")
    print(f"ratio R / openpert: {r_seconds / py_seconds:.2f}")
    print(f"agreement: Pearson r of -log10 p = {r:.8f}; median relative difference of logFC = {np.median(rel):.2e}; "
          f"max |logFC difference| = {np.max(np.abs(fit.coefficients - r_logfc)):.2e}")
    dest = write_figures("limma_vs_r", {
        "r_seconds": r_seconds, "pertsci_seconds": py_seconds, "speedup_vs_r": r_seconds / py_seconds,
        "pearson_log10_p": float(r), "median_rel_diff_logfc": float(np.median(rel)),
    }, genes=int(counts.shape[0]), samples=int(counts.shape[1]))
    print(f"figures: {dest}")


if __name__ == "__main__":
    main()
