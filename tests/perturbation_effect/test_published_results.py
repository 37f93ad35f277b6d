"""The paper's source data (perturbation_effect_lib.published_results, xlsx_tables) and the Reproduction rows.

The readers are tested on small workbooks written here and on the published files when the shared
data folder holds them; the per-perturbation comparison of the deterministic baselines with the
paper runs the task's benchmark on GEARS's real screens, when their (multi-GB) files are at hand,
and says why it skips otherwise.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from perturbation_effect_lib import holdout_splits as splits
from perturbation_effect_lib import pseudobulk
from perturbation_effect_lib.published_results import ahlmann_eltze_scores, held_out, read_source_data
from perturbation_effect_lib.xlsx_tables import read_sheet, sheet_names
from project_paths import ROOT, SHARED_DATA

from openpert.data.store import default_store_dir
from openpert.results.reproduction import load_declarations, published_values

PUBLISHED = SHARED_DATA / "published" / "ahlmann_eltze_2025"
needs_published = pytest.mark.skipif(not (PUBLISHED / "perturbation_prediction.xlsx").is_file(),
                                     reason=f"the paper's source data are not at {PUBLISHED} (set OPENPERT_SHARED_DATA)")
TASK = ROOT / "src" / "perturbation_effect"

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"


def write_workbook(path: Path, sheets: dict[str, str], shared: list[str]) -> Path:
    """A minimal xlsx: each sheet's ``<sheetData>`` XML as given, and a shared-strings table."""
    with zipfile.ZipFile(path, "w") as zf:
        names = "".join(f'<sheet name="{name}" sheetId="{i + 1}" r:id="rId{i + 1}"/>' for i, name in enumerate(sheets))
        zf.writestr("xl/workbook.xml", f'<workbook xmlns="{_MAIN}" xmlns:r="http://schemas.openxmlformats.org/'
                                       f'officeDocument/2006/relationships"><sheets>{names}</sheets></workbook>')
        rels = "".join(f'<Relationship Id="rId{i + 1}" Type="worksheet" Target="worksheets/sheet{i + 1}.xml"/>'
                       for i in range(len(sheets)))
        zf.writestr("xl/_rels/workbook.xml.rels",
                    f'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{rels}</Relationships>')
        for i, data in enumerate(sheets.values()):
            zf.writestr(f"xl/worksheets/sheet{i + 1}.xml", f'<worksheet xmlns="{_MAIN}"><sheetData>{data}</sheetData></worksheet>')
        strings = "".join(f"<si><t>{s}</t></si>" for s in shared)
        # A rich-text string: runs concatenated.
        strings += "<si><r><t>rich </t></r><r><t>text</t></r></si>"
        zf.writestr("xl/sharedStrings.xml", f'<sst xmlns="{_MAIN}">{strings}</sst>')
    return path


def test_read_sheet_reads_every_cell_type(tmp_path):
    rows = (
        '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="inlineStr"><is><t>value</t></is></c>'
        '<c r="C1" t="s"><v>1</v></c><c r="D1" t="s"><v>2</v></c></row>'
        # A gap (no C2): that cell is missing, the next one still in its column.
        '<row r="2"><c r="A2" t="s"><v>3</v></c><c r="B2"><v>0.25</v></c><c r="D2" t="s"><v>4</v></c></row>'
        '<row r="3"><c r="A3" t="inlineStr"><is><t>KLF1+ctrl</t></is></c><c r="B3"><v>7</v></c>'
        '<c r="C3" t="b"><v>1</v></c><c r="D3" t="str"><v>formula text</v></c></row>'
        '<row r="4"><c r="A4" t="inlineStr"><is><t>last</t></is></c><c r="B4"><v>1E-3</v></c></row>'
    )
    path = write_workbook(tmp_path / "book.xlsx", {"Panel A": rows, "Other": '<row r="1"><c r="A1"><v>1</v></c></row>'},
                          ["perturbation", "highlight", "note", "CEBPE+CEBPB"])
    assert sheet_names(path) == ["Panel A", "Other"]
    table = read_sheet(path, "Panel A")
    assert list(table.columns) == ["perturbation", "value", "highlight", "note"]
    assert table["perturbation"].tolist() == ["CEBPE+CEBPB", "KLF1+ctrl", "last"]
    assert table["value"].tolist() == [0.25, 7.0, 0.001]
    assert table["highlight"].tolist()[1] is True and table["highlight"].isna().tolist() == [True, False, True]
    assert table["note"].tolist() == ["rich text", "formula text", None]
    with pytest.raises(KeyError, match="no sheet 'Panel Z'"):
        read_sheet(path, "Panel Z")
    bad = tmp_path / "bad.xlsx"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("hello.txt", "not a workbook")
    with pytest.raises(ValueError, match="not an xlsx workbook"):
        sheet_names(bad)


