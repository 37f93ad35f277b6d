"""The distributions the project's code imports, each with its first import: what tests hold the declared
dependencies and the tracked packages against."""

from __future__ import annotations

from pathlib import Path

from openpert.config.layout_rules import _third_party_imports


def imported_distributions(root: Path) -> dict[str, tuple[Path, int]]:
    """The distributions the harness, the science package and the tasks import, each with its first import.

    Returns
    -------
    dict
        Canonical distribution name -> ``(file, line)``.
    """
    found: dict[str, tuple[Path, int]] = {}
    for path, line, _, distributions in _third_party_imports(Path(root)):
        for distribution in distributions:
            found.setdefault(distribution, (path, line))
    return found
