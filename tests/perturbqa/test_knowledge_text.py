"""perturbqa_lib.knowledge_text: gene descriptions and relations as text (appendix D.1), set names."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from perturbqa_lib.knowledge_text import (
    describe_gene,
    local_edges,
    relations_text,
    set_annotation,
    set_description,
    set_display_name,
)

RESOURCES = Path(__file__).resolve().parents[2] / "resources_test" / "perturbqa"


def edges_frame(rows):
    df = pd.DataFrame(rows, columns=["source", "target", "relation"])
    df["sign"], df["directed"], df["database"] = 0, False, "toy"
    return df


def test_relations_text_style():
    edges = edges_frame([("ABCE1", "translational initiation (GO:0006413)", "go_bp"), ("ABCE1", "RNASEL", "physical"),
                         ("EIF3J", "ABCE1", "physical"), ("ABCE1", "Ribosome-recycling", "pathway"),
                         ("ABCE1", "CPLX", "complex"), ("IGF2R", "CPLX", "complex")])
    edges.loc[edges["relation"] == "physical", "database"] = "HuRI"
    text = relations_text("ABCE1", edges)
    assert text.startswith("Relations to other genes:")
    assert "- ABCE1 is involved in translational initiation (toy)." in text
    assert "ABCE1 may physically interact with EIF3J, RNASEL." in text and "(HuRI)" in text
    assert "may form a complex with IGF2R (CPLX, toy)" in text
    assert "Ribosome recycling" in text
    d = describe_gene("ARF5", "ADP-ribosylation factor 5; GTP-binding protein involved in protein trafficking.")
    assert "Gene products: ADP-ribosylation factor 5" in d and "Functions: GTP-binding protein" in d


def test_signs_limits_and_no_relation():
    edges = edges_frame([("TF", "G1", "signalling"), ("TF", "G2", "signalling"), ("REP", "TF", "signalling")])
    edges["sign"] = [1, 1, -1]
    text = relations_text("TF", edges, max_items=1)
    assert "- TF activates G1 and 1 more (toy)." in text and "- TF is inhibited by REP (toy)." in text
    assert relations_text("LONELY", edges) == ""
    assert describe_gene("X", None).endswith("No description is available.")


def test_set_names():
    assert set_display_name("translational initiation (GO:0006413)", "go_bp") == "translational initiation"
    assert set_display_name("Ribosome-recycling", "pathway") == "Ribosome recycling"
    assert set_display_name("Ribosome-recycling", "complex") == "Ribosome-recycling"
    assert set_annotation("12-Erythroid genes") == "Erythroid genes" and set_annotation("no-number") == "no-number"
    assert set_description("3-Heme", ["HBA1", "HBB"]) == "Gene set 3-Heme (Heme): 2 genes, HBA1, HBB."


def test_local_edges_give_the_same_relations_text():
    """The per-gene edge subsets SUMMER's summaries use leave every relations text unchanged."""
    edges = pd.read_parquet(RESOURCES / "k562" / "kg_edges.parquet")
    genes = sorted(set(edges["source"]))
    local = local_edges(edges, genes)
    texts = [relations_text(g, edges) for g in genes]
    assert sum(bool(t) for t in texts) > 10 and any("complex" in t for t in texts)
    assert texts == [relations_text(g, local[g]) for g in genes]
