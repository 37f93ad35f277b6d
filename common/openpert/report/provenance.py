"""Where a run's results come from: code version and commit, engine, sandbox, digests, time.

Every field is optional in ``results.json`` (see the "Provenance" section of
``docs/results_json.md``); a field that is absent shows as "not recorded" rather than vanishing,
so a reader can tell a run that did not record its commit from one that had none to record.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from openpert.report.formatting import format_count, format_memory, format_timestamp
from openpert.report.markup import badge, definition_list, esc, label_span, simple_table
from openpert.report.task_results import TaskResults

NOT_RECORDED = '<span class="not-recorded">not recorded</span>'


def sandbox_modes(results: TaskResults) -> Counter[str]:
    """How the run's jobs were confined: sandbox mode -> number of jobs.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    Counter
        Empty when no ``resources`` row records a ``sandbox``.
    """
    return Counter(str(r["sandbox"]) for r in results.resources if r.get("sandbox") not in (None, ""))


def provenance_line(results: TaskResults) -> str:
    """One line for the page header: when, which code, which engine and sandbox.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    str
        HTML of a ``<p class="run-meta">`` ending in a link to the provenance section.
    """
    data = results.data
    created = data.get("created")
    parts = [
        f'Run <time datetime="{esc(created)}">{esc(format_timestamp(created))}</time>' if created else "Run time not recorded",
        f"openpert {esc(data.get('openpert_version'))}" if data.get("openpert_version") else "openpert version not recorded",
    ]
    commit = results.provenance.get("commit")
    if commit:
        dirty = " (modified)" if results.provenance.get("dirty") is True else ""
        parts.append(f'commit <code title="{esc(commit)}">{esc(str(commit)[:10])}</code>{dirty}')
    parts.append(f"engine {esc(data.get('engine'))}" if data.get("engine") else "engine not recorded")
    modes = sandbox_modes(results)
    if modes:
        parts.append("sandbox " + esc(", ".join(sorted(modes))))
    return f'<p class="run-meta">{" · ".join(parts)} · <a href="#provenance">provenance</a></p>'


def provenance_section(results: TaskResults) -> str:
    """The provenance of the run: every field, "not recorded" where the file has none.

    Parameters
    ----------
    results
        The task's results.

    Returns
    -------
    str
        HTML: a definition list, with digest tables in collapsed ``<details>``.
    """
    data = results.data
    prov = results.provenance
    created = data.get("created")
    ran = (
        f'<time datetime="{esc(created)}">{esc(format_timestamp(created))}</time> '
        f'<span class="muted">(<code>{esc(created)}</code>)</span>'
        if created else NOT_RECORDED
    )
    version = f"<code>{esc(data.get('openpert_version'))}</code>" if data.get("openpert_version") else NOT_RECORDED
    commit = prov.get("commit")
    if commit:
        state = ""
        if prov.get("dirty") is True:
            state = " " + badge("uncommitted changes", "warn")
        elif prov.get("dirty") is False:
            state = " " + badge("clean working tree", "ok")
        commit_html = f'<code class="digest">{esc(commit)}</code>{state}'
    else:
        commit_html = NOT_RECORDED
    engine = f"<code>{esc(data.get('engine'))}</code>" if data.get("engine") else NOT_RECORDED
    modes = sandbox_modes(results)
    if modes:
        sandbox = ", ".join(
            f"<code>{esc(mode)}</code> ({format_count(n)} job{'s' if n != 1 else ''})" for mode, n in sorted(modes.items())
        )
        unrecorded = sum(1 for r in results.resources if r.get("sandbox") in (None, ""))
        if unrecorded:
            sandbox += f", not recorded for {format_count(unrecorded)} job{'s' if unrecorded != 1 else ''}"
    else:
        sandbox = NOT_RECORDED
    facts = definition_list(
        [
            ("Ran", ran),
            ("openpert version", version),
            ("Commit", commit_html),
            ("Engine", engine),
            ("Sandbox", sandbox),
            ("Host", _host(prov.get("host"))),
            ("Packages", _packages(prov.get("packages"))),
            ("Dataset digests", _digests(prov.get("dataset_digests"), "Dataset", "table-dataset-digests",
                                         lambda key: label_span(results.dataset_label(key)))),
            ("Component digests", _digests(prov.get("component_digests"), "Component", "table-component-digests",
                                           lambda key: f"<code>{esc(key)}</code>")),
        ]
    )
    return facts


def _host(value: Any) -> str:
    """The machine of the run: CPUs, memory and platform."""
    if not isinstance(value, dict) or not value:
        return NOT_RECORDED
    parts = []
    if value.get("cpu_count") is not None:
        parts.append(f"{esc(format_count(value['cpu_count']))} CPUs")
    if isinstance(value.get("memory_mb"), (int, float)):
        parts.append(f"{esc(format_memory(value['memory_mb']))} memory")
    if value.get("platform"):
        parts.append(f"<code>{esc(value['platform'])}</code>")
    return ", ".join(parts) or NOT_RECORDED


def _packages(value: Any) -> str:
    """Package versions of the run, in a collapsed table."""
    if not isinstance(value, dict) or not value:
        return NOT_RECORDED
    body = [[f"<code>{esc(name)}</code>", f"<code>{esc(version)}</code>"] for name, version in sorted(value.items())]
    table = simple_table(f"Package versions ({len(body)})", ["Package", "Version"], body, table_id="table-packages",
                         sortable=False)
    return f"<details><summary>{len(body)} package{'s' if len(body) != 1 else ''}</summary>{table}</details>"


def _digests(value: Any, what: str, table_id: str, name_html: Any) -> str:
    rows = list(_flatten(value))
    if not rows:
        return NOT_RECORDED
    body = [[name_html(key) if not sub else f"{name_html(key)} <span class=\"muted\">/ {esc(sub)}</span>",
             f'<code class="digest">{esc(digest)}</code>'] for key, sub, digest in rows]
    table = simple_table(f"{what} digests ({len(rows)})", [what, "Digest"], body, table_id=table_id, sortable=False)
    return f"<details><summary>{len(rows)} digest{'s' if len(rows) != 1 else ''}</summary>{table}</details>"


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
