"""Tests of biome_bench_lib.entity_lists: Task B entity lists and entity states."""

from __future__ import annotations

from biome_bench_lib.entity_lists import entity_name_state, split_entity_list


def test_entity_lists_split_outside_parentheses():
    text = "STAT3 (dephosphorylated, Tyr705), 1,25-dihydroxyvitamin D3, MYCL (expression reduced), Gsk-650394."
    entities = split_entity_list(text)
    assert entities == ["STAT3 (dephosphorylated, Tyr705)", "1,25-dihydroxyvitamin D3", "MYCL (expression reduced)", "Gsk-650394"]
    assert entity_name_state(entities[0]) == ("STAT3", "dephosphorylated, Tyr705")
    assert entity_name_state("IL-6 (R) receptor (blocked)") == ("IL-6 (R) receptor", "blocked")
    assert entity_name_state("CTSK") == ("CTSK", "")


def test_a_lone_parenthesis_is_no_state():
    assert entity_name_state("(elevated)") == ("(elevated)", "")
    assert split_entity_list("") == []
