"""A small subset of the published PerturbQA files and knowledge graphs, in their layout (test resources)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from pertsci.ordering import largest_first
from perturbqa_lib.published_labels import read_label_csv, read_set_mapping

__all__ = ["subsample_published"]


def subsample_published(data_dir: str | Path, kg_dir: str | Path, out: str | Path, *, n_train_perts: int = 48,
                        n_test_perts: int = 24, n_genes: int = 60, n_clusters: int = 4, max_members: int = 5,
                        seed: int = 0) -> list[str]:
    """Write a small subset of the published PerturbQA files and knowledge graphs, same layout.

    For test resources: the files keep their names and formats under ``out/perturbqa`` and
    ``out/knowledge_graphs`` so that the loaders read them as they read the originals. The K562
    pairs (and the K562-set pairs) of a sample of perturbations are kept for the downstream genes
    with the most positive labels among them; gene-set clusters and downstream sets keep at most
    ``max_members`` members; the knowledge graphs keep the genes involved. The defaults give macro
    AUROC a few dozen downstream genes with both classes among the test pairs (30 for de, 11 for
    dir), enough for the headline to rank methods, while every job stays a few seconds.

    Returns
    -------
    list of str
        The genes of the subset (perturbations, downstream genes, cluster and set members).
    """
    import gzip

    rng = np.random.default_rng(seed)
    data_dir, kg_dir, out = Path(data_dir), Path(kg_dir), Path(out)
    (out / "perturbqa").mkdir(parents=True, exist_ok=True)
    (out / "knowledge_graphs").mkdir(parents=True, exist_ok=True)
    de = read_label_csv(data_dir / "k562-de.csv")
    direction = read_label_csv(data_dir / "k562-dir.csv")
    split = de.drop_duplicates("pert").set_index("pert")["split"]
    # Perturbations with many DE genes, so that test genes have both classes.
    n_pos = de.groupby("pert")["label"].sum()
    rich = n_pos[n_pos >= 10].index
    train_perts = rng.choice(sorted(set(rich) & set(split[split == "train"].index)), n_train_perts, replace=False)
    test_perts = rng.choice(sorted(set(rich) & set(split[split == "test"].index)), n_test_perts, replace=False)
    perts = set(train_perts) | set(test_perts)
    sub = de[de["pert"].isin(perts)]
    test_sub = sub[sub["pert"].isin(test_perts)]
    both = test_sub.groupby("gene")["label"].agg(["min", "max", "size"])
    # The cuts fall among genes of equal counts: equal counts are ordered by name, or the genes kept
    # would depend on the CPU's sort (pertsci.ordering).
    both = largest_first(both.loc[(both["min"] == 0) & (both["max"] == 1), "size"]).index[: n_genes // 2]
    popular = largest_first(sub.groupby("gene").size()).index
    genes = list(dict.fromkeys([*both, *popular]))[:n_genes]
    keep_de = de[de["pert"].isin(perts) & de["gene"].isin(genes)]
    keep_dir = direction.merge(keep_de[["pert", "gene"]], on=["pert", "gene"])
    keep_de.to_csv(out / "perturbqa" / "k562-de.csv", index=False)
    keep_dir.to_csv(out / "perturbqa" / "k562-dir.csv", index=False)
    set_de = read_label_csv(data_dir / "k562_set-de.csv")
    set_dir = read_label_csv(data_dir / "k562_set-dir.csv")
    set_de[set_de["pert"].isin(perts)].to_csv(out / "perturbqa" / "k562_set-de.csv", index=False)
    set_dir[set_dir["pert"].isin(perts)].to_csv(out / "perturbqa" / "k562_set-dir.csv", index=False)
    mapping = read_set_mapping(data_dir / "k562_set-mapping.json")
    mapping = {k: v[:max_members] for k, v in mapping.items()}
    (out / "perturbqa" / "k562_set-mapping.json").write_text(json.dumps(mapping))
    universe = set(perts) | set(genes) | {g for v in mapping.values() for g in v}
    for name in ("k562_gene-gse.json", "k562_pert-gse.json"):
        clusters = json.loads((data_dir / name).read_text())
        annotated = [c for c in clusters if c.get("label")]
        picked = [annotated[i] for i in sorted(rng.choice(len(annotated), n_clusters, replace=False))]
        picked.append(next(c for c in clusters if not c.get("label")))  # one unannotated cluster: not a test item
        picked = [{"genes": c["genes"][:max_members], "label": c.get("label")} for c in picked]
        universe |= {g for c in picked for g in c["genes"]}
        (out / "perturbqa" / name).write_text(json.dumps(picked))
    gw = json.loads((data_dir / "k562_gw_mapping_full.json").read_text())
    (out / "perturbqa" / "k562_gw_mapping_full.json").write_text(json.dumps({k: v for k, v in gw.items() if k in universe}))
    ensembl = {v for k, v in gw.items() if k in universe}

    # Knowledge graphs, restricted to the genes of the subset.
    huri = pd.read_csv(kg_dir / "huri_binary_ppi.tsv", sep="\t")
    huri[huri["protein1"].isin(ensembl) & huri["protein2"].isin(ensembl)].to_csv(out / "knowledge_graphs" / "huri_binary_ppi.tsv", sep="\t", index=False)
    omni = pd.read_csv(kg_dir / "omnipath_signed_directed.tsv", sep="\t")
    omni[omni["source"].isin(universe) & omni["target"].isin(universe)].to_csv(out / "knowledge_graphs" / "omnipath_signed_directed.tsv", sep="\t", index=False)
    corum = pd.read_csv(kg_dir / "corum_core_complexes.txt", sep="\t", usecols=["ComplexID", "ComplexName", "Organism", "subunits(Gene name)"])
    corum = corum[corum["Organism"] == "Human"].dropna(subset=["subunits(Gene name)"])
    members = corum["subunits(Gene name)"].str.split(";")
    hit = members.map(lambda m: len(universe & {x.strip() for x in m}) >= 2)
    corum = corum[hit].copy()
    corum["subunits(Gene name)"] = members[hit].map(lambda m: ";".join(x for x in m if x.strip() in universe))
    corum.to_csv(out / "knowledge_graphs" / "corum_core_complexes.txt", sep="\t", index=False)
    for name in ("GO_Biological_Process_2021.gmt", "ReactomePathways.gmt"):
        lines = []
        for line in (kg_dir / name).read_text().splitlines():
            fields = line.split("\t")
            kept = [g for g in fields[2:] if g in universe]
            if len(kept) >= 2:
                lines.append("\t".join(fields[:2] + kept))
        (out / "knowledge_graphs" / name).write_text("\n".join(lines) + "\n")
    with gzip.open(kg_dir / "string_v12_human_protein_info.txt.gz", "rt") as fh:
        info = pd.read_csv(fh, sep="\t")
    info = info[info["preferred_name"].isin(universe)]
    # mtime=0: the same inputs give the same bytes, so a regeneration leaves git quiet.
    text = info.to_csv(sep="\t", index=False).encode()
    with gzip.GzipFile(out / "knowledge_graphs" / "string_v12_human_protein_info.txt.gz", "wb", mtime=0) as fh:
        fh.write(text)
    return sorted(universe)
