"""The task's fixed names: the 18-relation vocabulary (and uniform draws from it), the two kinds of item, the judge's dimensions."""

from __future__ import annotations

import numpy as np

__all__ = ["RELATIONS", "RELATION_INDEX", "random_relations", "TASK_RELATION", "TASK_MECHANISM", "JUDGE_DIMENSIONS"]

#: The controlled relation vocabulary of Task A, in the order of the paper's prompt (section 3.3.1).
RELATIONS: tuple[str, ...] = (
    "activates",
    "inhibits",
    "upregulates_expression",
    "downregulates_expression",
    "regulates",
    "binds",
    "dissociates_from",
    "phosphorylates",
    "dephosphorylates",
    "ubiquitinates",
    "glycosylates",
    "methylates",
    "produces",
    "consumes",
    "converts_to",
    "leads_to",
    "increases_level",
    "decreases_level",
)

#: Relation -> its position in :data:`RELATIONS` (also the test "is this a label?").
RELATION_INDEX: dict[str, int] = {r: i for i, r in enumerate(RELATIONS)}



def random_relations(n: int, seed: int) -> np.ndarray:
    """``n`` relations drawn uniformly from :data:`RELATIONS` with a seeded generator (the chance answer of Task A)."""
    rng = np.random.default_rng(seed)
    return np.asarray(RELATIONS)[rng.integers(0, len(RELATIONS), size=n)]


#: Values of the ``task`` column: Task A items and Task B items.
TASK_RELATION = "relation"
TASK_MECHANISM = "mechanism"

#: The four LLM-as-a-judge dimensions of section 3.4.2, as the judge names them in its JSON.
JUDGE_DIMENSIONS: tuple[str, ...] = ("phenotype_coverage", "causal_reasoning", "factuality", "hallucination")
