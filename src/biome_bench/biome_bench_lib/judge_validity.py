"""The judge validity check of paper section 4.4: corrupted references, and how far the judge's scores drop for them.

A valid judge scores a faithful rewrite of the reference near the top and a corrupted one far
lower; :func:`perturb_mechanism` makes the corrupted one by swapping entities in pairs and
inverting every regulation word, and :func:`validity_scores` measures the drop.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pandas as pd

from biome_bench_lib.entity_lists import entity_name_state, split_entity_list
from biome_bench_lib.vocabulary import JUDGE_DIMENSIONS

__all__ = ["swappable_entities", "perturb_mechanism", "validity_scores"]

def swappable_entities(observed_entities: str, triples: Sequence[Mapping[str, str]]) -> list[str]:
    """Entity names a perturbation may swap: the observed entities' and those of the paper's knowledge graph.

    Parameters
    ----------
    observed_entities
        The item's comma-separated observed entities with their states.
    triples
        The paper's knowledge-graph edges (``source`` and ``target`` are taken).

    Returns
    -------
    list of str
        Names without states, observed ones first; repeats are kept (the perturbation drops them).
    """
    names = [entity_name_state(e)[0] for e in split_entity_list(observed_entities)]
    names += [t[k] for t in triples for k in ("source", "target")]
    return names


#: Regulation words and their opposites, used to corrupt a mechanism's directions of effect.
_OPPOSITES = {
    "activates": "inhibits", "activate": "inhibit", "activated": "inhibited", "activating": "inhibiting",
    "activation": "inhibition",
    "increases": "decreases", "increase": "decrease", "increased": "decreased", "increasing": "decreasing",
    "upregulates": "downregulates", "upregulate": "downregulate", "upregulated": "downregulated",
    "upregulation": "downregulation",
    "promotes": "suppresses", "promote": "suppress", "promoted": "suppressed", "promoting": "suppressing",
    "enhances": "attenuates", "enhance": "attenuate", "enhanced": "attenuated", "enhancing": "attenuating",
    "elevated": "lowered", "higher": "lower", "gain": "loss",
    "stimulates": "blocks", "stimulated": "blocked",
    "facilitates": "impairs", "facilitated": "impaired",
    "accumulation": "depletion",
}
# Both directions: an "inhibits" of the reference becomes "activates" as surely as the reverse.
_OPPOSITES.update({v: k for k, v in list(_OPPOSITES.items())})


def _match_case(word: str, like: str) -> str:
    """``word`` in the case of ``like`` (all capitals, capitalised or as is)."""
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def perturb_mechanism(text: str, entities: Sequence[str]) -> tuple[str, int, int]:
    """Corrupt a mechanism text while keeping it fluent: swap entities and invert relations.

    Entities of ``entities`` that the text mentions are paired in order of first mention and each
    pair is swapped everywhere; every regulation word of a fixed list is replaced by its opposite
    (activates <-> inhibits, increased <-> decreased, promotes <-> suppresses...). One pass over
    the text, so nothing is swapped twice.

    Parameters
    ----------
    text
        The reference mechanism.
    entities
        Entity names (without states) that may be swapped, e.g. the observed entities.

    Returns
    -------
    perturbed, n_entity_swaps, n_relation_flips
        The text and how many entity mentions and regulation words were changed.
    """
    names = sorted({e.strip() for e in entities if len(e.strip()) >= 2}, key=len, reverse=True)
    boundary = r"(?<![A-Za-z0-9]){}(?![A-Za-z0-9])"
    found = []
    for name in names:
        m = re.search(boundary.format(re.escape(name)), text)
        # A name inside a longer name already taken (STAT3 inside p-STAT3 ...) is left alone.
        if m and not any(m.start() < f_end and f_start < m.end() for _, f_start, f_end in found):
            found.append((name, m.start(), m.end()))
    found.sort(key=lambda x: x[1])
    swap: dict[str, str] = {}
    for (a, _, _), (b, _, _) in zip(found[0::2], found[1::2]):
        swap[a], swap[b] = b, a
    alternatives = [boundary.format(re.escape(n)) for n in sorted(swap, key=len, reverse=True)]
    alternatives.append(r"\b(?:" + "|".join(sorted(_OPPOSITES, key=len, reverse=True)) + r")\b")
    pattern = re.compile("|".join(f"(?:{a})" for a in alternatives), re.IGNORECASE)
    n_entities = n_words = 0

    def replace(m: re.Match) -> str:
        nonlocal n_entities, n_words
        token = m.group(0)
        if token in swap:
            n_entities += 1
            return swap[token]
        opposite = _OPPOSITES.get(token.lower())
        if opposite is None:
            return token  # a case variant of an entity name: left as written
        n_words += 1
        return _match_case(opposite, token)

    return pattern.sub(replace, text), n_entities, n_words


def validity_scores(rewrite_scores: pd.DataFrame, perturb_scores: pd.DataFrame
                    ) -> tuple[dict[str, float], pd.DataFrame, dict[str, list[float]]]:
    """Mean judge scores of rewrites and perturbations, and the relative drop between them.

    Parameters
    ----------
    rewrite_scores, perturb_scores
        The judge's scores of the rewritten and of the perturbed references: one row per item (same
        index), one column per dimension of :data:`~biome_bench_lib.vocabulary.JUDGE_DIMENSIONS`;
        NaN where an answer was unreadable.

    Returns
    -------
    values
        ``validity_rewrite_score`` and ``validity_perturb_score`` (means over items of the mean
        over dimensions) and ``validity_relative_drop``, 1 - perturbed / rewritten (NaN when the
        rewritten mean is not positive).
    per_item
        The same three values per item.
    per_dimension
        Dimension -> ``[rewrite mean, perturb mean, relative drop]``.
    """
    rewrite_item, perturb_item = rewrite_scores.mean(axis=1), perturb_scores.mean(axis=1)
    rewrite_mean, perturb_mean = float(rewrite_item.mean()), float(perturb_item.mean())
    values = {"validity_rewrite_score": rewrite_mean, "validity_perturb_score": perturb_mean,
              "validity_relative_drop": 1.0 - perturb_mean / rewrite_mean if rewrite_mean > 0 else float("nan")}
    per_dimension = {}
    for dim in JUDGE_DIMENSIONS:
        r, p = float(rewrite_scores[dim].mean()), float(perturb_scores[dim].mean())
        per_dimension[dim] = [r, p, 1.0 - p / r if r > 0 else float("nan")]
    per_item = pd.DataFrame({"validity_rewrite_score": rewrite_item, "validity_perturb_score": perturb_item,
                             "validity_relative_drop": 1.0 - perturb_item / rewrite_item})
    return values, per_item, per_dimension
