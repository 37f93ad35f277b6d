"""PertReasonQA components end to end: controls, methods and metrics on a hand-made dataset whose
answers and scores are known, and on the bundled test resources."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from pertreasonqa_lib.answer_parsing import format_response
from pertreasonqa_lib.balanced_accuracy import balanced_accuracy_items
from pertreasonqa_lib.dataset_files import read_context, read_graph
from pertreasonqa_lib.faithfulness import FAITHFULNESS_METRICS, GOProfiles, failure_modes, faithfulness_table
from pertreasonqa_lib.prediction_files import write_prediction
from pertreasonqa_lib.reference_paths import reference_paths_for_items
from pertreasonqa_lib.signed_graph import SignedGraph, build_signed_graph, compound_targets

from openpert.config.viash import find_project_root, read_config
from openpert.run.component import resolve_arguments, run_component
from openpert.run.viash_block import substitute_block

ROOT = find_project_root(Path(__file__).resolve())
TASK = ROOT / "src" / "pertreasonqa"
RESOURCES = ROOT / "resources_test" / "pertreasonqa" / "k562_rpe1_small"
# The task's stand-in model, loaded by path: every task has an llm_test_responder.py of its own.
_spec = importlib.util.spec_from_file_location("pertreasonqa_llm_test_responder", TASK / "llm_test_responder.py")
llm_test_responder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llm_test_responder)
FILES = {"train": "train.h5ad", "test": "test.h5ad", "solution": "solution.h5ad", "context": "context.h5ad", "graph": "graph.csv",
         "gene_descriptions": "gene_descriptions.parquet"}


def run(component: str, args: dict, work: Path) -> Path:
    """Run a component of the task; return its (validated) output."""
    config = read_config(TASK / component / "config.vsh.yaml")
    out = work / "out" / component.replace("/", "_")
    args = {k: str(v) for k, v in args.items()}
    args["output"] = str(out / ("score.h5ad" if component.startswith("metrics/") else "prediction.h5ad"))
    context = {f"file_{k}": Path(args[f"input_{k}"]) for k in FILES if f"input_{k}" in args}
    result = run_component(config, args, work_dir=work / "run" / component.replace("/", "_"), context=context)
    assert result.succeeded, result.log.read_text()[-3000:]
    return Path(args["output"])


def run_script_here(component: str, args: dict, output: Path) -> Path:
    """Run a component's own script in this process, on the arguments a job of it would get; return its output.

    For the many seeded draws of a control that only serve as a yardstick: the same script and
    arguments as a job, without the job's process start and sandbox (``run`` tests those).
    """
    config = read_config(TASK / component / "config.vsh.yaml")
    script = TASK / component / "script.py"
    par = resolve_arguments(config, {**{k: str(v) for k, v in args.items()}, "output": str(output)})
    source = substitute_block(script.read_text(), par, {"resources_dir": str(TASK), "name": config.name}, path=script)
    path = list(sys.path)
    try:
        exec(compile(source, str(script), "exec"), {"__name__": "__main__"})
    finally:
        sys.path[:] = path  # the script appends resources_dir, as in a job; this process keeps its own path
    return output


def dataset_args(folder: Path, solution: bool = False) -> dict:
    keys = ["train", "test", "context", "graph", "gene_descriptions"] + (["solution"] if solution else [])
    return {f"input_{k}": folder / FILES[k] for k in keys}


@functools.cache
def solution_graph_go(folder: Path) -> tuple[pd.DataFrame, SignedGraph, GOProfiles]:
    """A dataset's solution items, graph and GO profiles, read once per folder for the in-process scores."""
    _, _, go = read_context(ad.read_h5ad(folder / "context.h5ad"))
    return ad.read_h5ad(folder / "solution.h5ad").obs, read_graph(folder / "graph.csv"), go


