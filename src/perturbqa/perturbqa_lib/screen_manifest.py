"""A screen is data plus a manifest: everything specific to one screen, declared beside its files.

A screen's labels come in PerturbQA's published layout (``pert, gene, label, split`` CSV files,
Wu et al. 2025, section 4.1 and appendix A). Nothing about a particular screen lives in code: its
manifest (a YAML file) names the label files, its own gene map, the cell line and the sentence the
prompts use for it (appendix D.3), its organism, source, reference and licence::

    label: HepG2                 # short (at most 12 characters): heads the dataset labels
    name: HepG2 essential        # longer, for summaries
    cell_line: HepG2
    cell_line_description: HepG2 cells are a human liver cancer cell line ...
    organism: homo_sapiens
    downstream_type: gene        # or gene_set (downstream entities are gene clusters)
    source: Nadig et al. 2025, HepG2 essential-gene CRISPRi Perturb-seq
    reference: [10.48550/arXiv.2502.21290]
    url: https://github.com/genentech/PerturbQA
    license: Genentech Non-Commercial Software License ...
    files:                       # relative to the folder of the label files
      de: hepg2-de.csv
      dir: hepg2-dir.csv
      gene_map: hepg2_mapping.json        # optional: symbol -> Ensembl id, the screen's own names
      downstream_sets: sets.json          # gene_set screens: set name -> member genes
      gse_gene: hepg2_gene-gse.json       # optional: gene-set enrichment clusters
      gse_pert: hepg2_pert-gse.json

:func:`read_screen_manifest` reads and checks one; :func:`find_screen_manifest` finds the manifest
of a named screen, first beside the data files (``<screen>.screen.yaml``), then among the manifests
a dataset component ships for the published screens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

__all__ = ["ScreenManifest", "read_screen_manifest", "find_screen_manifest", "MANIFEST_SUFFIX", "MAX_LABEL_LENGTH"]

#: File name of a manifest beside the data files: ``<screen><MANIFEST_SUFFIX>``.
MANIFEST_SUFFIX = ".screen.yaml"
#: Longest screen label, so that "<label> <subtask>" stays within the 30 characters of a dataset label.
MAX_LABEL_LENGTH = 12
_REQUIRED = ("label", "name", "cell_line", "cell_line_description", "organism", "downstream_type", "source",
             "reference", "license", "files")
_FILE_KEYS = ("de", "dir", "gene_map", "downstream_sets", "gse_gene", "gse_pert")
_DOWNSTREAM_TYPES = ("gene", "gene_set")


@dataclass(frozen=True)
class ScreenManifest:
    """One screen's declaration (see the module docstring for the YAML it is read from)."""

    path: Path
    label: str
    name: str
    cell_line: str
    cell_line_description: str
    organism: str
    downstream_type: str
    source: str
    reference: tuple[str, ...]
    license: str
    files: dict[str, str]
    url: str = ""
    extra: dict = field(default_factory=dict)

    def file(self, key: str, data_dir: str | Path) -> Path:
        """The file the manifest names under ``files.<key>``, in ``data_dir``; an error if undeclared or missing."""
        if key not in self.files:
            raise ValueError(f"{self.path}: the screen declares no files.{key}")
        path = Path(data_dir) / self.files[key]
        if not path.is_file():
            raise FileNotFoundError(f"{path}: file files.{key} of {self.path} not found")
        return path

    def has(self, key: str) -> bool:
        """Whether the manifest declares ``files.<key>``."""
        return key in self.files


def read_screen_manifest(path: str | Path) -> ScreenManifest:
    """Read and check a screen manifest.

    Raises
    ------
    ValueError
        Naming the file, for a missing or mistyped field, an unknown file key, a label longer
        than :data:`MAX_LABEL_LENGTH`, a gene-set screen without ``files.downstream_sets``, or
        label files that are not declared.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: screen manifest not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a screen manifest is a mapping of {list(_REQUIRED)}")
    missing = [k for k in _REQUIRED if data.get(k) in (None, "", [], {})]
    if missing:
        raise ValueError(f"{path}: missing field(s) {missing}")
    files = data["files"]
    if not isinstance(files, dict) or not all(isinstance(v, str) and v for v in files.values()):
        raise ValueError(f"{path}: files must map {list(_FILE_KEYS)} to file names")
    unknown = sorted(set(files) - set(_FILE_KEYS))
    if unknown:
        raise ValueError(f"{path}: unknown files {unknown}; known: {list(_FILE_KEYS)}")
    for key in ("de", "dir"):
        if key not in files:
            raise ValueError(f"{path}: files.{key} (the {key} label file) is required")
    if data["downstream_type"] not in _DOWNSTREAM_TYPES:
        raise ValueError(f"{path}: downstream_type must be one of {_DOWNSTREAM_TYPES}, not {data['downstream_type']!r}")
    if data["downstream_type"] == "gene_set" and "downstream_sets" not in files:
        raise ValueError(f"{path}: a gene_set screen needs files.downstream_sets (the members of each set)")
    label = str(data["label"])
    if len(label) > MAX_LABEL_LENGTH:
        raise ValueError(f"{path}: label {label!r} is longer than {MAX_LABEL_LENGTH} characters; put the long name in 'name'")
    reference = data["reference"]
    reference = tuple(str(r) for r in (reference if isinstance(reference, list) else [reference]))
    known = {*_REQUIRED, "url"}
    return ScreenManifest(path=path, label=label, name=str(data["name"]), cell_line=str(data["cell_line"]),
                          cell_line_description=str(data["cell_line_description"]).strip(),
                          organism=str(data["organism"]), downstream_type=str(data["downstream_type"]),
                          source=str(data["source"]).strip(), reference=reference, license=str(data["license"]).strip(),
                          files={str(k): str(v) for k, v in files.items()}, url=str(data.get("url") or ""),
                          extra={k: v for k, v in data.items() if k not in known})


def find_screen_manifest(screen: str, data_dir: str | Path, bundled: Sequence[str | Path] = ()) -> Path:
    """The manifest of a named screen.

    Looks for ``<screen>.screen.yaml`` in ``data_dir`` (a manifest beside the data files), then
    for ``<screen>.yaml`` in each folder of ``bundled`` (manifests a dataset component ships for
    the published screens).

    Raises
    ------
    FileNotFoundError
        Naming every place looked in.
    """
    if not screen or Path(screen).name != screen:
        raise ValueError(f"a screen name is a plain name, not {screen!r}")
    candidates = [Path(data_dir) / f"{screen}{MANIFEST_SUFFIX}", *(Path(b) / f"{screen}.yaml" for b in bundled)]
    for path in candidates:
        if path.is_file():
            return path
    known = sorted({p.name[: -len(MANIFEST_SUFFIX)] for p in Path(data_dir).glob(f"*{MANIFEST_SUFFIX}")}
                   | {p.stem for b in bundled for p in Path(b).glob("*.yaml")})
    raise FileNotFoundError(f"no manifest of screen {screen!r}: looked for {', '.join(map(str, candidates))}; "
                            f"screens with a manifest: {known}")
