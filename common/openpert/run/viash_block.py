"""The ``## VIASH START`` ... ``## VIASH END`` block of a component script, and its replacement.

The block holds example values of ``par`` and ``meta`` so that ``python script.py`` runs by hand;
a run replaces it with the real values, as Viash does, on as many lines as the block had: the job's
script keeps the source's line numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openpert.config.viash import ConfigError

VIASH_START = "## VIASH START"
VIASH_END = "## VIASH END"
#: One whole block, from its start line to its end line.
BLOCK = re.compile(r"^[ \t]*## VIASH START[^\n]*\n.*?^[ \t]*## VIASH END[^\n]*$", re.S | re.M)


def render_block(par: Mapping[str, Any], meta: Mapping[str, Any], lines: int = 3) -> str:
    """The Python code that replaces the VIASH block: ``par``, ``meta`` and ``dep`` dictionaries.

    Parameters
    ----------
    par, meta
        The values.
    lines
        How many lines the code takes (at least 2): those of the block it replaces, so that every
        line after it keeps its number and a traceback of the job names the source's lines.
    """
    if lines < 2:
        raise ValueError(f"a VIASH block spans at least 2 lines, not {lines}")
    assignments = [f"par = {dict(par)!r}", f"meta = {dict(meta)!r}", "dep = {}"]
    if lines == 2:
        assignments = [f"{assignments[0]}; {assignments[1]}", assignments[2]]
    return "\n".join(assignments) + "\n" * (lines - len(assignments) + 1)


def substitute_block(source: str, par: Mapping[str, Any], meta: Mapping[str, Any], *, path: Path) -> str:
    """Replace the VIASH block of a Python script's source, on as many lines as the block had.

    Raises
    ------
    ConfigError
        When the script has no (or more than one) ``## VIASH START`` / ``## VIASH END`` block.
    """
    found = BLOCK.findall(source)
    if len(found) != 1:
        what = "no" if not found else "more than one"
        raise ConfigError(f"{path}: {what} '{VIASH_START}' ... '{VIASH_END}' block; a component script needs exactly one")
    return BLOCK.sub(lambda block: render_block(par, meta, block.group(0).count("\n") + 1)[:-1], source, count=1)
