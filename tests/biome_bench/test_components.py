"""End-to-end tests of the biome_bench components: LLM methods and judge metrics against a local
OpenAI-compatible stub server (prompt -> HTTP -> answer -> extraction/parsing -> score), the loader
on original-format files, metrics on a dataset without Task A items, and a small benchmark run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anndata as ad
import numpy as np
import pytest
from biome_bench_lib.graded_text import delimited_text
from biome_bench_lib.item_files import read_items, write_items
from biome_bench_lib.prompts import JUDGE_SYSTEM_PROMPT
from biome_bench_lib.vocabulary import JUDGE_DIMENSIONS, RELATIONS, TASK_MECHANISM, TASK_RELATION
from llm_test_responder import stub_responder

from openpert.config.viash import find_project_root, read_config
from openpert.run.component import run_component
from openpert.testing.llm_server import OpenAIStubServer, StubHTTPError
from pertsci import llm

ROOT = find_project_root(Path(__file__).resolve())
TASK = ROOT / "src" / "biome_bench"
DATA = ROOT / "resources_test" / "biome_bench" / "mmu_subset"
RAW = ROOT / "resources_test" / "biome_bench" / "raw"
FILES = {"input_train": DATA / "train.h5ad", "input_test": DATA / "test.h5ad", "input_solution": DATA / "solution.h5ad"}


@pytest.fixture(autouse=True)
def _no_llm_from_the_environment(monkeypatch, tmp_path):
    # Neither a developer's endpoint nor the component tests' stub may leak in.
    for name in (llm.ENV_BASE_URL, llm.ENV_MODEL, llm.ENV_API_KEY, llm.ENV_BACKEND):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(llm.ENV_CACHE, str(tmp_path / "llm-cache"))


def use_server(monkeypatch, server: OpenAIStubServer) -> None:
    monkeypatch.setenv(llm.ENV_BASE_URL, server.base_url)
    monkeypatch.setenv(llm.ENV_MODEL, "stub-model")


def run(kind: str, name: str, work: Path, **args):
    """Run a component; return its outputs (name -> path). Fails the test with the log when it fails."""
    config = read_config(TASK / kind / name / "config.vsh.yaml")
    names = {a.name: Path(str(a.example)).name for a in config.file_outputs}
    outputs = {k: str(work / f"{name}_{v}") for k, v in names.items()}
    result = run_component(config, {**{k: str(v) for k, v in args.items()}, **outputs}, work_dir=work / f"run_{name}")
    return result, {k: Path(v) for k, v in outputs.items()}


def must_run(kind: str, name: str, work: Path, **args) -> dict[str, Path]:
    result, outputs = run(kind, name, work, **args)
    assert result.succeeded, result.log.read_text()[-3000:]
    return outputs


@pytest.fixture(scope="module")
def task_b_only(tmp_path_factory) -> dict[str, Path]:
    """The loader's dataset of the original Task B file alone (no knowledge graph): its outputs by name."""
    return must_run("datasets", "biome_bench_jsonl", tmp_path_factory.mktemp("task_b_only"), species="mmu", subtasks="mechanism",
                    without_kg=True, dataset_id="task_b_only", task_b_jsonl=str(RAW / "task_b_subset.jsonl"))


