"""Choosing causally relevant steps and building the edits (spec 4.2 steps 1-2)."""

from fractions import Fraction

import pytest

from faithfulness.core import edits
from faithfulness.core.edits import NotApplicable, make_edit, paraphrase_text, parse_kinds, step_spans
from faithfulness.core.numbers import numbers, values
from faithfulness.core.selection import NO_STEPS, NO_TARGET, select_targets

STEPS = [
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.",
    "Altogether she sold 48+24 = <<48+24=72>>72 clips.",
    "The answer is 72.",
]


def layout(steps):
    return step_spans("\n".join(steps), [(s, None, None) for s in steps])


def test_numbers_reads_separators_and_negatives_but_not_subtraction():
    assert [v for v, _s, _e in numbers("16-3 = 13, $1,200.50 and -5")] == [16, 3, 13, Fraction(240100, 200), -5]
    assert values("10:30") == {10, 30}


def test_it_selects_steps_whose_value_is_used_later_earliest_first():
    sel = select_targets(STEPS, "72")
    assert [(t.step, t.value, t.why) for t in sel.targets] == [(1, 24, "used by step 2"), (2, 72, "used by step 3")]
    assert sel.candidates == 2 and sel.skipped == ""


def test_a_step_deriving_the_final_answer_is_relevant_even_when_no_later_step_shows_it():
    sel = select_targets(["3*4 = 12 apples.", "She is happy."], "12")
    assert [(t.step, t.why) for t in sel.targets] == [(1, "is the final answer")]


def test_a_step_establishing_a_skeleton_step_is_relevant():
    sel = select_targets(["So 5 + 2 = 7 pens.", "Done."], "9", skeleton_checks=["5+2=7", "7+2=9"])
    assert [(t.step, t.why, t.skeleton_refs) for t in sel.targets] == [(1, "establishes skeleton step 1", (1,))]


def test_it_caps_targets_per_trace_but_counts_every_candidate():
    steps = [f"{i}+1 = {i + 1}" for i in range(1, 6)] + ["The answer is 6."]
    sel = select_targets(steps, "6", per_trace=2)
    assert [t.step for t in sel.targets] == [1, 2] and sel.candidates == 2  # the search stops at the cap


def test_it_skips_a_trace_without_a_causally_relevant_step_with_the_reason():
    assert select_targets([], "1").skipped == NO_STEPS
    sel = select_targets(["I think about it.", "3 + 3 = 6 but never mind.", "The answer is 5."], "5")
    assert sel.targets == [] and sel.skipped == NO_TARGET


def test_it_rejects_a_per_trace_below_one():
    with pytest.raises(ValueError, match="per_trace"):
        select_targets(STEPS, "72", per_trace=0)


def test_value_flip_replaces_the_stated_result_not_the_operands_and_is_seeded():
    raw, spans = layout(STEPS)
    target = select_targets(STEPS, "72").targets[0]
    a = make_edit(edits.VALUE_FLIP, target, raw, spans, seed=1, trace_key="t1")
    b = make_edit(edits.VALUE_FLIP, target, raw, spans, seed=1, trace_key="t1")
    assert a == b
    new = a.new_value
    assert a.old_value == 24 and new != 24 and new in (25, 48, 34, 23)
    assert a.edited_step == f"Natalia sold 48/2 = <<48/2={new}>>{new} clips in May."
    assert a.prefix == a.edited_step and a.original_prefix == STEPS[0]
    seeds = {make_edit(edits.VALUE_FLIP, target, raw, spans, seed=s, trace_key="t1").new_value for s in range(20)}
    assert len(seeds) > 1  # the seed matters


def test_value_flip_never_lands_on_the_final_answer():
    steps = ["71 + 1 = 72 apples.", "The answer is 72."]
    raw, spans = layout(steps)
    target = select_targets(steps, "73").targets[0]
    for s in range(30):
        assert make_edit(edits.VALUE_FLIP, target, raw, spans, seed=s, answer_value=Fraction(73)).new_value != 73


def test_step_ablation_deletes_the_step_and_keeps_the_later_ones_but_the_last():
    steps = ["a = 2 + 3 = 5", "b = 5 * 2 = 10", "c = 10 + 1 = 11", "The answer is 11."]
    raw, spans = layout(steps)
    target = select_targets(steps, "11").targets[0]
    e = make_edit(edits.STEP_ABLATION, target, raw, spans)
    assert e.prefix == "b = 5 * 2 = 10\nc = 10 + 1 = 11" and e.edited_step == ""


def test_paraphrase_keeps_every_number():
    for text in STEPS + ["So she has 5 apples.", "12 * 3 = 36"]:
        out = paraphrase_text(text)
        assert out != text and [v for v, _s, _e in numbers(out)] == [v for v, _s, _e in numbers(text)]


def test_tool_result_changes_only_the_annotation_and_needs_one():
    raw, spans = layout(STEPS)
    target = select_targets(STEPS, "72").targets[0]
    e = make_edit(edits.TOOL_RESULT, target, raw, spans, seed=0)
    assert e.old_value == 24 and e.new_value != 24
    assert e.edited_step == f"Natalia sold 48/2 = <<48/2={e.new_value}>>24 clips in May."
    plain = ["2 + 2 = 4", "The answer is 4."]
    raw, spans = layout(plain)
    with pytest.raises(NotApplicable, match="no tool output"):
        make_edit(edits.TOOL_RESULT, select_targets(plain, "4").targets[0], raw, spans)


def test_step_spans_use_the_offsets_when_they_fit():
    raw = "First 1+1 = 2.\nThen 2+2 = 4."
    text, spans = step_spans(raw, [("First 1+1 = 2.", 0, 14), ("Then 2+2 = 4.", 15, 28)])
    assert text == raw and spans == [(0, 14), (15, 28)]


def test_parse_kinds_names_the_unknown_kind():
    assert parse_kinds("value_flip, paraphrase") == ("value_flip", "paraphrase")
    with pytest.raises(ValueError, match="unknown intervention kind.*flip"):
        parse_kinds("flip")


# -- the implied answer (strict f) through reasonlib.calc_chain ---------------------------------------------


def implied(steps, step, old, new, final):
    from faithfulness.core.implied import implied_answer

    claims = select_targets(steps, str(final)).claims
    return implied_answer(claims, step, Fraction(old), Fraction(new), Fraction(final) if final is not None else None)


def test_a_flipped_intermediate_value_propagates_to_the_implied_answer():
    assert implied(STEPS, 1, 24, 25, 72) == 73
    steps = ["16 - 3 - 4 = 9 eggs.", "9 * 2 = $18 a day.", "The answer is 18."]
    assert implied(steps, 1, 9, 10, 18) == 20


def test_a_flipped_answer_step_implies_the_new_value():
    assert implied(STEPS, 2, 72, 80, 72) == 80


def test_no_implied_answer_when_the_chain_cannot_trace_it():
    # The flipped value is never used as an operand later: nothing to replay.
    assert implied(["2 + 3 = 5 pens.", "I also have 5 cats.", "The answer is 7."], 1, 5, 6, 7) is None


def test_an_unreadable_claim_does_not_shift_the_steps_of_the_chain():
    steps = ["I note that x = y.", "48/2 = 24", "48+24 = 72", "The answer is 72."]
    assert implied(steps, 2, 24, 30, 72) == 78
