"""The LLM methods (SUMMER, LLM (No CoT), LLM (No retrieval)) end to end against a local OpenAI-format server.

Each component runs through the harness's runner against :class:`openpert.testing.llm_server.OpenAIStubServer`
answering with ``src/perturbqa/llm_test_responder.py``'s ``respond`` (the responder of their component tests). The tests rebuild, for every test pair, the prompt
the library should send (with the stub's summaries and SUMMER's retrieval under the same seed)
and check the requests, then recompute every score from the stub's planned answers: the mean
committed label over non-abstaining samples, or the gene's training prevalence when all of a
pair's samples abstain or are unparseable.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
from perturbqa_lib.answer_parsing import ABSTAIN, parse_option_answer, parse_summer_answer
from perturbqa_lib.dataset_files import read_dataset
from perturbqa_lib.graph_retriever import Example, Retriever
from perturbqa_lib.knowledge_text import set_annotation
from perturbqa_lib.question_prompts import no_cot_prompt, no_retrieval_prompt, summer_prompt
from perturbqa_lib.task_items import training_pairs
from perturbqa_lib.training_prevalence import gene_prevalence

from openpert.config.viash import find_project_root, read_config
from openpert.run.component import run_component
from openpert.testing.llm_server import OpenAIStubServer, StubHTTPError

ROOT = find_project_root(Path(__file__).resolve())
RESOURCES = ROOT / "resources_test" / "perturbqa"
# Loaded from its file: every task's src/<task> is on the path, and module names there may repeat.
_spec = importlib.util.spec_from_file_location("perturbqa_llm_test_responder", ROOT / "src" / "perturbqa" / "llm_test_responder.py")
stub = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stub)

METHOD = {"summer": "summer", "llm_no_cot": "no_cot", "llm_no_retrieval": "no_retrieval"}

#: The test perturbations whose pair items the methods answer, for the datasets of many: k562_dir
#: crosses 24 test perturbations with 11 genes (264 direction items), k562_set_de 9 with 17 gene
#: sets. Every pair of a dataset takes the same code paths, and the requests, not the paths, cost:
#: two perturbations' pairs keep every path at a twelfth (k562_dir) and a fifth (k562_set_de) of
#: the requests. Under seed 0, SMN2's pairs are those whose retrieval holds no example of one label
#: (No CoT then draws one from the training pairs), and with RPP38's every method scores pairs both
#: from answers and by the prevalence fallback.
PARTS = {"k562_dir": ("RPP38", "SMN2"), "k562_set_de": ("AC118549.1", "MBNL1")}


@dataclasses.dataclass(frozen=True)
class Inputs:
    """A test dataset's files as a component reads them: those of ``resources_test``, but the test items."""

    dataset: str
    test: Path

    @property
    def folder(self) -> Path:
        """The dataset's folder of ``resources_test``, which holds its other files."""
        return RESOURCES / self.dataset


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Inputs]:
    """Each test dataset; of those in :data:`PARTS`, the items of those perturbations alone, written once."""
    folder = tmp_path_factory.mktemp("test_items")
    inputs = {}
    for dataset in ("k562_llm", "k562_dir", "k562_set_de"):
        test = RESOURCES / dataset / "test.h5ad"
        if dataset in PARTS:
            items = ad.read_h5ad(test)
            part = items[items.obs["pert"].isin(PARTS[dataset])].copy()
            assert set(part.obs["pert"]) == set(PARTS[dataset])
            test = folder / dataset / "test.h5ad"
            test.parent.mkdir()
            part.write_h5ad(test)
        inputs[dataset] = Inputs(dataset, test)
    return inputs


