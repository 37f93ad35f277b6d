"""The question prompts of appendix C.2: SUMMER's, LLM (No CoT)'s and LLM (No retrieval)'s.

Each prompt asks about one pair (p, g) of a pair subtask (``de`` or ``dir``), laid out as the
published prompts are; the answers are parsed by :mod:`perturbqa_lib.answer_parsing`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["outcome_text", "summer_prompt", "no_cot_prompt", "no_retrieval_prompt"]


def outcome_text(subtask: str, pert: str, gene: str, label: int) -> str:
    """The outcome line of an example: ``A) Knockdown of p does not impact g.`` and so on."""
    if subtask == "de":
        return f"A) Knockdown of {pert} does not impact {gene}." if label == 0 else \
            f"B) Knockdown of {pert} results in differential expression of {gene}."
    if subtask == "dir":
        return f"A) Knockdown of {pert} results in a decrease in expression of {gene}." if label == 0 else \
            f"B) Knockdown of {pert} results in an increase in expression of {gene}."
    raise ValueError(f"subtask must be 'de' or 'dir', got {subtask!r}")


def _final_options(subtask: str, pert: str, gene: str) -> list[str]:
    if subtask == "de":
        return [f"No. Knockdown of {pert} does not impact {gene}.",
                f"Yes. Knockdown of {pert} results in differential expression of {gene}.",
                f"There is insufficient evidence to determine how knockdown of {pert} affects {gene}."]
    return [f"Decrease. Knockdown of {pert} results in a decrease in expression of {gene}.",
            f"Increase. Knockdown of {pert} results in an increase in expression of {gene}.",
            f"There is insufficient evidence to determine how knockdown of {pert} affects {gene}."]


def summer_prompt(subtask: str, pert: str, gene: str, pert_summary: str, gene_summary: str, cell_line: str,
                  cell_line_description: str, examples: Sequence[tuple[str, str, str, str, int]]) -> str:
    """SUMMER's question prompt (appendix C.2), laid out as the published prompts are.

    Parameters
    ----------
    subtask : {"de", "dir"}
    pert, gene : str
        The pair asked about; ``pert_summary``/``gene_summary`` their summaries (as perturbation,
        as downstream gene).
    cell_line, cell_line_description : str
        E.g. ``"K562"`` and the sentence of appendix D.3.
    examples : sequence of tuple
        ``(pert', gene', summary of pert', summary of gene', label)`` of the retrieved pairs.
    """
    if subtask == "de":
        goal = f"Does a CRISPRi knockdown of {pert} in {cell_line} cells result in differential expression of {gene}?"
        q2 = f"When perturbing {pert} or similar genes, what downstream pathways or genes are differentially expressed?"
        q4 = f"What perturbations of upstream pathways or genes result in differential expression of {gene} or similar genes (if any)?"
        q5 = f"Is a CRISPRi knockdown of {pert} in {cell_line} cells likely to result in differential expression of {gene}?"
        why = ("For example, if 2) and 4) are unrelated or only indirectly related, it is unlikely we will observe "
               "differential expression. On the other hand, if 2) and 4) significantly overlap in specific genes or "
               "pathways, we may observe differential expression.")
    elif subtask == "dir":
        goal = f"Does a CRISPRi knockdown of {pert} in {cell_line} cells result in an increase or a decrease in expression of {gene}?"
        q2 = f"When perturbing {pert} or similar genes, which downstream pathways or genes increase or decrease in expression?"
        q4 = f"What perturbations of upstream pathways or genes result in an increase or a decrease in expression of {gene} or similar genes (if any)?"
        q5 = f"Is a CRISPRi knockdown of {pert} in {cell_line} cells likely to result in an increase or a decrease in expression of {gene}?"
        why = ("For example, if 2) and 4) point in the same direction for specific genes or pathways, expression likely "
               "changes in that direction.")
    else:
        raise ValueError(f"subtask must be 'de' or 'dir', got {subtask!r}")
    options = "\n".join(f"    - {o}" for o in _final_options(subtask, pert, gene))
    listing = "".join(
        f"     Example {i}: Impact of knocking down {p2} on {g2}\n"
        f"    Description of perturbed gene {p2}: {sp2}\n\n"
        f"    Description of gene of interest {g2}: {sg2}\n\n"
        f"    Outcome: {outcome_text(subtask, p2, g2, y)}\n"
        for i, (p2, g2, sp2, sg2, y) in enumerate(examples, 1)
    )
    return f"""[Start of Prompt]
    You are an expert molecular biologist who studies how genes are related using Perturb-seq. Your goal is to determine: {goal}

    You are given as input:
    - Description of perturbed gene ({pert}): description of gene that is perturbed via CRISPRi knockdown
    - Description of gene of interest ({gene}): description of gene, the impact on which you wish to infer
    - Context: description of cell line in which the genes are expressed
    - Examples: set of experimental observations that describe the impact of CRISPRi perturbations on related genes, to contextualize your answer

    Output: Please extract the most relevant parts of the examples that address these five questions. Be specific.

    1) Which of the observed perturbed genes are most similar to {pert} (if any, including {pert} itself)?
    2) {q2} Justify your answer with the observed outcomes.
    3) Which of the observed genes of interest are most similar to {gene} (if any, including {gene} itself)?
    4) {q4} Justify your answer with the observed outcomes.
    5) {q5} {why} Your final answer should end with one of these three options and nothing else.
{options}
    [End of Prompt]

    [Start of Input]
    - Description of perturbed gene ({pert}): {pert_summary}

    - Description of gene of interest ({gene}): {gene_summary}

    - Context: {cell_line_description}

    - Examples: \n{listing}    \n    [End of Input]"""


def _option_lines(subtask: str) -> tuple[str, str]:
    if subtask == "de":
        return ("A) Knockdown of the perturbed gene does not impact the gene of interest.",
                "B) Knockdown of the perturbed gene results in differential expression of the gene of interest.")
    if subtask == "dir":
        return ("A) Knockdown of the perturbed gene results in down-regulation of the gene of interest.",
                "B) Knockdown of the perturbed gene results in up-regulation of the gene of interest.")
    raise ValueError(f"subtask must be 'de' or 'dir', got {subtask!r}")


def no_cot_prompt(subtask: str, pert_summary: str, gene_summary: str, cell_line_description: str,
                  examples: Sequence[tuple[str, str, int]]) -> str:
    """LLM (No CoT) prompt: two solved examples (one of each label), then the question (C.2).

    ``examples`` holds ``(summary of pert', summary of gene', label)`` for Examples 1 and 2.
    """
    a, b = _option_lines(subtask)
    blocks = []
    for i, (sp2, sg2, y) in enumerate(examples, 1):
        blocks.append(f"Example {i}.\nInput:\n- Perturbed gene: {sp2}\n- Gene of interest: {sg2}\nAnswer: {b if y else a}")
    n = len(examples) + 1
    blocks.append(f"Example {n}.\nInput:\n- Perturbed gene: {pert_summary}\n- Gene of interest: {gene_summary}\nAnswer:")
    return f"""You are an expert molecular biologist who studies how genes are related using Perturb-seq.