def test_reader_records_and_item_names(tmp_path):
    header = "".join(f'<c t="inlineStr"><is><t>{c}</t></is></c>' for c in
                     ("dataset_name", "seed", "method", "perturbation", "train", "r2", "r2_delta", "l2"))

    def row(*cells):
        out = []
        for c in cells:
            if isinstance(c, str):
                out.append(f'<c t="inlineStr"><is><t>{c}</t></is></c>')
            elif c is None:
                out.append("<c/>")
            else:
                out.append(f"<c><v>{c}</v></c>")
        return "<row>" + "".join(out) + "</row>"

    rows = [row("norman", 1, "additive_model", "CEBPE+CEBPB", "test", 0.9, 0.8, 2.0),
            row("norman", 1, "additive_model", "A+ctrl", "val", 0.9, 0.6, 4.0),
            row("norman", 1, "additive_model", "B+C", "train", 0.9, 0.1, 9.0),
            row("norman", 1, "no_change", "CEBPE+CEBPB", "test", 0.9, None, 3.0),
            row("norman", 1, "no_change", "A+ctrl", "val", 0.9, None, 5.0),
            row("norman", 2, "additive_model", "B+C", "test", 0.9, 0.5, 1.0)]
    path = write_workbook(tmp_path / "data.xlsx", {"Panel A": "<row>" + header + "</row>" + "".join(rows)}, [])
    table = read_source_data(path)
    # Items as the task names perturbations: targets sorted, no ctrl.
    assert table["item"].tolist() == ["CEBPB+CEBPE", "A", "B+C", "CEBPB+CEBPE", "A", "B+C"]
    records = {(r["dataset"], r["method"], r["metric"]): r for r in ahlmann_eltze_scores(path)}
    additive = records[("norman seed 1", "additive_model", "r2_delta")]
    assert additive["items"] == {"CEBPB+CEBPE": 0.8, "A": 0.6}  # train rows are not held out
    assert math.isclose(additive["value"], 0.7) and additive["n"] == 2
    # Pearson delta of no change is undefined everywhere: no record; its L2 is.
    assert ("norman seed 1", "no_change", "r2_delta") not in records
    assert records[("norman seed 1", "no_change", "l2")]["value"] == 4.0
    assert set(records) == {("norman seed 1", "additive_model", "r2_delta"), ("norman seed 1", "additive_model", "l2"),
                            ("norman seed 1", "no_change", "l2"), ("norman seed 2", "additive_model", "r2_delta"),
                            ("norman seed 2", "additive_model", "l2")}
    assert [r["method"] for r in ahlmann_eltze_scores(path, methods=["no_change"])] == ["no_change"]
    with pytest.raises(ValueError, match="no method"):
        ahlmann_eltze_scores(path, methods=["gears"])
    roles = held_out(path)
    assert roles.loc[(roles["seed"] == 1) & (roles["item"] == "B+C"), "split"].tolist() == ["train"]
    assert len(roles) == 4


@needs_published
def test_published_source_data_match_the_papers_numbers():
    records = ahlmann_eltze_scores(PUBLISHED / "perturbation_prediction.xlsx", methods=["additive_model", "no_change"])
    by = {(r["dataset"], r["method"], r["metric"]): r for r in records}
    # Five seeds x (additive: Pearson delta and L2; no change: L2 only), 62 held-out doubles each.
    assert len(records) == 15 and {r["n"] for r in records} == {62}
    assert by[("norman_from_scfoundation seed 1", "additive_model", "r2_delta")]["value"] == pytest.approx(0.9047, abs=1e-4)
    assert by[("norman_from_scfoundation seed 1", "no_change", "l2")]["value"] == pytest.approx(5.9758, abs=1e-4)
    assert all("+" in item for r in records for item in r["items"])
    single = ahlmann_eltze_scores(PUBLISHED / "single_perturbation_prediction.xlsx", methods=["mean"])
    counts = {r["dataset"]: r["n"] for r in single if r["metric"] == "l2"}
    assert counts == {"adamson seed 1": 24, "adamson seed 2": 24, "replogle_k562_essential seed 1": 134,
                      "replogle_k562_essential seed 2": 128, "replogle_rpe1_essential seed 1": 210,
                      "replogle_rpe1_essential seed 2": 203}