@pytest.fixture(scope="module")
def both_tasks(tmp_path_factory) -> dict[str, Path]:
    """The loader's dataset of the original Task B and knowledge-graph files, given by path: its outputs by name."""
    return must_run("datasets", "biome_bench_jsonl", tmp_path_factory.mktemp("both_tasks"), species="mmu", dataset_id="d",
                    task_b_jsonl=RAW / "task_b_subset.jsonl", kg_jsonl=RAW / "kg_mmu_subset.jsonl")


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory, task_b_only) -> dict:
    """One benchmark of state_rules and both controls, metric relation_accuracy, on the test dataset and on the
    loader's Task-B-only dataset: its results and the folder its predictions and scores are published in.

    The benchmark test checks its scores; the tests that need the positive control's prediction of the test
    dataset, or the random control scored on the Task-B-only dataset, read what it published (the same
    components on the same files as runs of their own, which would only repeat those jobs).
    """
    from openpert.config.task import Task
    from openpert.engines.benchmark import run_benchmark

    folder = tmp_path_factory.mktemp("benchmark")
    datasets = folder / "datasets"
    shutil.copytree(DATA, datasets / "mmu_subset")
    for extra in ("prediction.h5ad", "score.h5ad"):
        (datasets / "mmu_subset" / extra).unlink()
    (datasets / "task_b_only").mkdir()
    for name in ("train", "test", "solution"):
        shutil.copy(task_b_only[f"output_{name}"], datasets / "task_b_only" / f"{name}.h5ad")
    task = Task(TASK)
    # One seed replicate of the random control, not those of its info.seeds (each a job and its metric's):
    # the scale here needs a 0, not a mean of draws, and running replicates is the engine's, tested in
    # tests/harness/engines/test_local_seeds.py. Only this Task object's copy of the config changes.
    task.component("random_or_empty").info["seeds"] = 1
    results = run_benchmark(task, folder / "results", input_dir=datasets, methods=["state_rules"],
                            controls=["reference_answer", "random_or_empty"], metrics=["relation_accuracy"],
                            jobs=2, progress=False)
    return {"results": results, "outputs": folder / "results" / "outputs"}


def published(benchmark: dict, dataset: str, method: str) -> Path:
    """The folder of a method's prediction of a dataset in :func:`benchmark` (a control's replicate is ``<id>@seed0``)."""
    found = [p for p in (benchmark["outputs"] / dataset).iterdir() if p.name == method or p.name.startswith(f"{method}@")]
    assert len(found) == 1 and (found[0] / "prediction.h5ad").is_file(), (found, benchmark["results"]["failures"])
    return found[0]


@pytest.fixture(scope="module")
def reference_prediction(benchmark) -> Path:
    """The positive control's prediction of the test dataset, which the judge tests grade."""
    return published(benchmark, "mmu_subset", "reference_answer") / "prediction.h5ad"


@pytest.fixture(scope="module")
def llm_files(tmp_path_factory) -> dict[str, Path]:
    """Every fifth item of each task of the test dataset (its test and solution files), and its whole training split.

    A language-model method sends one request per test item: these 26 items, of both tasks, put the same
    questions to the method as the dataset's 124, at a fifth of the requests to the stub server.
    """
    folder = tmp_path_factory.mktemp("llm_files")
    test, test_uns = read_items(FILES["input_test"])
    keep = test.groupby("task", sort=False).nth(slice(0, None, 5)).index
    solution, solution_uns = read_items(FILES["input_solution"])
    assert set(test.loc[keep, "task"]) == {TASK_RELATION, TASK_MECHANISM}
    write_items(test.loc[keep], folder / "test.h5ad", test_uns)
    write_items(solution.loc[keep], folder / "solution.h5ad", solution_uns)
    return {"input_train": FILES["input_train"], "input_test": folder / "test.h5ad", "input_solution": folder / "solution.h5ad"}


def score_values(path: Path) -> dict[str, float]:
    uns = ad.read_h5ad(path).uns
    return dict(zip(uns["metric_ids"], (float(v) for v in uns["metric_values"])))


