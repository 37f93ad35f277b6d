"""perturbqa_lib.retrieval and perturbqa_lib.knowledge_text: retrieval criteria, prompts as published, answer parsing."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.knowledge_text import (
    describe_gene,
    parse_gene_set_description,
    relations_text,
)
from perturbqa_lib.retrieval import (
    ABSTAIN,
    Retriever,
    closest_nodes,
    neighbour_matrix,
    parse_option_answer,
    parse_summer_answer,
    summer_prompt,
)
from project_paths import SHARED_DATA


def edges_frame(rows):
    df = pd.DataFrame(rows, columns=["source", "target", "relation"])
    df["sign"], df["directed"], df["database"] = 0, False, "toy"
    return df


@pytest.fixture
def toy():
    # P0 (test perturbation) shares pathways S1, S2 with P1, only S1 with P2; P3 shares nothing.
    # Gene g0 shares complex C1 with g1; g2 is unrelated.
    edges = edges_frame([("P0", "S1", "pathway"), ("P0", "S2", "pathway"), ("P1", "S1", "pathway"), ("P1", "S2", "pathway"),
                         ("P2", "S1", "pathway"), ("P3", "S9", "pathway"), ("g0", "C1", "complex"), ("g1", "C1", "complex"),
                         ("g2", "C7", "complex")])
    train = pd.DataFrame([(p, g) for p in ["P1", "P2", "P3"] for g in ["g0", "g1", "g2"]], columns=["pert", "gene"])
    train["label"] = [1, 1, 0, 0, 1, 0, 0, 0, 0]
    return edges, train


def test_closest_nodes_rank_by_shared_neighbours(toy):
    edges, train = toy
    cand = ["P1", "P2", "P3"]
    close = closest_nodes(["P0"], neighbour_matrix(edges, ["P0"]), cand, neighbour_matrix(edges, cand), k=10)
    assert close["P0"] == ["P1", "P2"]  # P3 shares no neighbour
    close = closest_nodes(["g0"], neighbour_matrix(edges, ["g0"]), ["g0", "g1", "g2"], neighbour_matrix(edges, ["g0", "g1", "g2"]))
    assert close["g0"] == ["g0", "g1"]  # the gene itself first


def test_retriever_criteria_and_limits(toy):
    edges, train = toy
    r = Retriever(train, edges, k=10, per_criterion=2)
    examples = r.retrieve("P0", "g0", np.random.default_rng(0))
    crit = {}
    for e in examples:
        crit.setdefault(e.criterion, []).append((e.pert, e.gene))
    assert all(len(v) <= 2 for v in crit.values())
    assert all(p in ("P1", "P2") and g in ("g0", "g1") for p, g in crit[1])
    assert all(p in ("P1", "P2") for p, _ in crit.get(2, []))
    assert all(g in ("g0", "g1") for _, g in crit.get(3, []))
    pairs = [(e.pert, e.gene) for e in examples]
    assert len(pairs) == len(set(pairs))
    labels = dict(zip(zip(train["pert"], train["gene"]), train["label"]))
    assert all(e.label == labels[(e.pert, e.gene)] for e in examples)
    # A gene set's neighbours are its members' (and the members): S* sets the same way.
    sets = {"SET": ["g0"]}
    r2 = Retriever(train.assign(gene=train["gene"].replace({"g0": "SET"})), edges, sets, k=10, per_criterion=5)
    r2.prepare(["P0"], ["SET"])
    assert r2.close_genes["SET"][0] == "SET"


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


@pytest.mark.skipif(not (SHARED_DATA / "perturbqa" / "prompt_examples").is_dir(), reason="shared prompt examples absent")
def test_summer_prompt_reproduces_published_prompt():
    published = json.loads((SHARED_DATA / "perturbqa/prompt_examples/summer_de_input_AARS2_AAK1.json").read_text())[0]
    inp = published.split("[Start of Input]\n", 1)[1]
    ps = re.search(r"- Description of perturbed gene \(AARS2\): (.*?)\n\n    - Description of gene of interest", inp, re.S).group(1)
    gs = re.search(r"- Description of gene of interest \(AAK1\): (.*?)\n\n    - Context", inp, re.S).group(1)
    ctx = re.search(r"- Context: (.*?)\n\n    - Examples", inp, re.S).group(1)
    found = re.findall(r"     Example \d+: Impact of knocking down (\S+) on (\S+)\n    Description of perturbed gene \S+: (.*?)\n\n"
                       r"    Description of gene of interest \S+: (.*?)\n\n    Outcome: ([AB])\)", inp, re.S)
    examples = [(p, g, a, b, int(o == "B")) for p, g, a, b, o in found]
    assert len(examples) == 10
    assert summer_prompt("de", "AARS2", "AAK1", ps, gs, "K562", ctx, examples) == published


def test_parse_answers():
    yes = "...the pathways overlap.\nYes. Knockdown of AARS2 results in differential expression of AAK1."
    no = "Based on the observed outcomes, it is unlikely that a CRISPRi knockdown of AARS2 in K562 cells will result in " \
         "differential expression of AAK1. Therefore, the answer is:\n\nNo. Knockdown of AARS2 does not impact AAK1.\n[End of Output]"
    unsure = "Final answer: There is insufficient evidence to determine how knockdown of ABCE1 affects CDK11A."
    both = "No. Knockdown of AARS2 does not impact AAK1. Yes. Knockdown of AARS2 results in differential expression of AAK1."
    assert parse_summer_answer(yes, "de", "AARS2", "AAK1") == 1
    assert parse_summer_answer(no, "de", "AARS2", "AAK1") == 0
    assert parse_summer_answer(unsure, "de", "ABCE1", "CDK11A") == ABSTAIN
    assert parse_summer_answer(both, "de", "AARS2", "AAK1") == ABSTAIN
    assert parse_summer_answer("gibberish", "de", "AARS2", "AAK1") == ABSTAIN
    up = "Increase. Knockdown of X results in an increase in expression of Y."
    assert parse_summer_answer(up, "dir", "X", "Y") == 1
    assert parse_option_answer("1) ... 4) Answer: B) Knockdown of the perturbed gene results in up-regulation of the gene of interest.", "dir") == 1
    assert parse_option_answer("4) Answer: A) Knockdown of the perturbed gene does not impact the gene of interest.", "de") == 0
    assert parse_option_answer("4) Answer: C) There is insufficient evidence", "de") == ABSTAIN


def test_parse_gene_set_description():
    text = ("1) Brief overview of gene set: The genes encode respiratory chain subunits.\n\n2) Upstream pathways may affect "
            "this gene set: TCA cycle changes.\n\n3) Name of gene set: Mitochondrial respiratory chain genes\n[End of Output]")
    parsed = parse_gene_set_description(text)
    assert parsed == {"description": "The genes encode respiratory chain subunits.", "name": "Mitochondrial respiratory chain genes"}
    assert parse_gene_set_description("nothing useful") == {"description": "", "name": ""}
