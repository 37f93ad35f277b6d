"""perturbqa_lib.summary_prompts: the summarisation prompts of appendix C.1 and their two roles."""

from __future__ import annotations

import pytest
from perturbqa_lib.summary_prompts import (
    gene_set_description_prompt,
    gene_set_summary_prompt,
    neighbourhood_summary_prompt,
    node_summary_prompt,
)


def test_node_and_neighbourhood_prompts_by_role():
    pert = node_summary_prompt("ABCE1", "Description of gene: ABCE1", "pert")
    gene = node_summary_prompt("ABCE1", "Description of gene: ABCE1", "gene")
    assert "downstream impact of perturbing gene ABCE1 via gene knockdown" in pert
    assert "what types of perturbations might impact the expression of gene ABCE1" in gene
    assert pert.endswith("Domain knowledge: Description of gene: ABCE1\n\nBrief overview of gene ABCE1:")
    hood = neighbourhood_summary_prompt("ABCE1", "It recycles ribosomes.", "", "pert")
    assert "Description of gene ABCE1: It recycles ribosomes." in hood
    assert "Relations to other genes: none recorded." in hood
    assert hood.endswith("Downstream effects of perturbing ABCE1 via gene knockdown:")
    assert neighbourhood_summary_prompt("ABCE1", "s", "Relations to other genes:\n\n- x", "gene").endswith(
        "Perturbations that may affect the levels of ABCE1:")
    for prompt in (node_summary_prompt, lambda g, d, r: neighbourhood_summary_prompt(g, d, "", r)):
        with pytest.raises(ValueError, match="role must be"):
            prompt("ABCE1", "d", "both")


def test_gene_set_prompts():
    summary = gene_set_summary_prompt("heme biosynthesis", ["HMBS: makes heme.", "UROD: makes heme."])
    assert "associated with heme biosynthesis in human cells" in summary and "- HMBS: makes heme.\n- UROD" in summary
    genes = gene_set_description_prompt(["A: a"], "gene")
    perts = gene_set_description_prompt(["A: a"], "pert")
    assert "similar transcriptional response when upstream genes are perturbed" in genes
    assert "whose knockdowns were observed to have similar transcriptional effects" in perts
    assert "3) Name of gene set" in genes and genes.endswith("[Start of Input]\n- A: a\n[End of Input]")
    with pytest.raises(ValueError, match="cluster_type"):
        gene_set_description_prompt(["A: a"], "cell")
