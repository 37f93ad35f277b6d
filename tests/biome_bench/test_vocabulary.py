"""Tests of biome_bench_lib.vocabulary: the fixed names the files and the judge use."""

from __future__ import annotations

from biome_bench_lib.vocabulary import JUDGE_DIMENSIONS, RELATION_INDEX, RELATIONS, TASK_MECHANISM, TASK_RELATION


def test_the_relation_vocabulary_is_the_papers_18_in_order():
    assert len(RELATIONS) == len(set(RELATIONS)) == 18
    assert RELATIONS[0] == "activates" and RELATIONS[-1] == "decreases_level"
    assert all(RELATIONS[i] == r for r, i in RELATION_INDEX.items()) and len(RELATION_INDEX) == 18


def test_item_kinds_and_judge_dimensions():
    # Written into every item file's `task` column and read back by every component.
    assert (TASK_RELATION, TASK_MECHANISM) == ("relation", "mechanism")
    assert JUDGE_DIMENSIONS == ("phenotype_coverage", "causal_reasoning", "factuality", "hallucination")
