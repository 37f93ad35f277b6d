"""Hand-written rules from entity states: the relation of a triple and a template mechanism.

The rules read only the words of the states (and the condition), never a trained model: they
encode what a curator reads off "phosphorylated", "reduced expression", "elevated levels". First
matching rule wins; the order goes from specific (modifications) to generic (direction of change).
"""

from __future__ import annotations

import re

from biome_bench_lib.entity_lists import entity_name_state, split_entity_list

# Words saying that an entity goes up or down; stems, matched at word starts.
UP = ("increas", "elevat", "upregul", "up-regul", "enhanc", "induc", "accumul", "activ", "overexpress",
      "over-express", "promot", "high", "gain", "stimulat", "amplif", "hyperactiv", "augment", "administ",
      "added", "treat", "restor", "rescu", "produc")
DOWN = ("decreas", "reduc", "downregul", "down-regul", "suppress", "inhibit", "loss", "lost", "diminish",
        "low", "impair", "attenu", "block", "deplet", "deficien", "disrupt", "knockout", "knockdown",
        "knock-out", "silenc", "delet", "absen", "ablat", "abolish", "dysfunct", "degrad", "null", "defect")


def _has(text: str, stems: tuple[str, ...]) -> bool:
    return any(re.search(r"(?<![a-z])" + re.escape(s), text) for s in stems)


def direction(state: str) -> int:
    """+1 when a state says the entity is up or added, -1 when down or lost, 0 when it says neither.

    A state with both (e.g. "reduced inhibition") counts by its first word of change.
    """
    text = state.lower()
    first_up = min((m.start() for s in UP for m in [re.search(r"(?<![a-z])" + re.escape(s), text)] if m), default=None)
    first_down = min((m.start() for s in DOWN for m in [re.search(r"(?<![a-z])" + re.escape(s), text)] if m), default=None)
    if first_up is None and first_down is None:
        return 0
    if first_down is None:
        return 1
    if first_up is None:
        return -1
    return 1 if first_up < first_down else -1


def relation_from_states(source_state: str, target_state: str, condition: str, fallback: str) -> str:
    """The relation a curator would read off the two states.

    Parameters
    ----------
    source_state, target_state, condition
        The triple's context.
    fallback
        Answer when no rule applies (the caller passes the most frequent training relation).
    """
    t, s, c = target_state.lower(), source_state.lower(), condition.lower()
    if "dephosphorylat" in t:
        return "dephosphorylates"
    if "phosphorylat" in t:
        return "phosphorylates"
    if "ubiquitin" in t or "ubiquitin" in c:
        return "ubiquitinates"
    if "glycosylat" in t:
        return "glycosylates"
    if "methylat" in t and "demethylat" not in t:
        return "methylates"
    if _has(t, ("dissociat", "releas")):
        return "dissociates_from"
    if _has(t, ("bound", "binding", "complex", "interact", "recruit")):
        return "binds"
    if _has(t, ("synthes", "convert", "conversion")):
        return "converts_to"
    if _has(t, ("production", "produced", "generat", "formed")):
        return "produces"
    if _has(t, ("consum", "uptake", "utiliz")):
        return "consumes"
    target_dir = direction(t)
    # A source that is added or up passes the target's change on; one that is lost inverts it.
    source_dir = direction(s) or 1
    effect = source_dir * target_dir
    if effect and _has(t, ("express", "transcript", "mrna")):
        return "upregulates_expression" if effect > 0 else "downregulates_expression"
    if effect and _has(t, ("level", "concentration", "content", "accumul", "amount", "abundan")):
        return "increases_level" if effect > 0 else "decreases_level"
    if effect:
        return "activates" if effect > 0 else "inhibits"
    if _has(t, ("regulat", "modulat", "alter", "chang")):
        return "regulates"
    # A drug or an inhibition named in the context, with no change stated for the target: most
    # administered compounds in pathway studies are inhibitors.
    if _has(s, ("administ", "treat", "added")) or _has(c, ("inhibit",)):
        return "inhibits"
    return fallback


def template_mechanism(pathway_name: str, observed_entities: str) -> str:
    """A mechanism written from the observed entities by rule: a chain from first to last entity.

    Each link's verb comes from the directions of the two entities' states (same direction:
    activates; opposite: inhibits; unknown: regulates); the chain ends in the pathway's phenotype.
    """
    pathway = pathway_name.split(" - ")[0].strip()
    entities = [entity_name_state(e) for e in split_entity_list(observed_entities)]
    if not entities:
        return f"The observed alterations perturb the {pathway} pathway."
    described = [f"{name} ({state})" if state else name for name, state in entities]
    sentences = [f"In the {pathway} pathway, the observed alterations involve {', '.join(described)}."]
    links = []
    for (a, a_state), (b, b_state) in zip(entities, entities[1:]):
        da, db = direction(a_state), direction(b_state)
        verb = "regulates" if not da or not db else ("activates" if da == db else "inhibits")
        links.append(f"{a} {verb} {b}")
    if links:
        sentences.append("Mechanistically, " + "; ".join(links) + ".")
    last_name, last_state = entities[-1]
    sentences.append(f"The altered state of {last_name}{' (' + last_state + ')' if last_state else ''} leads to the "
                     f"dysregulation of {pathway} and its downstream phenotypes.")
    return " ".join(sentences)
