"""Symbol remapping (spec §6): property tests over generated instances and arbitrary texts."""

from __future__ import annotations

import random
import string
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from abstraction.core import generators as g
from abstraction.core import remap as rm

TASKS = st.sampled_from(g.PAIRED_TASKS)
SEEDS = st.integers(min_value=0, max_value=40)
INDEX = st.integers(min_value=0, max_value=3)
VARIANT = st.sampled_from(rm.VARIANTS)
MODE = st.sampled_from(rm.MODES)


@cache
def _task(task: str, seed: int) -> list[g.Instance]:
    return g._ec_raw(task)(seed)


def _raw(task: str, seed: int, index: int) -> g.Instance:
    return _task(task, seed)[index]


@settings(max_examples=60, deadline=None)
@given(TASKS, SEEDS, INDEX, VARIANT, MODE)
def test_a_remap_is_injective(task, seed, index, variant, mode):
    inst = g.remapped(_raw(task, seed, index), variant, mode, seed)
    table = dict(inst.remap.chars)
    assert len(set(table.values())) == len(table)
    if inst.remap.token:
        assert inst.remap.token[0] != inst.remap.token[1] or not inst.remap.token[0]


@settings(max_examples=60, deadline=None)
@given(TASKS, SEEDS, INDEX, VARIANT, MODE)
def test_the_gold_of_a_remapped_item_is_the_remapped_raw_gold(task, seed, index, variant, mode):
    raw = _raw(task, seed, index)
    inst = g.remapped(raw, variant, mode, seed)
    assert inst.answer == rm.apply(inst.remap, raw.answer)
    assert inst.question == rm.apply(inst.remap, raw.question)
    assert inst.index == raw.index and inst.task == raw.task  # the shared instance id


@settings(max_examples=80, deadline=None)
@given(TASKS, SEEDS, INDEX, VARIANT)
def test_un_remapping_a_clean_remap_gives_the_raw_item_back(task, seed, index, variant):
    raw = _raw(task, seed, index)
    inst = g.remapped(raw, variant, "clean", seed)
    original = rm.symbols(raw.texts())
    assert rm.invert(inst.remap, inst.question, original) == raw.question
    assert rm.invert(inst.remap, inst.answer, original) == raw.answer
    assert [(rm.invert(inst.remap, q), rm.invert(inst.remap, a)) for q, a in inst.examples] == list(raw.examples)


@settings(max_examples=80, deadline=None)
@given(TASKS, SEEDS, INDEX, VARIANT)
def test_un_remapping_a_repo_remap_gives_the_raw_item_back_or_names_the_ambiguity(task, seed, index, variant):
    raw = _raw(task, seed, index)
    inst = g.remapped(raw, variant, "repo", seed)
    original = rm.symbols(raw.texts())
    try:
        back = rm.invert(inst.remap, inst.question, original)
    except rm.AmbiguousRemap:
        # Spec §6.3 (b): only a partial repo remap can send a symbol onto one left unmapped.
        assert variant != "all"
        assert set(dict(inst.remap.chars).values()) & (original - set(dict(inst.remap.chars)))
        return
    assert back == raw.question
    assert rm.invert(inst.remap, inst.answer, original) == raw.answer


def test_the_all_remap_of_the_repo_mode_always_inverts():
    for task in g.PAIRED_TASKS:
        for raw in g._ec_raw(task)(7)[:5]:
            inst = g.remapped(raw, "all", "repo", 7)
            assert rm.invert(inst.remap, inst.answer, rm.symbols(raw.texts())) == raw.answer


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet=string.printable, max_size=30), min_size=1, max_size=6), SEEDS)
def test_an_all_remap_of_any_text_is_a_bijection_on_its_symbols(texts, seed):
    syms = rm.symbols(texts)
    if len(syms) > len(rm.POOL):
        return
    r = rm.build(texts, "", "all", "repo", random.Random(seed), "item")
    assert set(dict(r.chars)) == syms
    assert [rm.invert(r, rm.apply(r, t)) for t in texts] == texts


def test_the_operator_remap_of_the_repo_touches_operand_characters_of_the_operator_name():
    # Spec §6.2: the 'e' of "True" is a character of check_bit, so it is remapped too.
    raw = next(i for i in g._ec_raw("fixed_len_chat_bitop")(42) if i.operator == "check_bit" and i.answer == "True")
    inst = g.remapped(raw, "op", "repo", 42)
    assert inst.answer[:3] == "Tru" and inst.answer[3] != "e"
    assert "check_bit" not in inst.question
    assert inst.question.split()[0] == raw.question.split()[0]  # the operand is untouched


def test_the_clean_modes_leave_what_they_do_not_remap_alone():
    raw = g._ec_raw("fixed_len_chat_bitop")(42)[0]
    op = g.remapped(raw, "op", "clean", 42)
    assert op.answer == raw.answer and raw.operator not in op.question and op.question.endswith(" =")
    num = g.remapped(raw, "num", "clean", 42)
    assert raw.operator in num.question and num.question.endswith(" =")
    assert num.question.split()[0] != raw.question.split()[0]


def test_it_rejects_an_instance_with_more_symbols_than_the_pool_naming_the_item():
    texts = [string.printable[:70]]
    with pytest.raises(rm.RemapError, match=r"var_len_chat_str_dataset\[3\].*distinct symbols"):
        rm.build(texts, "", "all", "repo", random.Random(0), "var_len_chat_str_dataset[3]")


def test_it_rejects_an_unknown_mode_and_variant():
    with pytest.raises(ValueError, match="remap mode"):
        rm.build(["a"], "", "all", "fancy", random.Random(0), "x")
    with pytest.raises(ValueError, match="variant"):
        rm.build(["a"], "", "most", "repo", random.Random(0), "x")
