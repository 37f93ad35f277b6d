"""The language-model questions of PertReasonQA and the answer loop (Kim et al. 2026, section 3, appendix B.2.5).

:func:`question_prompt` writes one question: the cell line, the perturbation (a compound with its
known targets), the effect gene, the basal state of every gene named and, in the cell-conditioned
setting, the item's candidate paths serialised in breadth-first order. :func:`answer_with_llm`
sends the questions with :data:`SYSTEM_PROMPT` and parses every reply strictly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from pertreasonqa_lib.answer_parsing import ResponseFormatError, parse_response
from pertreasonqa_lib.path_serialisation import serialize_paths
from pertsci.llm import LLMClient, SamplingParams
from pertsci.llm_usage import AnswerTally, failure_notes, usage_record

#: Short description of each cell line, for prompts.
CELL_DESCRIPTIONS = {
    "K562": "K562, a chronic myelogenous leukemia cell line of erythroleukemic character",
    "RPE1": "hTERT-RPE1, a telomerase-immortalised retinal pigment epithelial cell line",
    "B cells": "B cells, primary human B lymphocytes of peripheral blood (PBMC)",
    "Myeloid cells": "myeloid cells, primary human monocytes and dendritic cells of peripheral blood (PBMC)",
    "NK cells": "NK cells, primary human natural killer cells of peripheral blood (PBMC)",
    "T cells CD4+": "CD4+ T cells, primary human helper T lymphocytes of peripheral blood (PBMC)",
    "T cells CD8+": "CD8+ T cells, primary human cytotoxic T lymphocytes of peripheral blood (PBMC)",
    "T regulatory cells": "regulatory T cells, primary human CD4+ FOXP3+ T lymphocytes of peripheral blood (PBMC)",
}

SYSTEM_PROMPT = (
    "You are an expert molecular biologist who explains perturbation experiments mechanistically. "
    "Reason about signed regulatory paths and the cell's basal expression state: an inhibitory edge (-1) "
    "inverts a signal, an activating edge (+1) keeps it; a decrease cannot lower a gene that is already "
    "silent (low), and an increase cannot raise a gene that is already saturated (high).\n"
    "Answer in exactly this format and nothing else:\n"
    "<thinking>\nyour step-by-step mechanistic reasoning\n</thinking>\n"
    "<answer>up|down|unchanged</answer>\n"
    "<triplets>\n(SOURCE, SIGN, TARGET)\n...\n</triplets>\n"
    "where each triplet is one regulatory edge of your mechanism, SIGN is +1 (activates), -1 (inhibits) or 0 "
    "(unknown), one triplet per line, chaining the perturbed gene (or the compound, through its targets) to the "
    "effect gene."
)

_PERTURBATION_TEXT = {"crispri": "CRISPRi knockdown", "knockdown": "knockdown", "knockout": "knockout",
                      "crispra": "CRISPRa activation", "inhibitor": "inhibition", "activator": "activation",
                      "chemical": "treatment with the compound"}


def question_prompt(cell: str, perturbation: str, perturbation_type: str, gene: str, states: Mapping[str, str],
                    paths: Sequence[Sequence[Sequence]] | None, extra: str = "",
                    targets: Sequence[tuple[str, int]] | None = None) -> str:
    """The user message of one question.

    Parameters
    ----------
    cell, perturbation, perturbation_type, gene
        The item.
    states
        Basal state (low/medium/high/unknown) of every gene named in the prompt.
    paths
        Candidate paths (the cell-conditioned context), or None for the no-path setting.
    extra
        Further context (retrieved examples) inserted before the question.
    targets
        A compound's known targets with the sign of its action (:func:`~pertreasonqa_lib.signed_graph.compound_targets`).
    """
    event = perturbation_phrase(perturbation, perturbation_type)
    chemical = perturbation_type.lower() == "chemical"
    if chemical:
        states = {**states, perturbation: "compound"}
        action = {1: "activates", -1: "inhibits", 0: "acts on"}
        known = ", ".join(f"{action[int(s)]} {t}" for t, s in (targets or [])) or "none known"
        subject = f"Perturbation: {event} (known targets: {known})."
    else:
        subject = f"Perturbation: {event} (basal expression: {states.get(perturbation, 'unknown')})."
    lines = [
        f"Cell line: {CELL_DESCRIPTIONS.get(cell, cell)}.",
        subject,
        f"Effect gene: {gene} (basal expression: {states.get(gene, 'unknown')}).",
        "Basal expression states: low = silent (at or below the cell's low threshold), high = saturated "
        "(at or above its high threshold), medium in between.",
    ]
    if paths is not None:
        lines.append("")
        if paths:
            lines.append("Candidate regulatory paths from the knowledge graph, conditioned on the cell's basal state "
                         "(sign +1 activates, -1 inhibits, 0 unknown; [state] = basal expression):")
            lines.extend(serialize_paths(paths, states))
        else:
            lines.append("No regulatory path of at most four edges links the perturbation to the effect gene in the "
                         "cell-conditioned knowledge graph.")
    if extra:
        lines.extend(["", extra.strip()])
    cells = cell if cell.endswith("cells") else f"{cell} cells"
    lines.extend(["", f"Question: after {event} in {cells}, does {gene} go up, go down, or stay "
                  "unchanged? Give the mechanism as signed triplets."])
    return "\n".join(lines)


def perturbation_phrase(perturbation: str, perturbation_type: str) -> str:
    """``CRISPRi knockdown of A`` or ``treatment with the compound X``: the perturbation in prose."""
    kind = _PERTURBATION_TEXT.get(perturbation_type.lower(), perturbation_type)
    return f"{kind} {perturbation}" if perturbation_type.lower() == "chemical" else f"{kind} of {perturbation}"


def answer_with_llm(client: LLMClient, prompts: Sequence[str], sampling: SamplingParams,
                    items: Sequence[str] | None = None) -> pd.DataFrame:
    """Send every prompt (with :data:`SYSTEM_PROMPT`) and parse each response strictly.

    ``items`` (one per prompt, the test item ids) name the prompts longer than the model's context
    window; those are answered with an empty response, which breaks the format (``invalid``).

    Returns
    -------
    pandas.DataFrame
        ``answer`` (``invalid`` when the response breaks the format), ``triplets`` (list),
        ``response``, ``parse_error`` ('' when parsed), one row per prompt.
    """
    conversations = [[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": p}] for p in prompts]
    texts = client.generate(conversations, sampling, labels=items)
    rows = []
    for completions in texts:
        text = completions[0]
        try:
            _, answer, triplets = parse_response(text)
            error = ""
        except ResponseFormatError as err:
            answer, triplets, error = "invalid", [], str(err)
        rows.append({"answer": answer, "triplets": triplets, "response": text, "parse_error": error})
    return pd.DataFrame(rows)


def answers_uns(client: LLMClient, table: pd.DataFrame) -> dict:
    """The ``uns`` entries of :func:`answer_with_llm`'s answers: ``llm_usage`` and ``llm_failures``.

    One sample per question; a response that breaks the format (a ``parse_error``) is an
    abstention, and its question falls back to ``invalid``, which scores as wrong. The prompts
    the model could not take are printed and listed (:func:`pertsci.llm_usage.failure_notes`).
    """
    tally = AnswerTally()
    tally.add_questions([[error != ""] for error in table["parse_error"]], abstained=True)
    return {"llm_usage": usage_record(client.stats, tally), "llm_failures": failure_notes(client.failures)}
