"""The seeded generators (spec §4): counts, names, determinism, the shared instance ids, the rules."""

from __future__ import annotations

from collections import Counter
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from abstraction.core import generators as g
from abstraction.core import prompts
from tests.data_paths import ABSTRACTION_LAYOUT

MA = [g.Problem(f"p{i}", f"What is {i} + 1?", str(i + 1)) for i in range(1319)]


@cache
def _full(seed: int = 42) -> list[g.Instance]:
    return list(g.generate(seed=seed, ma_problems=MA))


def test_the_full_benchmark_has_the_papers_82_sub_datasets_and_9095_items():
    items = _full()
    subs = Counter(i.sub_dataset for i in items)
    assert len(items) == 9095 and len(subs) == 82
    per_cat = Counter(i.category for i in items)
    assert per_cat == {"BC": 384, "EC": 1536, "NBR": 1152, "MA": 1319, "SMA": 672, "SR": 4032}
    assert {s: n for s, n in subs.items() if n != 96} == {"dataset_gsm8k": 1319}
    assert len({(i.sub_dataset, i.index) for i in items}) == 9095


@settings(max_examples=5, deadline=None)
@given(st.integers(min_value=0, max_value=2**31), st.sampled_from(["repo", "clean"]))
def test_the_generator_is_deterministic_per_seed(seed, mode):
    first = list(g.generate(["EC", "SR", "SMA"], seed=seed, remap_mode=mode, per_sub_dataset=2))
    again = list(g.generate(["EC", "SR", "SMA"], seed=seed, remap_mode=mode, per_sub_dataset=2))
    assert first == again
    other = list(g.generate(["EC", "SR", "SMA"], seed=seed + 1, remap_mode=mode, per_sub_dataset=2))
    assert first != other


def test_every_variant_of_an_instance_is_the_same_raw_problem():
    raw = {(i.task, i.index): i for i in _full() if i.category == "EC" and i.task in g.PAIRED_TASKS}
    sr = [i for i in _full() if i.category == "SR"]
    assert len(sr) == 3 * len(raw)
    for inst in sr:
        base = raw[(inst.task, inst.index)]
        assert len(inst.examples) == len(base.examples) and inst.operator == base.operator


def test_per_sub_dataset_keeps_the_first_n_instances_of_each():
    items = list(g.generate(seed=42, ma_problems=MA, per_sub_dataset=4))
    assert Counter(i.sub_dataset for i in items) == {s: 4 for s in Counter(i.sub_dataset for i in items)}
    assert len(items) == 82 * 4
    full = {(i.sub_dataset, i.index): i for i in _full()}
    assert all(full[(i.sub_dataset, i.index)] == i for i in items)


def test_the_answers_follow_the_rules_of_the_repository():
    assert g.shift("00000110", "circular_right_shift", 0) == "00000110"
    assert g.shift("0100011", "arithmetic_left_shift", 1) == "1000110"
    assert g.shift("10000000", "arithmetic_right_shift", 2) == "11100000"
    assert g.bit_op("01000110", "check_bit", 1) == "True"
    assert g.bit_op("01", "check_bit", 0) == "True"
    assert g.bit_op("0000", "set_bit", 3) == "1000"
    assert g.to_base(25, 3) == "221" and g.to_base(-12, 4) == "-30"
    assert g.fmt_set(set()) == "{}" and g.fmt_set({5, 2}) == "{2, 5}"
    assert g.is_subsequence("ace", "abcde") and not g.is_subsequence("aec", "abcde")
    by_sub = {}
    for i in _full():
        by_sub.setdefault(i.sub_dataset, i)
    bit = by_sub["fixed_len_chat_bit_raw_dataset"]
    assert all(len(s) == 8 for s in bit.question.replace(" =", "").split() if set(s) <= {"0", "1"})
    assert by_sub["chat_add_base3_raw_dataset"].hint == "\nHint: This is base 3 operation.\n"
    a, b = (int(x, 3) for x in by_sub["chat_add_base3_raw_dataset"].question[:-2].split(" + "))
    assert g.to_base(a + b, 3) == by_sub["chat_add_base3_raw_dataset"].answer
    assert by_sub["fixed_len_chat_str_raw_dataset"].operator == "conut"  # the repository's spelling


