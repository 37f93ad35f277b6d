"""The ``## VIASH START`` ... ``## VIASH END`` block of a component script, and its replacement.

The block holds example values of ``par`` and ``meta`` so that ``python script.py`` runs by hand;
a run replaces it with the real values, exactly as Viash does.
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


def render_block(par: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    """The Python code that replaces the VIASH block: ``par``, ``meta`` and ``dep`` dictionaries."""

    def lines(name: str, values: Mapping[str, Any]) -> str:
        body = "".join(f"    {key!r}: {value!r},\n" for key, value in values.items())
        return f"{name} = {{\n{body}}}\n"

    return lines("par", par) + lines("meta", meta) + "dep = {}\n"


def substitute_block(source: str, par: Mapping[str, Any], meta: Mapping[str, Any], *, path: Path) -> str:
    """Replace the VIASH block of a Python script's source.

    Raises
    ------
    ConfigError
        When the script has no (or more than one) ``## VIASH START`` / ``## VIASH END`` block.
    """
    found = BLOCK.findall(source)
    if len(found) != 1:
        what = "no" if not found else "more than one"
        raise ConfigError(f"{path}: {what} '{VIASH_START}' ... '{VIASH_END}' block; a component script needs exactly one")
    return BLOCK.sub(lambda _: render_block(par, meta).rstrip("\n"), source, count=1)