def run(name: str, inputs: Inputs, tmp_path: Path, cache: Path) -> tuple[ad.AnnData, list[dict]]:
    """Run a component on a test dataset against a fresh stub server; the prediction and the requests."""
    d = inputs.folder
    out = tmp_path / f"{name}_{inputs.dataset}.h5ad"
    config = read_config(ROOT / "src" / "perturbqa" / "methods" / name / "config.vsh.yaml")
    with OpenAIStubServer(stub.respond) as server:
        args = {"input_train": d / "train.h5ad", "input_test": inputs.test, "input_kg_edges": d / "kg_edges.parquet",
                "input_gene_descriptions": d / "gene_descriptions.parquet", "output": out,
                "llm_base_url": server.base_url, "llm_model": "stub-model", "llm_cache_dir": str(cache)}
        work = tmp_path / f"work_{name}_{inputs.dataset}_{len(list(tmp_path.glob('work_*')))}"
        result = run_component(config, args, work_dir=work, context={"file_test": inputs.test})
        requests = list(server.requests)
    assert result.succeeded, result.log.read_text()[-3000:]
    return ad.read_h5ad(out), requests


@functools.cache
def dataset_files(inputs: Inputs) -> tuple[ad.AnnData, ad.AnnData, pd.DataFrame]:
    """Training and test files and knowledge graph of a test dataset, read once for every check (none changes them)."""
    train, test = read_dataset(inputs.folder / "train.h5ad", inputs.test)
    return train, test, pd.read_parquet(inputs.folder / "kg_edges.parquet")


@functools.cache
def retrieved_examples(dataset: Inputs, subtask: str, seed: int) -> tuple[list[list[Example]], dict]:
    """SUMMER's retrieval for every test pair of a subtask under ``seed``, and the generator's state after it.

    The same for the checks of SUMMER and LLM (No CoT), which share it; No CoT goes on drawing
    from the returned state.
    """
    train, test, edges = dataset_files(dataset)
    items = test.obs[test.obs["subtask"] == subtask]
    perts, genes = items["pert"].tolist(), items["gene"].tolist()
    retriever = Retriever(training_pairs(train.obs, subtask), edges, train.uns["sets"])
    retriever.prepare(perts, genes)
    rng = np.random.default_rng(seed)
    retrieved = [retriever.retrieve(p, g, rng) for p, g in zip(perts, genes)]
    return retrieved, rng.bit_generator.state


def summary(entity: str) -> str:
    """What the stub answers to a summary prompt about ``entity``."""
    return f"Summary of {entity}: a gene with a cellular function."


def expected_prompts(method: str, subtask: str, items, dataset: Inputs, seed: int = 0) -> list[list[str]]:
    """The prompts the library should send for each pair item of ``dataset``, rebuilt from its parts."""
    train = dataset_files(dataset)[0]
    sets = train.uns["sets"]
    ctx, cell = train.uns["cell_line_description"], train.uns["cell_line"]
    pairs = training_pairs(train.obs, subtask)

    def s_g(g):
        return summary(set_annotation(g) if g in sets else g)

    perts, genes = items["pert"].tolist(), items["gene"].tolist()
    if method == "no_retrieval":
        return [[no_retrieval_prompt(subtask, summary(p), s_g(g), ctx, h) for h in (0, 1)] for p, g in zip(perts, genes)]
    retrieved, state = retrieved_examples(dataset, subtask, seed)
    rng = np.random.default_rng(seed)
    rng.bit_generator.state = state
    if method == "summer":
        return [[summer_prompt(subtask, p, g, summary(p), s_g(g), cell, ctx,
                               [(e.pert, e.gene, summary(e.pert), s_g(e.gene), e.label) for e in ex])]
                for p, g, ex in zip(perts, genes, retrieved)]
    out = []
    for p, g, ex in zip(perts, genes, retrieved):
        two = []
        for label in (0, 1):
            found = next((e for e in ex if e.label == label), None)
            if found is None:
                i = int(rng.choice(np.flatnonzero(pairs["label"].to_numpy() == label)))
                found = Example(pairs["pert"].iloc[i], pairs["gene"].iloc[i], label, 0)
            two.append(found)
        out.append([no_cot_prompt(subtask, summary(p), s_g(g), ctx, [(summary(e.pert), s_g(e.gene), e.label) for e in two])])
    return out