class SharedRuns:
    """Component runs on files no test changes, shared by the tests of the module: each component runs once
    on each set of arguments (a default given or left out alike), however many tests read its output."""

    def __init__(self, work: Path):
        self.work = work
        self.outputs: dict[tuple, Path] = {}

    def __call__(self, component: str, args: dict) -> Path:
        # Every argument with its default filled in; the output is each run's own.
        given = resolve_arguments(read_config(TASK / component / "config.vsh.yaml"), {**args, "output": ""})
        key = (component, tuple(sorted((k, str(v)) for k, v in given.items())))
        if key not in self.outputs:
            self.outputs[key] = run(component, args, self.work / f"run{len(self.outputs)}")
        return self.outputs[key]


@pytest.fixture(scope="module")
def shared_runs(tmp_path_factory) -> SharedRuns:
    """The module's shared component runs."""
    return SharedRuns(tmp_path_factory.mktemp("shared_runs"))


def scores(prediction: Path, folder: Path, work: Path | None = None) -> dict:
    """Every metric of a prediction: through the metric components when ``work`` is given, else in-process."""
    out = {}
    if work is not None:
        base = {"input_solution": folder / "solution.h5ad", "input_prediction": prediction, "input_context": folder / "context.h5ad",
                "input_graph": folder / "graph.csv"}
        for metric in ("balanced_accuracy", "faithfulness", "failure_modes"):
            uns = ad.read_h5ad(run(f"metrics/{metric}", base, work / prediction.parent.name)).uns
            out.update({str(k): float(v) for k, v in zip(uns["metric_ids"], uns["metric_values"])})
        return out
    sol, graph, go = solution_graph_go(folder)
    pred = ad.read_h5ad(prediction).obs
    table = faithfulness_table(sol, pred, graph, go)
    out["balanced_accuracy"] = float(balanced_accuracy_items(sol["label"].astype(str), pred.loc[sol.index, "answer"]).mean())
    scored = table[table["has_reference"]]
    out.update({m: float(scored[m].mean()) for m in FAITHFULNESS_METRICS})
    out.update(failure_modes(table).mean().to_dict())
    return out


# --- a hand-made dataset --------------------------------------------------------------------------
def write_hand_dataset(folder: Path) -> pd.DataFrame:
    """P knocks down: P -> A -> G1 (+,+), P -> B -| G2 (+,-), P -> A -> G3 (+,0); G5 unreachable.

    Basal (log1p scale): tau_low 1, tau_high 8; G1 medium, G2 medium, G1s silent twin, G2h saturated twin.
    """
    folder.mkdir(parents=True)
    graph = build_signed_graph(pd.DataFrame(
        [("P", 1, "A"), ("A", 1, "G1"), ("P", 1, "B"), ("B", -1, "G2"), ("A", 0, "G3"), ("A", 1, "G1s"),
         ("B", -1, "G2h"), ("Q", 1, "A")], columns=["source", "sign", "target"]).assign(database="OmniPath"))
    graph.to_frame().to_csv(folder / "graph.csv", index=False)
    genes = pd.Index(["A", "B", "G1", "G1s", "G2", "G2h", "G3", "G5", "P", "Q"])
    basal = pd.Series({"A": 5.0, "B": 5.0, "G1": 4.0, "G1s": 0.5, "G2": 4.0, "G2h": 9.0, "G3": 4.0, "G5": 4.0, "P": 5.0, "Q": 5.0})
    go = GOProfiles.from_gene_sets({"t_a": ["A", "G1"], "t_b": ["B", "G2"], "t_all": list(genes)}, genes=genes)
    ad.AnnData(X=basal[genes].to_numpy()[None, :], obs=pd.DataFrame({"tau_low": [1.0], "tau_high": [8.0], "distribution": ["ID"]}, index=["K562"]),
               var=pd.DataFrame({"in_graph": genes.isin(graph.nodes)}, index=genes), varm={"go_bp": go.membership},
               uns={"dataset_id": "hand", "go_bp_idf": go.idf, "go_bp_terms": np.array(["t_a", "t_b", "t_all"], dtype=object)}
               ).write_h5ad(folder / "context.h5ad")
    pd.DataFrame({"gene": ["G1", "P"], "description": ["G1 is an enzyme.", "P is a kinase."]}).to_parquet(
        folder / "gene_descriptions.parquet", index=False)
    items = pd.DataFrame([("P", "G1", "down"), ("P", "G1s", "unchanged"), ("P", "G2", "up"), ("P", "G2h", "unchanged"),
                          ("P", "G3", "up"), ("P", "G5", "unchanged")], columns=["perturbation", "gene", "label"])
    items["cell"], items["perturbation_type"], items["fold"] = "K562", "CRISPRi", "id_cell_id_pert"
    items.index = pd.Index("K562|" + items["perturbation"] + "|" + items["gene"], name="item_id")
    thresholds = pd.DataFrame({"tau_low": [1.0], "tau_high": [8.0]}, index=["K562"])
    train = items.assign(split="train", perturbation="Q")  # Q -> A -> G1 (+,+) etc.: labels as for P
    train.index = pd.Index("K562|Q|" + train["gene"], name="item_id")
    items = items.join(reference_paths_for_items(items, graph, basal.to_frame("K562"), thresholds))
    train = train.join(reference_paths_for_items(train, graph, basal.to_frame("K562"), thresholds))
    keys = ["cell", "perturbation", "perturbation_type", "gene"]
    uns = {"dataset_id": "hand", "dataset_name": "hand", "dataset_summary": "hand-made"}
    ad.AnnData(obs=train[keys + ["split", "label", "candidate_paths", "reference_paths", "n_reference_paths"]],
               uns=uns).write_h5ad(folder / "train.h5ad")
    ad.AnnData(obs=items[keys + ["fold"]], uns=uns).write_h5ad(folder / "test.h5ad")
    ad.AnnData(obs=items[keys + ["fold", "label", "reference_paths", "n_reference_paths"]], uns=uns).write_h5ad(folder / "solution.h5ad")
    return items


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hand") / "hand"
    items = write_hand_dataset(folder)
    return folder, items