You are given as Input:
- Perturbed gene: description of gene that is perturbed via CRISPRi knockdown
- Gene of interest: description of gene, the impact on which you wish to infer
Context: {cell_line_description}
Question: If you knockdown the perturbed gene using CRISPRi, how does the gene of interest's expression change?
Answer: Your answer must end with one of these two choices and nothing else.
{a}
{b}
Format: Follow the same format as Examples 1 and {n - 1}, and complete Example {n}.

""" + "\n\n".join(blocks)


def no_retrieval_prompt(subtask: str, pert_summary: str, gene_summary: str, cell_line_description: str,
                        hypothesis: int) -> str:
    """LLM (No retrieval) prompt: find evidence for or against a hypothesis (C.2).

    ``hypothesis`` is the label stated as the hypothesis (0 for option A, 1 for option B); the
    paper asks each option twice, whatever the truth.
    """
    a, b = _option_lines(subtask)
    return f"""You are an expert molecular biologist who studies how genes are related using Perturb-seq.
You are given as Input:
- Perturbed gene: description of gene that is perturbed via CRISPRi knockdown
- Gene of interest: description of gene, the impact on which you wish to infer
- Hypothesis: hypothesis regarding how the specified perturbation affects the gene of interest
Context: {cell_line_description}
Question: If you knockdown the perturbed gene using CRISPRi, how does the gene of interest's expression change?
Task: Your goal is to identify evidence in the input that supports or refutes the hypothesis, and explain whether the hypothesis is likely to be true.
Output format: Please fill in the following four sections. Preserve the formatting and add the corresponding content.
1) Supporting evidence: Identify all relevant parts of the input that support the hypothesis.
2) Refuting evidence: Identify all relevant parts of the input that refute the hypothesis.
3) Explanation: Based on the evidence, explain how to answer the question, step by step. In particular,
- if there is a causal relationship from the perturbed gene to the gene of interest, explain how biological mechanisms relate the perturbed gene to the gene of interest.
- if there is no causal relationship from the perturbed gene to the gene of interest, explain why. For example, the perturbed gene may be downstream of the gene of interest, or there may be no relationship between the two genes.
- if there is insufficient evidence to answer the question, say so.
4) Answer: Your answer must end with one of these three choices and nothing else.
{a}
{b}
C) There is insufficient evidence to determine how knockdown of the perturbed gene affects the gene of interest.
Input:
- Perturbed gene: {pert_summary}
- Gene of interest: {gene_summary}
- Hypothesis: {b if hypothesis else a}"""