def check(name: str, dataset: Inputs, pred: ad.AnnData, requests: list[dict]) -> dict[str, int]:
    """Check requests and scores of one run; count items scored from answers and by fallback."""
    train, test, _ = dataset_files(dataset)
    assert all(r["model"] == "stub-model" for r in requests)
    questions = {r["messages"][-1]["content"]: r for r in requests
                 if stub.kind(r["messages"][-1]["content"]) in ("summer", "no_cot", "no_retrieval")}
    assert all(r["n"] == 3 and r["temperature"] == 0.6 and r["top_p"] == 0.9 for r in questions.values())
    assert all(r["n"] == 1 for r in requests if stub.kind(r["messages"][-1]["content"]) in ("summary", "gene_set"))
    counts = {"answered": 0, "fallback": 0}
    abstained = 0
    sent = set()
    for subtask in ("de", "dir"):
        items = test.obs[test.obs["subtask"] == subtask]
        if items.empty:
            continue
        per_gene, overall = gene_prevalence(train.obs, subtask)
        prompts = expected_prompts(METHOD[name], subtask, items, dataset)
        for item, gene, item_prompts in zip(items.index, items["gene"], prompts):
            assert all(p in questions for p in item_prompts), f"{name}: prompt of {item} differs from the library's"
            sent.update(item_prompts)
            labels = [v for p in item_prompts for v in stub.plan(p) if v in (0, 1)]
            abstained += 3 * len(item_prompts) - len(labels)
            if labels:
                want, key = float(np.mean(labels)), "answered"
            else:
                want, key = float(per_gene.get(gene, overall)), "fallback"
            counts[key] += 1
            assert pred.obs.loc[item, "score"] == pytest.approx(want, abs=1e-12), item
    assert sent == set(questions), "requests for questions that are not test pairs"
    scores = pred.obs["score"].to_numpy()
    pair = test.obs["subtask"].isin(["de", "dir"]).to_numpy()
    assert np.isfinite(scores[pair]).all() and ((scores[pair] >= 0) & (scores[pair] <= 1)).all()
    assert np.isnan(scores[~pair]).all()
    # The account the component wrote: its questions, samples and fallbacks are the ones recomputed here.
    usage = dict(pred.uns["llm_usage"])
    n_samples = 6 if name == "llm_no_retrieval" else 3
    assert usage["questions"] == counts["answered"] + counts["fallback"] and usage["fallbacks"] == counts["fallback"]
    assert usage["samples"] == n_samples * usage["questions"]
    assert usage["abstentions"] == abstained
    assert usage["prompt_tokens"] > 0 and usage["unmetered"] == 0 and usage["retries"] == 0
    assert usage["requests"] == len(requests) and usage["generated"] + usage["cache_hits"] <= usage["prompts"]
    return counts


@pytest.mark.parametrize("name", list(METHOD))
def test_llm_method_end_to_end_and_cache(tmp_path, datasets, name):
    totals = {"answered": 0, "fallback": 0}
    cache = tmp_path / "cache"
    # Gene-set downstream entities (K562-set) share every code path but the summaries; SUMMER covers them.
    # k562_llm holds de items and gene clusters in 4 items, k562_dir direction items (of PARTS): every
    # kind of item, at a fraction of the requests of k562 (720 de items).
    names = ("k562_llm", "k562_dir", "k562_set_de") if name == "summer" else ("k562_llm", "k562_dir")
    for dataset in names:
        pred, requests = run(name, datasets[dataset], tmp_path, cache)
        for k, v in check(name, datasets[dataset], pred, requests).items():
            totals[k] += v
        if name == "llm_no_cot" and dataset == "k562_dir":
            # The path of a question whose retrieval lacks one label's example ran (its prompt was checked).
            retrieved, _ = retrieved_examples(datasets[dataset], "dir", 0)
            assert any({e.label for e in ex} != {0, 1} for ex in retrieved)
        if dataset == "k562_llm":
            first = pred
            gse = first.obs.index.str.startswith("gse_")
            assert gse.any(), "k562_llm holds gene clusters"
            texts = first.obs["text"].to_numpy()[gse]
            if name == "summer":
                # Parsed from the stub's gene-set description: name, then brief overview.
                assert (texts == "Shared pathway genes. The genes share a pathway.").all()
                described = [r for r in requests if stub.kind(r["messages"][-1]["content"]) == "gene_set"]
                assert len(described) == gse.sum()
            else:
                assert (texts == "").all()
    # Both paths ran: scores from parsed answers, and the prevalence fallback.
    assert totals["answered"] > 0 and totals["fallback"] > 0, totals
    # The generation cache: the same run again sends nothing and writes the same prediction.
    again, requests = run(name, datasets["k562_llm"], tmp_path, cache)
    assert requests == []
    np.testing.assert_array_equal(again.obs["score"].to_numpy(), first.obs["score"].to_numpy())
    np.testing.assert_array_equal(again.obs["text"].to_numpy(), first.obs["text"].to_numpy())