def test_hand_dataset_reference_paths(hand):
    _, items = hand
    # G1 (medium): down only; G1s silent: unchanged by floor; G2: up; G2h saturated: unchanged by
    # ceiling; G3 ambiguous edge within budget: up; G5 unreachable: no path
    assert items["n_reference_paths"].tolist() == [1, 1, 1, 1, 1, 0]


def test_sign_propagation_answers_by_rules(hand, tmp_path):
    folder, items = hand
    pred = ad.read_h5ad(run("methods/sign_propagation", dataset_args(folder), tmp_path)).obs
    # G3's only path has an unsigned edge: no single sign, it abstains -> unchanged
    assert pred["answer"].tolist() == ["down", "unchanged", "up", "unchanged", "unchanged", "unchanged"]
    assert json.loads(pred.loc["K562|P|G1", "triplets"]) == [["P", 1, "A"], ["A", 1, "G1"]]
    assert json.loads(pred.loc["K562|P|G5", "triplets"]) == []
    s = scores(tmp_path / "out" / "methods_sign_propagation" / "prediction.h5ad", folder)
    # 5 of 6 right: up recall 1/2 (G3 wrong), down 1, unchanged 1 -> BA 5/6; every reference item has its path
    assert s["balanced_accuracy"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert s["edge_recall"] == 1.0 and s["path_connectivity"] == 1.0 and s["go_similarity"] == 1.0
    assert s["path_coverage_any_answer"] == 1.0 and s["edge_precision"] == 1.0
    assert s["wrong_answer_right_reason"] == pytest.approx(1 / 5)  # G3: right path, answer unchanged
    assert s["path_coverage"] == pytest.approx(4 / 5)  # the headline does not pay G3's path: its answer is wrong
    assert s["right_answer_wrong_reason"] == 0.0


def test_controls_on_hand_dataset(hand, tmp_path):
    folder, _ = hand
    ref = scores(run("control_methods/reference_answer", dataset_args(folder, True), tmp_path), folder)
    assert ref == {"balanced_accuracy": 1.0, "path_coverage": 1.0, "path_coverage_any_answer": 1.0, "edge_precision": 1.0, "edge_recall": 1.0, "edge_f1": 1.0,
                   "path_connectivity": 1.0, "go_similarity": 1.0, "right_answer_wrong_reason": 0.0,
                   "wrong_answer_right_reason": 0.0}
    maj = ad.read_h5ad(run("control_methods/majority_per_gene", dataset_args(folder, True), tmp_path)).obs
    # training items (perturbation Q) carry the same labels per gene: the majority is the label itself
    assert maj["answer"].tolist() == ["down", "unchanged", "up", "unchanged", "up", "unchanged"]
    assert set(maj["triplets"]) == {"[]"}
    rnd1 = ad.read_h5ad(run("control_methods/random_answer", dataset_args(folder, True), tmp_path / "a")).obs
    # The same script on the same arguments in this process (whose global random state is not the job's)
    rnd2 = ad.read_h5ad(run_script_here("control_methods/random_answer", dataset_args(folder, True), tmp_path / "b.h5ad")).obs
    assert rnd1.equals(rnd2)  # seeded
    # a path of the graph from P to the gene, drawn among the graph's paths (one each here); none for G5
    assert json.loads(rnd1.loc["K562|P|G2", "triplets"]) == [["P", 1, "B"], ["B", -1, "G2"]]
    assert json.loads(rnd1.loc["K562|P|G5", "triplets"]) == []
    rnd3 = ad.read_h5ad(run_script_here("control_methods/random_answer", {**dataset_args(folder, True), "seed": 3},
                                        tmp_path / "c.h5ad")).obs
    assert not rnd3["answer"].equals(rnd1["answer"])  # another seed, another draw


def test_adversarial_controls_on_hand_dataset(hand, tmp_path):
    folder, _ = hand
    args = dataset_args(folder, True)
    listed = ad.read_h5ad(run("control_methods/all_nearby_edges", args, tmp_path)).obs
    assert set(listed["answer"]) == {"unchanged"}
    # P -> A -> G1 and the edges of P's other walks into G1 (none here): the path itself, from the graph
    assert sorted(map(tuple, json.loads(listed.loc["K562|P|G1", "triplets"]))) == [("A", 1, "G1"), ("P", 1, "A")]
    assert json.loads(listed.loc["K562|P|G5", "triplets"]) == []
    invented = ad.read_h5ad(run("control_methods/invented_edge", args, tmp_path)).obs
    assert json.loads(invented.loc["K562|P|G2", "triplets"]) == [["P", 1, "G2"]]
    assert set(invented["answer"]) == {"unchanged"}  # the training majority (3 of 6)
    s = scores(tmp_path / "out" / "control_methods_invented_edge" / "prediction.h5ad", folder)
    assert s["path_connectivity"] == 0.0 and s["path_coverage"] == 0.0  # no such edge in the graph
    plausible = ad.read_h5ad(run("control_methods/unchanged_plausible_path", args, tmp_path)).obs
    assert json.loads(plausible.loc["K562|P|G2", "triplets"]) == [["P", 1, "B"], ["B", -1, "G2"]]
    assert set(plausible["answer"]) == {"unchanged"}
    sol = ad.read_h5ad(folder / "solution.h5ad").obs
    table = faithfulness_table(sol, plausible, read_graph(folder / "graph.csv"))
    table = table[table["has_reference"]]
    unchanged = sol.loc[table.index, "label"].eq("unchanged")
    # its paths cover reference paths of up/down items too, but the headline pays them only where "unchanged" is right
    assert (table.loc[~unchanged, "path_coverage_any_answer"] > 0).any()
    assert (table.loc[~unchanged, "path_coverage"] == 0).all()
    assert table.loc[unchanged, "path_coverage"].equals(table.loc[unchanged, "path_coverage_any_answer"])
    copied = ad.read_h5ad(run("control_methods/nearest_training_path", args, tmp_path)).obs
    # the training item of the same gene (perturbation Q): its label and its reference path, starting at Q
    assert json.loads(copied.loc["K562|P|G1", "triplets"]) == [["Q", 1, "A"], ["A", 1, "G1"]]
    s = scores(tmp_path / "out" / "control_methods_nearest_training_path" / "prediction.h5ad", folder)
    assert s["balanced_accuracy"] == 1.0 and s["path_connectivity"] == 0.0 and s["path_coverage"] == 0.0


def test_metrics_reject_bad_predictions(hand, tmp_path):
    folder, items = hand
    test = ad.read_h5ad(folder / "test.h5ad")
    bad = tmp_path / "bad.h5ad"
    write_prediction(bad, test, ["up"] * test.n_obs, [[]] * test.n_obs, "x")
    p = ad.read_h5ad(bad)
    p.obs["answer"] = ["sideways"] + ["up"] * (test.n_obs - 1)
    p.write_h5ad(bad)
    config = read_config(TASK / "metrics" / "balanced_accuracy" / "config.vsh.yaml")
    result = run_component(config, {"input_solution": str(folder / "solution.h5ad"), "input_prediction": str(bad),
                                    "input_context": str(folder / "context.h5ad"), "input_graph": str(folder / "graph.csv"),
                                    "output": str(tmp_path / "s.h5ad")},
                           work_dir=tmp_path / "run")
    assert not result.succeeded
    assert "answers must be one of" in result.log.read_text()
    with pytest.raises(ValueError, match="answers must be one of"):
        write_prediction(tmp_path / "x.h5ad", test, ["sideways"] * test.n_obs, [[]] * test.n_obs, "x")


# --- the bundled test resources --------------------------------------------------------------------
CHEMICAL = ROOT / "resources_test" / "pertreasonqa" / "op3_chemical_small"
#: Each bundled dataset; its two tests share their runs.
BUNDLED = [pytest.param(RESOURCES, id="genetic"), pytest.param(CHEMICAL, id="chemical")]


@pytest.mark.parametrize("folder", BUNDLED)
def test_controls_bracket_methods_on_test_resources(folder, tmp_path, shared_runs):
    if not (folder / "test.h5ad").is_file():
        pytest.skip("run scripts/create_test_resources/pertreasonqa.sh")
    # The metric components score the random control, whose scores are neither 0 nor 1; they score as the
    # in-process scores do, which then serve for the reference control (all 1) here and in the other tests.
    rnd_prediction = shared_runs("control_methods/random_answer", dataset_args(folder, True))
    rnd = scores(rnd_prediction, folder, tmp_path / "random")
    assert rnd == pytest.approx(scores(rnd_prediction, folder))
    ref = scores(shared_runs("control_methods/reference_answer", dataset_args(folder, True)), folder)
    assert ref["balanced_accuracy"] == 1.0 and ref["edge_recall"] == 1.0 and ref["path_connectivity"] == 1.0
    # a random graph path is a grounded chain, and the reference path only by chance
    assert rnd["path_connectivity"] == 1.0 and rnd["path_coverage"] < 0.9
    assert 0.2 < rnd["balanced_accuracy"] < 0.5
    solution = ad.read_h5ad(folder / "solution.h5ad").obs
    assert set(solution["fold"]) == {"id_cell_id_pert", "id_cell_ood_pert", "ood_cell_id_pert", "ood_cell_ood_pert"}
    assert (solution["n_reference_paths"] > 0).sum() >= 20


@pytest.mark.parametrize("folder", BUNDLED)
def test_adversarial_controls_score_at_most_random_on_path_coverage(folder, tmp_path, shared_runs):
    """Path coverage pays a list or an invented edge no more than a random path, and the headline pays no wrong answer.

    The path rule is compared whatever the answer (the random control's answers are random, the
    adversarial ones always "unchanged"); the headline then pays a path only with the right answer.
    """
    if not (folder / "test.h5ad").is_file():
        pytest.skip("run scripts/create_test_resources/pertreasonqa.sh")
    args = dataset_args(folder, True)
    # Seed 0, the random control's default, is the job of test_controls_bracket_methods_on_test_resources;
    # seeds 1-4 are the same script on the same arguments, drawn in this process.
    draws = [shared_runs("control_methods/random_answer", args)]
    draws += [run_script_here("control_methods/random_answer", {**args, "seed": k}, tmp_path / f"random_seed{k}.h5ad")
              for k in range(1, 5)]
    random = np.mean([scores(draw, folder)["path_coverage_any_answer"] for draw in draws])
    adversarial = {control: scores(shared_runs(f"control_methods/{control}", args), folder)
                   for control in ("all_nearby_edges", "invented_edge")}
    for control, s in adversarial.items():
        assert s["path_coverage_any_answer"] <= random, (control, s["path_coverage_any_answer"], random)
        assert s["edge_recall"] >= 0 and s["edge_precision"] <= 1
    listed = adversarial["all_nearby_edges"]
    # what a recall-only score would have paid the list, and what precision takes back
    assert listed["edge_recall"] > 0.9 and listed["edge_precision"] < 0.9
    # "unchanged" with the most plausible path: its paths for up/down items no longer count in the headline
    plausible = scores(shared_runs("control_methods/unchanged_plausible_path", args), folder)
    assert plausible["path_coverage"] < plausible["path_coverage_any_answer"]
    assert plausible["wrong_answer_right_reason"] > 0  # the paths the headline refuses to pay


# --- language-model methods against a local OpenAI-format server -----------------------------------
def test_llm_methods_end_to_end_with_stub_server(hand, tmp_path):
    from openpert.testing.llm_server import OpenAIStubServer

    folder, items = hand

    def responder(request):
        prompt = request["messages"][-1]["content"]
        if "Effect gene: G3 " in prompt:
            return "I believe G3 goes up."  # breaks the format: must become an invalid answer
        if "Effect gene: G5 " in prompt:
            return format_response("no path", "unchanged", []) + "\nThanks!"  # text outside the blocks
        return llm_test_responder.respond(request)

    with OpenAIStubServer(responder, model="stub") as server:
        llm = {"llm_base_url": server.base_url, "llm_model": "stub", "llm_cache_dir": "none"}
        pred = ad.read_h5ad(run("methods/llm_zero_shot", {**dataset_args(folder), **llm}, tmp_path)).obs
        requests = list(server.requests)
        none_ctx = ad.read_h5ad(run("methods/llm_zero_shot", {**dataset_args(folder), **llm, "path_context": "none"},
                                    tmp_path / "none")).obs
        summer = ad.read_h5ad(run("methods/summer_retrieval", {**dataset_args(folder), **llm}, tmp_path / "summer")).obs
        summer_requests = list(server.requests)[len(requests) + n_test_items(folder):]

    assert len(requests) == len(items)
    assert requests[0]["messages"][0]["role"] == "system" and "<triplets>" in requests[0]["messages"][0]["content"]
    prompt_g1 = next(r["messages"][1]["content"] for r in requests if "Effect gene: G1 " in r["messages"][1]["content"])
    assert "1. P [medium] --(+1)--> A [medium] --(+1)--> G1 [medium]" in prompt_g1
    # the stub answers from the path; the two malformed responses become invalid with their reason kept
    assert pred["answer"].tolist() == ["down", "unchanged", "up", "unchanged", "invalid", "invalid"]
    assert "exactly one <thinking>" in pred.loc["K562|P|G3", "parse_error"]
    assert "text outside the blocks" in pred.loc["K562|P|G5", "parse_error"]
    assert pred.loc["K562|P|G1", "parse_error"] == ""
    assert json.loads(pred.loc["K562|P|G2", "triplets"]) == [["P", 1, "B"], ["B", -1, "G2"]]
    # The account of the model's use: one sample per question, the two malformed answers abstain and fall back.
    usage = dict(ad.read_h5ad(tmp_path / "out" / "methods_llm_zero_shot" / "prediction.h5ad").uns["llm_usage"])
    assert (usage["questions"], usage["samples"], usage["abstentions"], usage["fallbacks"]) == (6, 6, 2, 2)
    assert usage["requests"] == len(requests) and usage["prompt_tokens"] > 0 and usage["unmetered"] == 0
    s = scores(tmp_path / "out" / "methods_llm_zero_shot" / "prediction.h5ad", folder)
    # up: G2 right, G3 invalid; down: G1 right; unchanged: G1s, G2h right, G5 invalid
    assert s["balanced_accuracy"] == pytest.approx((1 / 2 + 1 + 2 / 3) / 3)
    assert s["edge_recall"] == pytest.approx(4 / 5)  # every reference item but G3 has its path back
    # without path context the prompt has no path and the stub answers unchanged with no triplet
    assert set(none_ctx["answer"]) <= {"unchanged", "invalid"} and set(none_ctx.loc[none_ctx["answer"] == "unchanged", "triplets"]) == {"[]"}
    # SUMMER retrieval: training items of the neighbour Q (shares neighbour A with P) with their mechanisms
    prompt = next(r["messages"][1]["content"] for r in summer_requests if "Effect gene: G1 " in r["messages"][1]["content"])
    assert "knockdown of Q in K562: G1 went down. Mechanism: (Q, +1, A); (A, +1, G1)\n" in prompt
    assert "knockdown of Q in K562: G2 went up.\n" in prompt  # Q does not reach G2: no mechanism shown
    # the dataset's gene descriptions of p and g come first; a gene without one (G2) has none
    assert "Description of P: P is a kinase.\nDescription of G1: G1 is an enzyme.\nRelated experiments" in prompt
    prompt_g2 = next(r["messages"][1]["content"] for r in summer_requests if "Effect gene: G2 " in r["messages"][1]["content"])
    assert "Description of P: P is a kinase.\nRelated experiments" in prompt_g2 and "Description of G2" not in prompt_g2
    assert summer["answer"].tolist() == pred["answer"].tolist()


#: llama-cpp-python's refusal of a prompt longer than its context window (HTTP 400).
TOO_LONG = ("This model's maximum context length is 8192 tokens. However, you requested 9290 tokens (9034 in the messages, "
            "256 in the completion). Please reduce the length of the messages or completion.")


def test_a_prompt_longer_than_the_context_window_is_an_invalid_answer_named_in_the_log(hand, tmp_path):
    from openpert.testing.llm_server import OpenAIStubServer, StubHTTPError

    folder, _ = hand

    def responder(request):
        if "Effect gene: G2 " in request["messages"][-1]["content"]:
            raise StubHTTPError(400, TOO_LONG)
        return llm_test_responder.respond(request)

    config = read_config(TASK / "methods" / "llm_zero_shot" / "config.vsh.yaml")
    out = tmp_path / "prediction.h5ad"
    with OpenAIStubServer(responder, model="stub") as server:
        args = {**{k: str(v) for k, v in dataset_args(folder).items()}, "output": str(out),
                "llm_base_url": server.base_url, "llm_model": "stub", "llm_cache_dir": "none"}
        result = run_component(config, args, work_dir=tmp_path / "run")
    assert result.succeeded, result.log.read_text()[-3000:]
    pred = ad.read_h5ad(out)
    line = ("item K562|P|G2: prompt of 9034 tokens is longer than the model's context window of 8192 tokens; "
            "answered as an abstention")
    assert list(pred.uns["llm_failures"]) == [line] and line in result.log.read_text()
    # Not scored silently: an invalid answer (always wrong), an abstention and a fallback in the account.
    assert pred.obs.loc["K562|P|G2", "answer"] == "invalid" and pred.obs.loc["K562|P|G2", "response"] == ""
    usage = dict(pred.uns["llm_usage"])
    assert (usage["failed"], usage["context_window"], usage["abstentions"], usage["fallbacks"]) == (1, 8192, 1, 1)


def n_test_items(folder: Path) -> int:
    return ad.read_h5ad(folder / "test.h5ad").n_obs


# --- the chemical modality on its bundled test resources ---------------------------------------------
@pytest.mark.skipif(not (CHEMICAL / "test.h5ad").is_file(), reason="run scripts/create_test_resources/pertreasonqa.sh")
def test_methods_on_chemical_items(tmp_path):
    from openpert.testing.llm_server import OpenAIStubServer

    solution = ad.read_h5ad(CHEMICAL / "solution.h5ad").obs
    assert set(solution["perturbation_type"]) == {"chemical"}
    graph = read_graph(CHEMICAL / "graph.csv")
    compounds = set(graph.nodes[graph.src[graph.drug_edge]])
    assert set(solution["perturbation"]) <= compounds

    # sign propagation explains its answers with paths that start at the compound
    sign = ad.read_h5ad(run("methods/sign_propagation", dataset_args(CHEMICAL), tmp_path)).obs
    with_path = [json.loads(t) for t in sign["triplets"] if t != "[]"]
    assert with_path and all(t[0][0] in compounds for t in with_path)
    s = scores(tmp_path / "out" / "methods_sign_propagation" / "prediction.h5ad", CHEMICAL)
    assert s["path_connectivity"] == 1.0  # every item with a reference path has a candidate path
    lgbm = scores(run("methods/lightgbm", dataset_args(CHEMICAL), tmp_path), CHEMICAL)
    assert lgbm["path_connectivity"] == 1.0 and 0 <= lgbm["balanced_accuracy"] <= 1

    with OpenAIStubServer(llm_test_responder.respond, model="stub") as server:
        llm = {"llm_base_url": server.base_url, "llm_model": "stub", "llm_cache_dir": "none"}
        pred = ad.read_h5ad(run("methods/llm_zero_shot", {**dataset_args(CHEMICAL), **llm}, tmp_path)).obs
        summer = ad.read_h5ad(run("methods/summer_retrieval", {**dataset_args(CHEMICAL), **llm, "gene_descriptions": "false"},
                                  tmp_path / "summer")).obs
        prompts = [r["messages"][1]["content"] for r in server.requests]
    # compound names with spaces and brackets survive the prompt, the stub's reply and the strict parser
    assert (pred["parse_error"] == "").all() and (summer["parse_error"] == "").all()
    first = solution.iloc[0]
    action = {1: "activates", -1: "inhibits", 0: "acts on"}
    targets = ", ".join(f"{action[s]} {t}" for t, s in compound_targets(graph, str(first.perturbation)))
    assert any(f"Perturbation: treatment with the compound {first.perturbation} (known targets: {targets})." in p for p in prompts)
    assert any("Example 1: treatment with the compound " in p for p in prompts[len(pred):])
    s = scores(tmp_path / "out" / "methods_llm_zero_shot" / "prediction.h5ad", CHEMICAL)
    assert s["path_connectivity"] == 1.0


def test_lightgbm_learns_from_a_training_portion_of_two_classes(tmp_path):
    # A small fold may train on two of the three answers: LightGBM's multiclass objective refuses that.
    folder = tmp_path / "two_classes"
    folder.mkdir()
    for name in FILES.values():
        (folder / name).symlink_to(RESOURCES / name)
    (folder / "train.h5ad").unlink()
    train = ad.read_h5ad(RESOURCES / "train.h5ad")
    labels = train.obs["label"].astype(str)
    assert labels.nunique() == 3
    keep = labels.isin(sorted(labels.unique())[:2]).to_numpy()
    train[keep].copy().write_h5ad(folder / "train.h5ad")
    answers = ad.read_h5ad(run("methods/lightgbm", dataset_args(folder), tmp_path)).obs["answer"].astype(str)
    assert set(answers) <= set(sorted(labels.unique())[:2]) and len(answers) == ad.read_h5ad(RESOURCES / "test.h5ad").n_obs
