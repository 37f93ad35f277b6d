"""``openpert benchmark`` on the bundled PerturbQA resources against a local server: abstentions on the record.

One run on the direction dataset (k562_dir) with two language-model methods and the same server:
LLM (No CoT)'s questions are answered in the paper's format (appendix C.2), LLM (No retrieval)'s
with the answer to the other subtask's question ("Yes. ..." / "B) ... differential expression",
the Yes/No answers a model gives a direction question). The first must carry no flag and no
abstention; the second an ``llm_abstentions`` QC flag naming method, dataset and rate in
``results.json``, and the website must show the flag, the usage table and the mark beside the
method on the dataset's leaderboard.
"""

from __future__ import annotations

import importlib.util
import json

from project_paths import ROOT

from openpert.cli import main
from openpert.testing.llm_server import OpenAIStubServer

_spec = importlib.util.spec_from_file_location("perturbqa_llm_test_responder", ROOT / "src" / "perturbqa" / "llm_test_responder.py")
stub = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stub)

PAPER = stub.styled_responder("paper")
WRONG = stub.styled_responder("wrong_subtask")


def responder(request: dict) -> list[str]:
    """No CoT's prompts in the paper's format; No retrieval's as answers to the other subtask."""
    prompt = request["messages"][-1]["content"]
    return WRONG(request) if stub.kind(prompt) == "no_retrieval" else PAPER(request)


def test_benchmark_flags_unreadable_answers_and_shows_them(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("OPENPERT_LLM_CACHE", str(tmp_path / "llm_cache"))
    out, site = tmp_path / "results", tmp_path / "site"
    with OpenAIStubServer(responder) as server:
        monkeypatch.setenv("OPENPERT_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENPERT_LLM_MODEL", "stub-model")
        code = main(["benchmark", "--task", "perturbqa", "--input", "resources_test/perturbqa", "--datasets", "k562_dir",
                     "--methods", "llm_no_cot", "llm_no_retrieval", "--controls", "ground_truth", "--metrics", "auroc",
                     "-o", str(out), "--sandbox", "off", "-j", "2", "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    results = json.loads((out / "perturbqa" / "results.json").read_text())
    assert results["failures"] == []
    usage = {r["method_id"]: r for r in results["llm_usage"]}
    assert set(usage) == {"llm_no_cot", "llm_no_retrieval"}
    paper, wrong = usage["llm_no_cot"], usage["llm_no_retrieval"]
    # k562_dir's direction questions, three samples each; No retrieval asks each twice (one per hypothesis).
    assert paper["questions"] == wrong["questions"] > 0
    assert paper["samples"] == 3 * paper["questions"] and wrong["samples"] == 6 * wrong["questions"]
    assert paper["abstentions"] == 0 and paper["fallbacks"] == 0 and paper["abstention_rate"] == 0.0
    assert wrong["abstentions"] == wrong["samples"] and wrong["fallbacks"] == wrong["questions"]
    for row in (paper, wrong):
        assert row["stage"] == "method" and row["dataset_id"] == "k562_dir"
        assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0 and row["unmetered"] == 0
        # The methods share gene summaries through the generation cache: what one generated, the other may read.
        assert row["requests"] == row["generated"] and row["generated"] + row["cache_hits"] == row["prompts"]
        assert row["retries"] == 0
    flags = [q for q in results["qc"] if q["flag"] == "llm_abstentions"]
    assert [(q["method_id"], q["dataset_id"]) for q in flags] == [("llm_no_retrieval", "k562_dir")]
    message = flags[0]["message"]
    # The terminal summary says it under the tables.
    assert f"QC llm_abstentions: {message}" in printed and message.count(f"{wrong['samples']} of {wrong['samples']} answers") == 1
    assert "llm_no_retrieval on k562_dir" in message and "(100.0%)" in message and "mostly the fallback's" in message

    assert main(["report", str(out / "perturbqa"), "-o", str(site)]) == 0
    page = (site / "perturbqa" / "index.html").read_text()
    assert 'id="table-llm-usage"' in page and 'id="table-qc"' in page
    assert "llm_abstentions" in page and "llm_no_retrieval on k562_dir" in page
    # Marked beside the method in the overview, on the dataset's leaderboard and in the usage table; No CoT nowhere.
    assert page.count('class="tag tag-abstains" title="llm_no_retrieval on k562_dir') == 3
    assert page.count('class="tag tag-abstains"') == 3
    for mark in (">abstains on 1 dataset</span>", ">score mostly fallback</span>", ">flagged</span>"):
        assert page.count(mark) == 1, mark