def test_the_paper_mode_of_sma_uses_one_function_per_instance_and_the_repo_mode_does_not():
    paper = next(i for i in g.generate(["SMA"], sma_mode="paper", per_sub_dataset=1) if i.sub_dataset == "chat_linear_dataset")
    pairs = [(int(q.split()[1]), int(a)) for q, a in paper.examples]
    (x0, y0), (x1, y1) = pairs[0], pairs[1]
    slope = (y1 - y0) // (x1 - x0)
    assert all(y == slope * x + (y0 - slope * x0) for x, y in pairs)
    repo = next(i for i in g.generate(["SMA"], sma_mode="repo", per_sub_dataset=1) if i.sub_dataset == "chat_linear_dataset")
    pairs = [(int(q.split()[1]), int(a)) for q, a in repo.examples]
    slopes = {(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(pairs, pairs[1:], strict=False) if b[0] != a[0]}
    assert len(slopes) > 1


def test_the_classification_of_published_names():
    assert g.classify("fixed_len_chat_bit_raw_dataset") == ("EC", "fixed_len_chat_bit", "raw")
    assert g.classify("fixed_len_chat_bit_dataset") == ("SR", "fixed_len_chat_bit", "all")
    assert g.classify("fixed_len_chat_bit_num_dataset") == ("SR", "fixed_len_chat_bit", "num")
    assert g.classify("var_len_chat_list_cnt_op_dataset") == ("SR", "var_len_chat_list_cnt", "op")
    assert g.classify("chat_square_dataset") == ("EC", "chat_square_dataset", "raw")
    assert g.classify("var_len_chat_data_raw_dataset") == ("EC", "var_len_chat_data_raw", "raw")
    assert g.classify("chat_linear_dataset") == ("SMA", "chat_linear", "raw")
    with pytest.raises(ValueError, match="unknown sub-dataset"):
        g.classify("chat_base3_dataset")  # A10: written by the generator but not one of the 82


def test_it_rejects_unknown_categories_and_modes():
    with pytest.raises(ValueError, match="category"):
        list(g.generate(["XX"]))
    with pytest.raises(ValueError, match="SMA mode"):
        list(g.generate(["SMA"], sma_mode="odd"))


def test_the_dp_and_cot_prompts_are_the_published_chat_turns():
    inst = next(i for i in g.generate(["NBR"], per_sub_dataset=1) if i.sub_dataset == "chat_add_base5_raw_dataset")
    dp = prompts.messages(inst, "dp")
    assert len(dp) == 2 + 2 * len(inst.examples) and len(inst.examples) == 50
    assert dp[0]["content"] == prompts.SYSTEM_DP + "\nHint: This is base 5 operation.\n"
    assert dp[1] == {"role": "user", "content": f"\nHint: This is base 5 operation.\nQuestion: {inst.examples[0][0]}\n\n"}
    assert dp[2] == {"role": "assistant", "content": f"Answer: The answer is {inst.examples[0][1]}.\n\n"}
    assert dp[-1]["content"].endswith(f"Question: {inst.question}\n\n")
    cot = prompts.messages(inst, "cot")
    assert cot[0]["content"] == prompts.SYSTEM_COT
    assert cot[-1]["content"].endswith(f"Question: {inst.question}\n\nLet's think step by step. \n\n")
    ma = g.Instance("MA", "dataset_gsm8k", "dataset_gsm8k", "raw", 0, (), "Q?", "3")
    assert prompts.messages(ma, "dp") == [{"role": "system", "content": prompts.SYSTEM_MA_DP},
                                          {"role": "user", "content": "Q?"}]
    shot = prompts.messages(ma, "cot", gsm8k_exemplars=[{"question": "a", "answer": "b The answer is 1."}])
    assert shot[1]["content"] == "Q: a\nA: b The answer is 1.\n\nQ: Q?\nA:\n"


def _published_layout() -> list[str]:
    return [line for line in ABSTRACTION_LAYOUT.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_generation_uses_exactly_the_82_published_folder_names():
    # Issue 23: the published tree names its SMA folders chat_<f>_dataset and
    # the dates task var_len_chat_data_raw_dataset; every name must match.
    layout = _published_layout()
    assert len(layout) == 82
    generated = {f"{g.LEVEL_OF[i.category]}/{i.sub_dataset}" for i in _full()}
    assert generated == set(layout)
    listed = {f"{g.LEVEL_OF[c]}/{s}" for c in g.CATEGORIES for s in g.sub_datasets(c)}
    assert listed == set(layout)


def test_every_published_folder_name_classifies_into_its_level():
    for line in _published_layout():
        level, name = line.split("/")
        category, task, variant = g.classify(name)
        assert g.LEVEL_OF[category] == level, line
