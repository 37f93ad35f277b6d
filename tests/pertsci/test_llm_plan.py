"""Tests of pertsci.llm_plan: prompt ordering, token counts, prefix sharing and plan lines."""

from __future__ import annotations

import json

import pytest

from pertsci.llm_plan import (
    PLAN_MARK,
    TokenCounter,
    placeholder_answer,
    plan_line,
    plan_requests,
    prefix_order,
    prompt_text,
)


@pytest.fixture
def word_tokenizer(tmp_path):
    """A real tokenizer.json: a word-level model over a small vocabulary, split on whitespace."""
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "gene": 1, "KRAS": 2, "TP53": 3, "up": 4, "down": 5, "in": 6, "K562": 7}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def test_prompt_text_keeps_roles_and_order():
    text = prompt_text([{"role": "system", "content": "be brief"}, {"role": "user", "content": "KRAS?"}])
    assert text == "system\nbe brief\nuser\nKRAS?\n"


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_prefix_order_groups_shared_prefixes_and_is_stable():
    texts = ["TP53 a", "KRAS b", "TP53 b", "KRAS a", "KRAS a"]
    assert prefix_order([user(t) for t in texts]) == [3, 4, 1, 0, 2]
    # Message by message: a shared system message groups before the user's text is compared.
    system = [{"role": "system", "content": "be brief"}]
    assert prefix_order([system + user("b"), user("a"), system + user("a")]) == [2, 0, 1]


def test_approximate_count_and_shared_prefix():
    counter = TokenCounter(None)
    assert not counter.exact and "characters / 4" in counter.method
    assert counter.count("x" * 9) == 3
    # 16 shared characters between the first two, none with the third: 4 tokens.
    assert counter.shared_prefix_tokens(["a" * 16 + "xy", "a" * 16 + "z", "b"]) == 4


def test_tokenizer_counts_tokens_and_token_prefixes(word_tokenizer):
    counter = TokenCounter(word_tokenizer)
    assert counter.exact and str(word_tokenizer) in counter.method
    assert counter.count("gene KRAS up in K562") == 5
    assert counter.shared_prefix_tokens(["gene KRAS up", "gene KRAS down", "gene TP53 up"]) == 2 + 1


def test_tokenizer_from_environment_and_bad_files(monkeypatch, tmp_path, word_tokenizer):
    monkeypatch.setenv("OPENPERT_LLM_TOKENIZER", str(word_tokenizer))
    assert TokenCounter().exact
    with pytest.raises(FileNotFoundError, match="no tokenizer file"):
        TokenCounter(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="bad.json: not a tokenizer.json"):
        TokenCounter(bad)


def test_plan_counts_samples_tokens_and_what_ordering_saves():
    context = {p: f"{p} context " * 20 for p in ("KRAS", "TP53")}
    texts = [f"{context[p]}gene {g}" for g in ("A", "B", "C") for p in ("KRAS", "TP53")]
    plan = plan_requests([user(t) for t in texts], 3, TokenCounter(None), max_tokens=100, repeated=2)
    assert (plan["requests"], plan["repeated"], plan["samples"]) == (6, 2, 18)
    assert plan["max_completion_tokens"] == 1800
    assert plan["prompt_tokens"] == sum(-(-len(f"user\n{t}\n") // 4) for t in texts)
    assert plan["max_prompt_tokens"] == -(-len(f"user\n{texts[0]}\n") // 4)
    # Interleaved, consecutive prompts share only "user\n"; sorted, each perturbation's three
    # prompts share its context.
    assert plan["shared_prefix_tokens_caller_order"] == 5 * (len("user\n") // 4)
    shared = len("user\n") + len(context["KRAS"]) + len("gene ")
    # (the last KRAS prompt and the first TP53 one share "user\n" only)
    assert plan["shared_prefix_tokens_prefix_order"] == 4 * (shared // 4) + len("user\n") // 4


def test_plan_names_its_longest_prompt():
    texts = ["short", "a much longer prompt " * 10, "medium length"]
    plan = plan_requests([user(t) for t in texts], 1, TokenCounter(None))
    assert plan["max_prompt_tokens"] == -(-len(f"user\n{texts[1]}\n") // 4)
    assert plan_requests([], 1, TokenCounter(None))["max_prompt_tokens"] == 0


def test_plan_line_is_the_mark_then_json():
    line = plan_line({"samples": 6, "requests": 2})
    assert line.startswith(PLAN_MARK) and json.loads(line[len(PLAN_MARK):]) == {"requests": 2, "samples": 6}


def test_placeholder_answers_differ_by_prompt_so_prompts_built_from_them_stay_apart():
    kras, tp53 = placeholder_answer(200, "summarise KRAS"), placeholder_answer(200, "summarise TP53")
    assert kras != tp53 and kras == placeholder_answer(200, "summarise KRAS")
    assert len(kras) == len(tp53) == 200


def test_placeholder_answer_length(monkeypatch):
    assert len(placeholder_answer(2500)) == 2500 and placeholder_answer(0) == ""
    monkeypatch.setenv("OPENPERT_LLM_DRY_RUN_ANSWER_CHARS", "12")
    assert len(placeholder_answer()) == 12
    monkeypatch.setenv("OPENPERT_LLM_DRY_RUN_ANSWER_CHARS", "many")
    with pytest.raises(ValueError, match="expected a whole number"):
        placeholder_answer()
