"""Finding similar items: the text of an item that an embedding sees, and cosine nearest neighbours."""

from __future__ import annotations

import numpy as np
import pandas as pd

from biome_bench_lib.vocabulary import TASK_RELATION

__all__ = ["triple_text", "mechanism_query_text", "item_texts", "nearest_neighbours"]


def triple_text(source: str, source_state: str, target: str, target_state: str, condition: str) -> str:
    """The text of a Task A question without the prompt's boilerplate: what an embedding should see.

    Parameters
    ----------
    source, source_state, target, target_state, condition
        The knowledge-graph hexaplet without its relation.

    Returns
    -------
    str
        ``"source (state) -> target (state); condition: ..."``.
    """
    return f"{source} ({source_state}) -> {target} ({target_state}); condition: {condition}"


def mechanism_query_text(pathway_name: str, observed_entities: str) -> str:
    """The text of a Task B question: pathway name and observed entities.

    The pathway description is left out: every item of a pathway shares it, so it says nothing
    about which item is closest.

    Parameters
    ----------
    pathway_name
        The KEGG pathway's name with its species.
    observed_entities
        The observed entities with their states, comma-separated.

    Returns
    -------
    str
    """
    return f"{pathway_name}. Observed: {observed_entities}"


def item_texts(items: pd.DataFrame) -> list[str]:
    """Per item, :func:`triple_text` (Task A) or :func:`mechanism_query_text` (Task B).

    Parameters
    ----------
    items
        An item table (the columns of :data:`biome_bench_lib.items.ITEM_COLUMNS`).

    Returns
    -------
    list of str
        One text per row, in row order.
    """
    out = []
    for row in items.itertuples(index=False):
        if row.task == TASK_RELATION:
            out.append(triple_text(row.source, row.source_state, row.target, row.target_state, row.condition))
        else:
            out.append(mechanism_query_text(row.pathway_name, row.observed_entities))
    return out


def nearest_neighbours(queries: np.ndarray, keys: np.ndarray, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Indices and cosine similarities of the ``k`` most similar keys of each query.

    Parameters
    ----------
    queries, keys
        Row vectors (normalised inside).
    k
        Neighbours per query (at most ``len(keys)``); ties go to the lower key index.

    Returns
    -------
    indices, similarities
        Arrays of shape ``(len(queries), k)``, most similar first.
    """
    if len(keys) == 0:
        raise ValueError("no keys to search: the training split has no item of this kind")
    k = min(int(k), len(keys))
    q = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    c = keys / np.maximum(np.linalg.norm(keys, axis=1, keepdims=True), 1e-12)
    sim = q.astype(np.float64) @ c.astype(np.float64).T
    # Stable sort of the negated similarities keeps the lower index first among ties.
    order = np.argsort(-sim, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(sim, order, axis=1)