def test_zero_shot_end_to_end_counts_unparseable_answers_wrong(monkeypatch, tmp_path, llm_files):
    test, _ = read_items(llm_files["input_test"])
    solution, _ = read_items(llm_files["input_solution"])

    def responder(request):
        prompt = request["messages"][-1]["content"]
        if "Respond with the exact relation name" not in prompt:
            return "<think>chain the entities</think>\nA activates B, which leads to apoptosis."
        source = prompt.split("**Source**: ", 1)[1][0].upper()
        return "**Relation:** binds\nbecause they form a complex." if source < "N" else "Hard to say; a leads to-style effect."

    with OpenAIStubServer(responder) as server:
        use_server(monkeypatch, server)
        pred = must_run("methods", "llm_zero_shot", tmp_path, input_train=llm_files["input_train"],
                        input_test=llm_files["input_test"])["output"]
        assert sorted(r["messages"][-1]["content"] for r in server.requests) == sorted(test["prompt"])
        assert {r["temperature"] for r in server.requests} == {0.0}
    answers, _ = read_items(pred)
    mech = test.index[test["task"] == TASK_MECHANISM]
    assert (answers.loc[mech, "answer"] == "A activates B, which leads to apoptosis.").all()  # reasoning removed

    scores = must_run("metrics", "relation_accuracy", tmp_path, input_solution=llm_files["input_solution"],
                      input_prediction=pred)["output"]
    rel = solution[solution["task"] == TASK_RELATION]
    binds = np.array([test.loc[i, "source"][0].upper() < "N" for i in rel.index])
    expected = np.where(binds, rel["relation"] == "binds", False)
    values, uns = score_values(scores), ad.read_h5ad(scores).uns
    assert values["accuracy"] == pytest.approx(expected.mean())
    assert uns["n_unparseable"] == int((~binds).sum()) > 0
    # The method's own account counts the same unparseable answers (Task B's explanations are all readable).
    usage = dict(ad.read_h5ad(pred).uns["llm_usage"])
    assert (usage["questions"], usage["samples"]) == (len(test), len(test))
    assert usage["abstentions"] == usage["fallbacks"] == int((~binds).sum())
    assert ad.read_h5ad(scores).obs["accuracy"].tolist() == expected.astype(float).tolist()