@needs_published
def test_held_out_items_are_the_task_splits_of_each_seed():
    """The items a record compares are what the task's splits hold out, seed for seed."""
    overview = read_sheet(PUBLISHED / "suppl-dataset_overview.xlsx", "Panel B")
    universe = {name: [p for p in group["pert"].astype(str).unique() if p != "ctrl"]
                for name, group in overview.groupby("dataset")}
    for table, setting, name, seed in (("single_perturbation_prediction.xlsx", "simulation", "adamson", 2),
                                       ("perturbation_prediction.xlsx", "double", "norman_from_scfoundation", 4)):
        perts = ["+".join(pseudobulk.parse_condition(p)) for p in universe[name]]
        split = (splits.simulation_split(perts, seed=seed, val_gene_set_size=0.9) if setting == "simulation"
                 else splits.double_split(perts, seed=seed))
        ours = {pseudobulk.condition_key(pseudobulk.parse_condition(p)) for p in split.index[split["split"] != "train"]}
        (record,) = [r for r in ahlmann_eltze_scores(PUBLISHED / table, methods=["mean" if setting == "simulation"
                                                                                 else "additive_model"], metrics=["l2"])
                     if r["dataset"] == f"{name} seed {seed}"]
        # The paper's items are held out here too; its source data leave out a few held-out
        # perturbations (Adamson's CARS/HARS/TARS, MARS/QARS/SARS: genes renamed since GEARS's files).
        assert set(record["items"]) <= ours, (name, seed)
        assert len(ours) - len(record["items"]) == (3 if setting == "simulation" else 0), (name, seed)


@needs_published
def test_declared_sources_read_the_published_files():
    sources = {s.id: s for s in load_declarations(TASK)}
    for sid, n in (("fig1_norman", 15), ("fig2_single", 12)):
        values, problem = published_values(sources[sid], TASK, SHARED_DATA)
        assert problem == "" and len(values) == n, (sid, problem)
        source = sources[sid]
        assert {v.dataset for v in values} == set(source.datasets)
        assert {source.methods[v.method].method_id for v in values} <= {"additive", "no_change", "mean"}
        assert {source.metrics[v.metric] for v in values} == {"pearson_delta_top1000", "l2_top1000"}


# -- the comparison itself, on GEARS's real screens -------------------------------------------------------

GEARS_FILES = ("perturbseq/gears/norman/perturb_processed.h5ad", "perturbseq/gears/adamson/perturb_processed.h5ad",
               "perturbseq/gears/go_perturbable_genes.txt")


def _gears_missing() -> str:
    """Why the comparison on GEARS's screens cannot run here (empty when it can)."""
    folders = [SHARED_DATA, default_store_dir()]
    if any(all((folder / f).is_file() for f in GEARS_FILES) for folder in folders):
        return ""
    return (f"GEARS's screens ({', '.join(GEARS_FILES)}) are neither in {folders[0]} nor in the data store "
            f"{folders[1]}: `openpert data fetch --task perturbation_effect --include-large` (several GB)")


@needs_published
@pytest.mark.skipif(bool(_gears_missing()), reason=_gears_missing() or "present")
def test_deterministic_baselines_reproduce_the_paper_perturbation_by_perturbation(tmp_path):
    """additive and no change on Norman's doubles (seed 1), mean on Adamson (seed 1), against the paper."""
    from openpert.config.task import Task
    from openpert.engines.benchmark import run_benchmark

    datasets = ["norman_double_seed1", "adamson_simulation_seed1"]
    results = run_benchmark(Task(TASK), tmp_path / "run", datasets=datasets, methods=["additive", "mean"],
                            controls=["no_change", "ground_truth"], metrics=["pearson_delta", "l2"], jobs=1,
                            include_large=True, progress=False)
    rows = [r for r in results["reproduction"]["rows"] if r["dataset_id"] in datasets]
    assert len(rows) == 5  # Norman: additive x 2 metrics, no change x L2; Adamson: mean x 2 metrics
    for row in rows:
        assert row["items"]["available"], row
        assert row["items"]["n_missing"] == 0, row
        assert row["status"] == "reproduced", (row["published_dataset"], row["published_method"], row["items"])
    assert np.isfinite([r["measured"] for r in rows]).all()
    assert pd.Series([r["status"] for r in results["reproduction"]["rows"]]).isin(["reproduced", "not_run"]).all()
