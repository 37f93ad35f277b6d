"""Reading the entity lists of Task B prompts: entities split at their commas, names split from states."""

from __future__ import annotations

__all__ = ["split_entity_list", "entity_name_state"]


def split_entity_list(text: str) -> list[str]:
    """Split an ``Observed Entities`` list at the commas outside parentheses.

    ``"STAT3 (dephosphorylated, Tyr705), 1,25-dihydroxyvitamin D3"`` gives two entities: a comma
    inside a state or inside a chemical name (no space after it) does not split.

    Parameters
    ----------
    text
        The comma-separated list (a final full stop is dropped).

    Returns
    -------
    list of str
    """
    text = text.strip()
    if text.endswith("."):
        text = text[:-1]
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0 and (i + 1 == len(text) or text[i + 1] == " "):
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return [e for e in out if e]


def entity_name_state(entity: str) -> tuple[str, str]:
    """``"SIGLEC12 (elevated expression)"`` -> ``("SIGLEC12", "elevated expression")``.

    Only a final parenthesised group is a state; an entity without one has state ``""``.

    Parameters
    ----------
    entity
        One entity of a list split by :func:`split_entity_list`.

    Returns
    -------
    name, state
    """
    entity = entity.strip()
    if entity.endswith(")"):
        depth = 0
        for i in range(len(entity) - 1, -1, -1):
            if entity[i] == ")":
                depth += 1
            elif entity[i] == "(":
                depth -= 1
                if depth == 0:
                    name = entity[:i].strip()
                    if name:
                        return name, entity[i + 1 : -1].strip()
                    break
    return entity, ""