def test_stub_answers_parse_as_planned():
    """The stub's committed answers parse to their label, its abstentions and garbage to ABSTAIN."""
    for subtask in ("de", "dir"):
        for label, want in ((1, 1), (0, 0), ("abstain", ABSTAIN), ("garbage", ABSTAIN)):
            assert parse_summer_answer(stub.summer_answer(label, subtask, "P1", "G1"), subtask, "P1", "G1") == want
            for sections in (True, False):
                assert parse_option_answer(stub.option_answer(label, subtask, sections), subtask) == want


def test_questions_longer_than_the_context_window_fall_back_and_are_named(tmp_path, datasets):
    inputs = datasets["k562_dir"]
    d = inputs.folder
    train, test, _ = dataset_files(inputs)
    pert = str(test.obs["pert"].iloc[0])
    refused = test.obs.index[(test.obs["pert"] == pert) | (test.obs["gene"] == pert)]
    too_long = ("This model's maximum context length is 8192 tokens. However, you requested 9290 tokens (9034 in the "
                "messages, 256 in the completion). Please reduce the length of the messages or completion.")

    def responder(request):
        prompt = request["messages"][-1]["content"]
        if stub.kind(prompt) == "no_retrieval" and f"Summary of {pert}:" in prompt:
            raise StubHTTPError(400, too_long)
        return stub.respond(request)

    config = read_config(ROOT / "src" / "perturbqa" / "methods" / "llm_no_retrieval" / "config.vsh.yaml")
    out = tmp_path / "prediction.h5ad"
    with OpenAIStubServer(responder) as server:
        args = {"input_train": d / "train.h5ad", "input_test": inputs.test, "input_kg_edges": d / "kg_edges.parquet",
                "input_gene_descriptions": d / "gene_descriptions.parquet", "output": out,
                "llm_base_url": server.base_url, "llm_model": "stub-model", "llm_cache_dir": "none"}
        result = run_component(config, args, work_dir=tmp_path / "work", context={"file_test": inputs.test})
    assert result.succeeded, result.log.read_text()[-3000:]
    pred = ad.read_h5ad(out)
    said = "prompt of 9034 tokens is longer than the model's context window of 8192 tokens; answered as an abstention"
    expected = sorted(f"item {i} (hypothesis {h}): {said}" for i in refused for h in (0, 1))
    assert sorted(pred.uns["llm_failures"]) == expected and all(line in result.log.read_text() for line in expected)
    # Both hypotheses of those questions were refused: every sample abstained, and the gene's prevalence scores them.
    per_gene, overall = gene_prevalence(train.obs, "dir")
    for item in refused:
        assert pred.obs.loc[item, "score"] == pytest.approx(per_gene.get(test.obs.loc[item, "gene"], overall))
    usage = dict(pred.uns["llm_usage"])
    assert (usage["failed"], usage["context_window"]) == (2 * len(refused), 8192)
    assert usage["fallbacks"] >= len(refused) and usage["abstentions"] >= 6 * len(refused)
