"""Small signed graphs the PertReasonQA path tests build their cases on."""

from __future__ import annotations

import pandas as pd
from pertreasonqa_lib.signed_graph import SignedGraph, build_signed_graph


def edges(rows, database="OmniPath"):
    """An edge table of ``(source, sign, target)`` rows from one database."""
    return pd.DataFrame([{"source": s, "target": t, "sign": sign, "database": database} for s, sign, t in rows])


def graph_of(rows) -> SignedGraph:
    """The signed graph of ``(source, sign, target)`` rows."""
    return build_signed_graph(edges(rows))


def drug_graph() -> SignedGraph:
    """Compound D inhibits T1 and activates T2.

    T1 -| A -> B -> C -> E   (T1 reaches E in four gene-gene edges)
    T2 -> B                  (T2 reaches E in three)
    """
    genes = build_signed_graph(pd.DataFrame(
        [{"source": s, "target": t, "sign": sign, "database": "OmniPath"}
         for s, sign, t in [("T1", -1, "A"), ("A", 1, "B"), ("B", 1, "C"), ("C", 1, "E"), ("T2", 1, "B")]]))
    targets = pd.DataFrame({"drug": ["D", "D"], "target": ["T1", "T2"], "sign": [-1, 1]})
    return genes.with_drug_targets(targets, "test")
