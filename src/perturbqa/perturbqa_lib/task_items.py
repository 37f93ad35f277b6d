"""The task's vocabulary and its items: subtasks, ternary responses, pair and cluster questions.

PerturbQA (Wu et al., ICLR 2025) asks, for a CRISPRi Perturb-seq screen, whether knocking down a
gene *p* differentially expresses a gene *g* (``de``), whether a differentially expressed *g* goes
up or down (``dir``), and what a cluster of genes or of perturbations shares (``gse``).

Every dataset of the task is a table of *items* (questions): a pair ``(pert, gene)`` for
``de``/``dir``, a cluster for ``gse_gene``/``gse_pert``. :func:`pair_items` and
:func:`cluster_items` build them. Every pair method trains on one ternary response per pair
(``unchanged``, ``down``, ``up``); :func:`subtask_labels` and :func:`training_pairs` turn those
responses into the binary labels of a subtask.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = [
    "PAIR_SUBTASKS", "CLUSTER_SUBTASKS", "SUBTASKS", "RESPONSES",
    "subtask_labels", "training_pairs", "pair_items", "cluster_items", "cluster_members",
]

#: Subtasks of the task: binary questions about pairs, and text about clusters.
PAIR_SUBTASKS = ("de", "dir")
CLUSTER_SUBTASKS = ("gse_gene", "gse_pert")
SUBTASKS = PAIR_SUBTASKS + CLUSTER_SUBTASKS
#: The ternary response of a gene to a perturbation, the training target of every pair method.
RESPONSES = ("unchanged", "down", "up")


def subtask_labels(responses: pd.Series | np.ndarray, subtask: str) -> tuple[np.ndarray, np.ndarray]:
    """Binary labels of a subtask from ternary responses.

    Returns
    -------
    mask, labels
        ``mask``: which pairs belong to the subtask (all for ``de``; the changed ones for
        ``dir``); ``labels``: 1 for DE (``de``) or up (``dir``) over the masked pairs.
    """
    r = np.asarray(responses).astype(str)
    unknown = set(np.unique(r)) - set(RESPONSES)
    if unknown:
        raise ValueError(f"unknown responses {sorted(unknown)}; expected {RESPONSES}")
    if subtask == "de":
        return np.ones(r.size, bool), (r != "unchanged").astype(int)
    if subtask == "dir":
        mask = r != "unchanged"
        return mask, (r[mask] == "up").astype(int)
    raise ValueError(f"subtask {subtask!r} has no binary labels; expected one of {PAIR_SUBTASKS}")


def training_pairs(train_obs: pd.DataFrame, subtask: str) -> pd.DataFrame:
    """Training pairs of a pair subtask with their binary ``label`` (``pert, gene, label``)."""
    mask, labels = subtask_labels(train_obs["response"].astype(str), subtask)
    out = train_obs.loc[mask, ["pert", "gene"]].astype(str).reset_index(drop=True)
    out["label"] = labels
    return out


def pair_items(pairs: pd.DataFrame, subtask: str) -> pd.DataFrame:
    """Test items of a pair subtask: index ``<subtask>:<pert>:<gene>``, columns of the test file."""
    if subtask not in PAIR_SUBTASKS:
        raise ValueError(f"{subtask!r} is not a pair subtask {PAIR_SUBTASKS}")
    index = subtask + ":" + pairs["pert"].astype(str) + ":" + pairs["gene"].astype(str)
    return pd.DataFrame({"subtask": subtask, "pert": pairs["pert"].astype(str).to_numpy(),
                         "gene": pairs["gene"].astype(str).to_numpy(), "members": ""}, index=pd.Index(index, name="item"))


def cluster_items(clusters: pd.DataFrame, subtask: str) -> pd.DataFrame:
    """Test items of a gene-set subtask: index ``<subtask>:<cluster>``, members joined by ``;``."""
    if subtask not in CLUSTER_SUBTASKS:
        raise ValueError(f"{subtask!r} is not a cluster subtask {CLUSTER_SUBTASKS}")
    index = [f"{subtask}:{c}" for c in clusters["cluster"]]
    return pd.DataFrame({"subtask": subtask, "pert": "", "gene": "",
                         "members": [";".join(m) for m in clusters["members"]]}, index=pd.Index(index, name="item"))


def cluster_members(members: pd.Series) -> list[list[str]]:
    """The members of each cluster item, from the test file's ``members`` column (joined by ``;``)."""
    return [[m for m in str(v).split(";") if m] for v in members]
