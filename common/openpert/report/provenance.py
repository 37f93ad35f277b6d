"""Where a run's results come from: code version and commit, engine, sandbox, digests, time.

Every field is optional in ``results.json`` (see the "Provenance" section of
``docs/results_json.md``); a field that is absent shows as "not recorded" rather than vanishing,
so a reader can tell a run that did not record its commit from one that had none to record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from markupsafe import Markup

from openpert.report.fragments import code, fragment, label, table
from openpert.report.task_results import TaskResults
from openpert.report.templating import render
from openpert.report.views import Table


def _sandbox_modes(results: TaskResults) -> Counter[str]:
    """How the run's jobs were confined: sandbox mode -> number of jobs (none when no job records one)."""
    return Counter(str(r["sandbox"]) for r in results.resources if r.get("sandbox") not in (None, ""))


def provenance_line(results: TaskResults) -> Markup:
    """One line for the page header: when, which code, which engine and sandbox.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    Markup
        A ``<p class="run-meta">`` ending in a link to the provenance section
        (``sections/provenance_line.html``).
    """
    return render(
        "sections/provenance_line.html",
        **_run(results),
        commit=str(results.provenance.get("commit")) if results.provenance.get("commit") else None,
        dirty=results.provenance.get("dirty") is True,
        sandbox=", ".join(sorted(_sandbox_modes(results))),
    )


def provenance_section(results: TaskResults) -> Markup:
    """The provenance of the run: every field, "not recorded" where the file has none.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    Markup
        A definition list, with digest tables in collapsed ``<details>`` (``sections/provenance.html``).
    """
    prov = results.provenance
    host = prov.get("host") if isinstance(prov.get("host"), dict) else {}
    memory = host.get("memory_mb")
    return render(
        "sections/provenance.html",
        **_run(results),
        commit=prov.get("commit") or None,
        dirty=prov.get("dirty") if isinstance(prov.get("dirty"), bool) else None,
        sandbox=sorted(_sandbox_modes(results).items()),
        unrecorded_sandbox=sum(1 for r in results.resources if r.get("sandbox") in (None, "")),
        host={"cpu_count": host.get("cpu_count"),
              "memory_mb": memory if isinstance(memory, (int, float)) else None,
              "platform": host.get("platform") or None},
        packages=_packages(prov.get("packages")),
        dataset_digests=_digests(prov.get("dataset_digests"), "Dataset", "table-dataset-digests",
                                 lambda key: label(results.dataset_label(key))),
        component_digests=_digests(prov.get("component_digests"), "Component", "table-component-digests", code),
    )


def _run(results: TaskResults) -> dict[str, Any]:
    """When the run was made, by which version of openpert, on which engine (None where not recorded)."""
    data = results.data
    return {"created": data.get("created") or None, "version": data.get("openpert_version") or None,
            "engine": data.get("engine") or None}


def _packages(value: Any) -> Table | None:
    """Package versions of the run (a table the template collapses), or None when not recorded."""
    if not isinstance(value, dict) or not value:
        return None
    body = [[code(name), code(version)] for name, version in sorted(value.items())]
    return table(f"Package versions ({len(body)})", ["Package", "Version"], body, table_id="table-packages",
                 sortable=False)


def _digests(value: Any, what: str, table_id: str, name: Callable[[str], Markup]) -> Table | None:
    rows = list(_flatten(value))
    if not rows:
        return None
    body = [[fragment("with_part")(name(key), sub), code(digest, "digest")] for key, sub, digest in rows]
    return table(f"{what} digests ({len(rows)})", [what, "Digest"], body, table_id=table_id, sortable=False)


def _flatten(value: Any) -> list[tuple[str, str, str]]:
    """Digests as ``(name, part, digest)``: a flat mapping, or one nested a level (files of a dataset)."""
    out: list[tuple[str, str, str]] = []
    if isinstance(value, dict):
        for key, digest in value.items():
            if isinstance(digest, dict):
                out.extend((str(key), str(part), str(d)) for part, d in digest.items() if d not in (None, ""))
            elif isinstance(digest, list):
                out.extend((str(key), "", str(d)) for d in digest if d not in (None, ""))
            elif digest not in (None, ""):
                out.append((str(key), "", str(digest)))
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                name = item.get("id") or item.get("name") or item.get("dataset_id") or item.get("component") or ""
                digest = item.get("digest") or item.get("sha256") or ""
                if digest:
                    out.append((str(name), str(item.get("file") or ""), str(digest)))
    return out