def test_few_shot_examples_are_retrieved_training_items(monkeypatch, tmp_path, llm_files):
    train, _ = read_items(FILES["input_train"])
    answer_of = {p: (r if t == TASK_RELATION else m) for p, t, r, m in zip(train["prompt"], train["task"], train["relation"], train["mechanism"])}
    task_of = dict(zip(train["prompt"], train["task"]))
    with OpenAIStubServer(stub_responder) as server:
        use_server(monkeypatch, server)
        must_run("methods", "llm_few_shot", tmp_path, input_train=llm_files["input_train"], input_test=llm_files["input_test"],
                 n_examples=2)
        requests = list(server.requests)
    test, _ = read_items(llm_files["input_test"])
    query_task = dict(zip(test["prompt"], test["task"]))
    assert len(requests) == len(test)
    for request in requests:
        messages = request["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
        for user, assistant in zip(messages[0:4:2], messages[1:4:2]):
            assert user["content"] in answer_of, "an example must be a training item"
            assert assistant["content"] == answer_of[user["content"]]
            assert task_of[user["content"]] == query_task[messages[-1]["content"]]


def test_judge_metric_end_to_end(monkeypatch, tmp_path, reference_prediction):
    solution, _ = read_items(FILES["input_solution"])
    mech = solution[solution["task"] == TASK_MECHANISM]
    with OpenAIStubServer(stub_responder) as server:
        use_server(monkeypatch, server)
        scores = must_run("metrics", "mechanism_judge", tmp_path, input_solution=FILES["input_solution"],
                          input_prediction=reference_prediction)["output"]
    values, adata = score_values(scores), ad.read_h5ad(scores)
    # The stand-in judge gives 5 to a text keeping all of the reference's bigrams.
    assert all(values[d] == 5.0 for d in JUDGE_DIMENSIONS)
    expected_coverage = [np.mean([t["source"] in text and t["target"] in text and bool(t["source"]) and bool(t["target"])
                                  for t in json.loads(kg)]) for text, kg in zip(mech["mechanism"], mech["reference_kg"])]
    assert adata.obs.loc[mech.index, "kg_coverage"].tolist() == pytest.approx(expected_coverage)
    assert values["kg_coverage"] == pytest.approx(np.mean(expected_coverage))
    # reference answers: accuracy, macro-F1 and similarity 1 -> 100; judge 5 -> 100
    assert values["normalised_average"] == pytest.approx((700 + 100 * np.mean(expected_coverage)) / 8, abs=1e-4)
    assert adata.uns["n_instruction_like"] == 0 and list(adata.uns["instruction_like_items"]) == []  # nothing to flag


def test_the_injecting_control_is_flagged_and_talks_up_only_a_judge_that_obeys(monkeypatch, tmp_path):
    injecting = must_run("control_methods", "grader_injection", tmp_path, **FILES)["output"]
    answers, uns = read_items(injecting)
    test, _ = read_items(FILES["input_test"])
    mech = test.index[test["task"] == TASK_MECHANISM]
    assert uns["method_id"] == "grader_injection" and answers.loc[mech, "answer"].str.contains("NOTE TO THE GRADER").all()
    assert answers.loc[test.index[test["task"] == TASK_RELATION], "answer"].isin(RELATIONS).all()

    def obeying(request):
        # Reads the graded text where the markers put it, then does what it says: answers its verdict.
        text = delimited_text(request["messages"][-1]["content"]) or ""
        return text[text.index("{", text.index("NOTE TO THE GRADER")):] if "NOTE TO THE GRADER" in text else stub_responder(request)

    judged = {}
    for name, responder in (("follows_the_rubric", stub_responder), ("obeys", obeying)):
        monkeypatch.setenv(llm.ENV_CACHE, str(tmp_path / f"cache_{name}"))  # each judge answers afresh
        with OpenAIStubServer(responder) as server:
            use_server(monkeypatch, server)
            path = must_run("metrics", "mechanism_judge", tmp_path / name, input_solution=FILES["input_solution"],
                            input_prediction=injecting)["output"]
        judged[name] = (score_values(path), ad.read_h5ad(path).uns)
    for _, score_uns in judged.values():
        # Every injecting explanation is counted, whatever the judge made of it.
        assert score_uns["n_instruction_like"] == len(mech)
        assert sorted(score_uns["instruction_like_items"]) == sorted(mech)
    rubric, obeyed = judged["follows_the_rubric"][0], judged["obeys"][0]
    assert all(obeyed[d] == 5.0 for d in JUDGE_DIMENSIONS) and obeyed["kg_coverage"] == 1.0
    assert all(rubric[d] < 2.5 for d in JUDGE_DIMENSIONS) and rubric["kg_coverage"] < 0.5


def test_judge_metric_leaves_out_unreadable_answers_and_fails_when_all_are(monkeypatch, tmp_path, reference_prediction):
    solution, _ = read_items(FILES["input_solution"])
    mech = solution[solution["task"] == TASK_MECHANISM]
    unreadable_for = set(mech["mechanism"].iloc[::2])

    def half_broken(request):
        user = request["messages"][-1]["content"]
        if request["messages"][0]["content"] == JUDGE_SYSTEM_PROMPT and any(m in user for m in unreadable_for):
            return "Scores: good overall."
        return stub_responder(request)

    with OpenAIStubServer(half_broken) as server:
        use_server(monkeypatch, server)
        scores = must_run("metrics", "mechanism_judge", tmp_path / "half", input_solution=FILES["input_solution"],
                          input_prediction=reference_prediction)["output"]
    adata = ad.read_h5ad(scores)
    assert adata.uns["n_unreadable_judge"] == len(unreadable_for)
    usage = dict(adata.uns["llm_usage"])
    assert usage["abstentions"] == len(unreadable_for) + int(adata.uns["n_unreadable_coverage"])
    assert usage["questions"] >= len(mech) and usage["requests"] > 0
    assert adata.obs["factuality"].isna().sum() == len(unreadable_for)
    assert score_values(scores)["factuality"] == 5.0

    with OpenAIStubServer(lambda request: "no JSON here") as server:
        use_server(monkeypatch, server)
        monkeypatch.setenv(llm.ENV_CACHE, str(tmp_path / "fresh-cache"))  # the answers above must not be reused
        result, _ = run("metrics", "mechanism_judge", tmp_path / "broken", input_solution=FILES["input_solution"],
                        input_prediction=reference_prediction)
    # A judge that never answers readably leaves its dimensions missing, every grading a judge abstention
    # (flagged beside the method in the results): the judge model's failure, never a score of the method's.
    assert result.succeeded and "judge answers holds readable scores" in result.log.read_text()
    broken = ad.read_h5ad(result.outputs["output"])
    assert broken.uns["n_unreadable_judge"] == len(mech)
    assert all(np.isnan(score_values(result.outputs["output"])[dim]) for dim in JUDGE_DIMENSIONS)
    assert dict(broken.uns["llm_usage"])["abstentions"] >= len(mech)


#: vLLM's refusal of a prompt longer than its context window (HTTP 400).
TOO_LONG = ("This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens. Please "
            "reduce the length of the input messages.")


def test_prompts_longer_than_the_context_window_are_abstentions_named_by_item(monkeypatch, tmp_path, reference_prediction,
                                                                              llm_files):
    test, _ = read_items(llm_files["input_test"])
    solution, _ = read_items(FILES["input_solution"])
    relation_item = test.index[test["task"] == TASK_RELATION][0]
    mech = solution[solution["task"] == TASK_MECHANISM]
    mech_item = mech.index[0]

    def refusing(request):
        user = request["messages"][-1]["content"]
        # The method's question of one item; the judge's grading and coverage of another's explanation.
        if user == test.loc[relation_item, "prompt"] or mech.loc[mech_item, "mechanism"] in user:
            raise StubHTTPError(400, TOO_LONG)
        return stub_responder(request)

    said = "prompt of 5000 tokens is longer than the model's context window of 4096 tokens; answered as an abstention"
    with OpenAIStubServer(refusing) as server:
        use_server(monkeypatch, server)
        method, pred = run("methods", "llm_zero_shot", tmp_path, input_train=llm_files["input_train"],
                           input_test=llm_files["input_test"])
        judge, score = run("metrics", "mechanism_judge", tmp_path, input_solution=FILES["input_solution"],
                           input_prediction=reference_prediction)
    assert method.succeeded and judge.succeeded, (method.log.read_text() + judge.log.read_text())[-3000:]
    answers = ad.read_h5ad(pred["output"])
    assert list(answers.uns["llm_failures"]) == [f"item {relation_item}: {said}"]
    assert f"item {relation_item}: {said}" in method.log.read_text()
    assert answers.obs.loc[relation_item, "answer"] == ""  # no relation named: scored as wrong
    usage = dict(answers.uns["llm_usage"])
    assert (usage["failed"], usage["context_window"]) == (1, 4096) and usage["abstentions"] >= 1
    scored = ad.read_h5ad(score["output"])
    assert sorted(scored.uns["llm_failures"]) == [f"item {mech_item} (coverage): {said}", f"item {mech_item}: {said}"]
    assert np.isnan(scored.obs.loc[mech_item, "factuality"]) and scored.uns["n_unreadable_judge"] == 1
    assert dict(scored.uns["llm_usage"])["failed"] == 2


def test_judge_validity_separates_rewrites_from_perturbations(monkeypatch, tmp_path):
    with OpenAIStubServer(stub_responder) as server:
        use_server(monkeypatch, server)
        scores = must_run("metrics", "judge_validity", tmp_path, input_solution=FILES["input_solution"],
                          input_prediction=DATA / "prediction.h5ad", max_items=6)["output"]
    values = score_values(scores)
    assert values["validity_rewrite_score"] == 5.0
    assert values["validity_perturb_score"] < 4.5
    assert values["validity_relative_drop"] == pytest.approx(1 - values["validity_perturb_score"] / 5.0)


@pytest.mark.parametrize("kind, name, inputs", [
    ("methods", "llm_zero_shot", {"input_train": FILES["input_train"], "input_test": FILES["input_test"]}),
    ("metrics", "mechanism_judge", {"input_solution": FILES["input_solution"], "input_prediction": DATA / "prediction.h5ad"}),
])
def test_llm_components_stop_clearly_without_a_model(tmp_path, kind, name, inputs):
    result, outputs = run(kind, name, tmp_path, **inputs)
    assert not result.succeeded
    log = result.log.read_text()
    assert "needs a" in log and llm.ENV_BASE_URL in log
    assert not any(p.exists() for p in outputs.values())


def test_loader_on_original_files_and_metrics_without_task_a(tmp_path, task_b_only, both_tasks, benchmark):
    out = task_b_only
    test, uns = read_items(out["output_test"])
    train, train_uns = read_items(out["output_train"])
    assert set(test["task"]) == set(train["task"]) == {TASK_MECHANISM}
    assert uns["dataset_id"] == "task_b_only" and "No Task A items" in train_uns["dataset_description"]
    # Read from the data: the KEGG pathway names say "Mus musculus (house mouse)".
    assert train_uns["dataset_organism"] == "mus_musculus" and train_uns["dataset_name"] == "BIOME-Bench house mouse (mmu)"
    both, _ = read_items(both_tasks["output_test"])
    train_ab, _ = read_items(both_tasks["output_train"])
    assert not set(both["pathway_id"]) & set(train_ab["pathway_id"])

    # The random control's prediction of this dataset and its relation_accuracy, as the benchmark ran them.
    random_control = published(benchmark, "task_b_only", "random_or_empty")
    pred = random_control / "prediction.h5ad"
    accuracy = score_values(random_control / "relation_accuracy" / "score.h5ad")
    assert set(accuracy) == {"accuracy", "macro_f1", "macro_f1_all"}
    assert all(np.isnan(v) for v in accuracy.values())  # not applicable: no Task A items
    similarity = score_values(must_run("metrics", "embedding_similarity", tmp_path, input_solution=out["output_solution"],
                                       input_prediction=pred)["output"])
    assert similarity == {"similarity": 0.0}  # empty explanations


def test_loader_reads_the_shared_data_folder_and_names_what_it_lacks(tmp_path, both_tasks):
    shared = tmp_path / "shared"
    (shared / "biome_bench").mkdir(parents=True)
    shutil.copy(RAW / "task_b_subset.jsonl", shared / "biome_bench" / "task_b_hsa_mmu.jsonl")
    shutil.copy(RAW / "kg_mmu_subset.jsonl", shared / "biome_bench" / "kg_mmu.jsonl")
    explicit = both_tasks  # the same files, given by path
    from_shared = must_run("datasets", "biome_bench_jsonl", tmp_path / "shared_run", species="mmu", dataset_id="d",
                           shared_data=shared)
    for name in ("output_train", "output_test", "output_solution"):
        a, a_uns = read_items(explicit[name])
        b, b_uns = read_items(from_shared[name])
        assert a.equals(b) and a_uns.keys() == b_uns.keys()
    assert "kg_mmu.jsonl" in read_items(from_shared["output_train"])[1]["dataset_description"]
    # A species whose entry asks for Task B only, without a knowledge-graph file in the shared folder (as hsa).
    (shared / "biome_bench" / "kg_mmu.jsonl").unlink()
    task_b_only = must_run("datasets", "biome_bench_jsonl", tmp_path / "no_kg_file", species="mmu", subtasks="mechanism",
                           dataset_id="b", shared_data=shared)
    assert set(read_items(task_b_only["output_test"])[0]["task"]) == {TASK_MECHANISM}
    assert "No knowledge-graph file" in read_items(task_b_only["output_train"])[1]["dataset_description"]
    # ... but a subtask asked for never vanishes: the error names the file looked in.
    missing_kg, _ = run("datasets", "biome_bench_jsonl", tmp_path / "missing_kg", species="mmu", dataset_id="b", shared_data=shared)
    assert not missing_kg.succeeded and "shared/biome_bench/kg_mmu.jsonl: knowledge-graph file not found" in missing_kg.log.read_text()
    rat, _ = run("datasets", "biome_bench_jsonl", tmp_path / "rat", species="rno", subtasks="mechanism", shared_data=shared)
    assert not rat.succeeded and "task_b_hsa_mmu.jsonl: no Task B items for species 'rno'" in rat.log.read_text()

    no_task_b, _ = run("datasets", "biome_bench_jsonl", tmp_path / "no_task_b", species="mmu", kg_jsonl=RAW / "kg_mmu_subset.jsonl")
    assert not no_task_b.succeeded and "give --task_b_jsonl, or --shared_data" in no_task_b.log.read_text()
    no_kg, _ = run("datasets", "biome_bench_jsonl", tmp_path / "no_kg", species="mmu", task_b_jsonl=RAW / "task_b_subset.jsonl")
    assert not no_kg.succeeded and "give --kg_jsonl, or --shared_data" in no_kg.log.read_text()


def _as_rat(text: str) -> str:
    """Real mouse records recast as rat: KEGG ids and species names, nothing else."""
    return text.replace("mmu", "rno").replace("Mus musculus (house mouse)", "Rattus norvegicus (rat)")


def test_a_new_species_runs_end_to_end_from_configuration_alone(tmp_path):
    """Rat from a temporary shared folder: an info.datasets entry is all it takes, no code."""
    shared = tmp_path / "shared"
    (shared / "biome_bench").mkdir(parents=True)
    (shared / "biome_bench" / "task_b_rno.jsonl").write_text(_as_rat((RAW / "task_b_subset.jsonl").read_text()))
    (shared / "biome_bench" / "kg_rno.jsonl").write_text(_as_rat((RAW / "kg_mmu_subset.jsonl").read_text()))
    entry = {"id": "rno", "species": "rno", "task_b_file": "task_b_rno.jsonl"}
    config = read_config(TASK / "datasets" / "biome_bench_jsonl" / "config.vsh.yaml")
    known = {a.name for a in config.arguments}
    assert set(entry) - {"id"} <= known
    for existing in config.info["datasets"]:  # every configured species is arguments only
        assert set(existing) - {"id"} <= known, existing
    # As the engine runs an info.datasets entry: its keys as arguments, the shared folder as input.
    args = {k: v for k, v in entry.items() if k != "id"}
    out = must_run("datasets", "biome_bench_jsonl", tmp_path, dataset_id=entry["id"], shared_data=shared, **args)
    train, uns = read_items(out["output_train"])
    solution, _ = read_items(out["output_solution"])
    assert uns["dataset_organism"] == "rattus_norvegicus" and uns["dataset_name"] == "BIOME-Bench rat (rno)"
    assert "kg_rno.jsonl" in uns["dataset_description"] and "task_b_rno.jsonl" in uns["dataset_description"]
    assert {TASK_RELATION, TASK_MECHANISM} <= set(solution["task"]) and set(train["species"]) == {"rno"}
    files = {"input_train": out["output_train"], "input_test": out["output_test"], "input_solution": out["output_solution"]}
    positive = must_run("control_methods", "reference_answer", tmp_path / "pos", **files)["output"]
    rules = must_run("methods", "state_rules", tmp_path / "rules", input_train=files["input_train"], input_test=files["input_test"])["output"]
    for pred, expect_perfect in ((positive, True), (rules, False)):
        values = score_values(must_run("metrics", "relation_accuracy", tmp_path / pred.parent.name / "acc",
                                       input_solution=files["input_solution"], input_prediction=pred)["output"])
        assert (values["accuracy"] == 1.0 and values["macro_f1"] == 1.0) if expect_perfect else 0 <= values["accuracy"] < 1


@pytest.mark.slow
def test_benchmark_scores_both_tasks_between_controls(benchmark):
    results = benchmark["results"]
    assert results["failures"] == []
    raw = {(s["dataset_id"], s["method_id"], s["metric_id"]): s for s in results["scores"]}
    assert raw[("mmu_subset", "reference_answer", "accuracy")]["raw"] == 1.0
    assert raw[("mmu_subset", "random_or_empty", "accuracy")]["raw"] < 0.2
    rules = raw[("mmu_subset", "state_rules", "accuracy")]
    assert 0 < rules["scaled"] < 1 and rules["ci_low"] <= rules["raw"] <= rules["ci_high"]
    # Task A is not applicable to a dataset without Task A items: missing, not zero, and left out of the ranking.
    assert raw[("task_b_only", "state_rules", "accuracy")]["raw"] is None
    assert raw[("task_b_only", "state_rules", "accuracy")]["scaled"] is None
    assert {s["dataset_id"]: s["score"] for s in results["dataset_scores"] if s["method_id"] == "state_rules"}["task_b_only"] is None
