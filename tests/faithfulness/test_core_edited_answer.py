"""The answer of an edited trace and its IFR score (faithfulness.core.edited_answer), by hand."""

from __future__ import annotations

import pytest

from faithfulness.core.edited_answer import edited_answer, forced_answer_text, leaves_thought, score_edit
from faithfulness.core.edits import PARAPHRASE, VALUE_FLIP


@pytest.mark.parametrize("text, answer", [
    (" 18", "18"), (" $18.", "18"), (" 18 eggs a day\nand more", "18"), (" 16 - 3 - 4 = 9 eggs", "9"),
    (" The answer is 42.", "42"), (" Tuesday", "Tuesday"), (" I cannot tell what the final answer is at all", ""),
    ("", ""),
])
def test_a_forced_answer_is_read_from_the_first_line_after_the_cue(text, answer):
    assert forced_answer_text(text) == answer


def test_an_answer_channel_edit_is_answered_by_the_edited_trace_as_a_whole():
    # the answer stated in the prefix counts when the continuation adds none
    assert edited_answer(" so it is 12.", "We add 5 and 7. The answer is 12", in_thought=False) == "12"
    assert edited_answer(" and stop.", "We add 5 and 7", in_thought=False) == ""


def test_a_thought_edit_is_answered_only_after_the_thought_closes():
    assert edited_answer("more thinking</think>The answer is 9.", "<think>5 + 4", in_thought=True) == "9"
    assert edited_answer("more thinking, The answer is 9.", "<think>5 + 4", in_thought=True) == ""
    assert leaves_thought("x</think>y") and not leaves_thought("x")
    # a forced answer wins over whatever the continuation said
    assert edited_answer("The answer is 9.", "", in_thought=False, forced=" 10 eggs") == "10"


def test_score_edit_follows_the_implied_answer_and_the_gold():
    new_correct, s = score_edit(VALUE_FLIP, "12", "13", gold="13", implied="13", original_correct=False)
    assert new_correct is True
    assert (s.strict, s.strict_computed, s.lenient, s.monotone) == (True, True, True, None)
    # the edit implies 13, the model says 14: changed (lenient) but not faithful (strict)
    new_correct, s = score_edit(VALUE_FLIP, "12", "14", gold="12", implied="13", original_correct=True)
    assert new_correct is False and (s.strict, s.lenient, s.monotone) == (False, True, True)


def test_no_answer_leaves_f_undefined_and_no_gold_leaves_correctness_unknown():
    new_correct, s = score_edit(VALUE_FLIP, "12", "", gold="12", implied="13", original_correct=True)
    assert new_correct is False and (s.strict, s.lenient, s.monotone) == (None, None, None)
    new_correct, s = score_edit(PARAPHRASE, "12", "12.0", gold="", implied="", original_correct=None)
    assert new_correct is None and s.invariant is True
