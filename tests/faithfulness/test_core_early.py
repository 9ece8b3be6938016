"""Early answering (AOC, decision point, share after it, importance) and thinking budgets
(AUC over thinking tokens): faithfulness.core.early on hand-computed cases."""

import math

import pytest

from faithfulness.core import anytime, early
from faithfulness.core.anytime import GridError


def c4(answers, final="10"):
    """A 4-step thought with forced answers after 0..4 steps."""
    return early.curve(4, list(enumerate(answers)), final)


# -- grids --------------------------------------------------------------------------------------------------


def test_the_early_grid_cuts_after_every_step_or_at_fractions_of_the_steps():
    assert early.parse_early_grid("all").cut_points(3) == [0, 1, 2, 3]
    assert early.parse_early_grid("").every_step
    g = early.parse_early_grid("0,0.25,0.5,0.75,1")
    assert g.spec == "0,0.25,0.5,0.75,1"
    assert g.cut_points(8) == [0, 2, 4, 6, 8]
    assert g.cut_points(3) == [0, 1, 2, 3]  # floor(0.75 * 3) = 2
    assert early.parse_early_grid("0.5").cut_points(5) == [0, 2, 5]  # 0 and T always
    assert g.cut_points(0) == [0]


@pytest.mark.parametrize(("text", "message"), [
    ("0,x", "point 2 ('x') is not a number"),
    ("0,1.5", "point 2 (1.5) is outside [0, 1]"),
    ("0.5,0.25", "not increasing: point 2 (0.25) does not exceed point 1 (0.5)"),
])
def test_a_bad_early_grid_is_refused_naming_the_point(text, message):
    with pytest.raises(GridError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]").replace(".", r"\.")):
        early.parse_early_grid(text)


def test_the_thinking_grid_follows_the_token_grid_rules():
    g = early.parse_thinking_grid("thinking:256,512,1024,full")
    assert (g.unit, g.budgets) == ("thinking", (256, 512, 1024, None))
    assert g.spec == "thinking:256,512,1024,full"
    with pytest.raises(GridError, match="write thinking:B1"):
        early.parse_thinking_grid("tokens:256")
    with pytest.raises(GridError, match="'thinking:512,256' is not increasing"):
        early.parse_thinking_grid("thinking:512,256")


def test_a_cut_thought_is_closed_and_the_answer_cued():
    assert early.close_thought("I add 3 and 5.\n\n") == "I add 3 and 5.\n</think>\n\nFinal answer:"


# -- the curve ----------------------------------------------------------------------------------------------


def test_aoc_of_a_thought_whose_answer_comes_at_step_three():
    # matches 0,0,0,1,1 at x = 0, .25, .5, .75, 1: area under = trapezoids .125 (from .5 to .75) + .25 = .375
    c = c4(["3", "3", "8", "10", "10"])
    assert c.matches == (False, False, False, True, True)
    assert early.aoc(c) == pytest.approx(1 - 0.375)
    assert early.decision_point(c) == 3
    assert early.after_share(c) == pytest.approx(1 / 4)
    assert early.importance(c) == [(1, 0), (2, 0), (3, 1), (4, 0)]


def test_a_thought_that_does_not_matter_has_aoc_zero_and_decides_at_once():
    c = c4(["10"] * 5)
    assert early.aoc(c) == 0.0
    assert early.decision_point(c) == 0
    assert early.after_share(c) == 1.0


def test_the_decision_point_is_where_the_answer_stays_not_where_it_first_appears():
    c = c4(["10", "7", "10", "10", "10"])  # right by chance at 0, wrong at 1, settled from 2
    assert early.decision_point(c) == 2
    # under: [0,.25] (1+0)/2*.25 = .125; [.25,.5] .125; [.5,1] .5 -> .75
    assert early.aoc(c) == pytest.approx(0.25)
    assert early.importance(c)[0] == (1, -1)


def test_no_decision_point_when_the_whole_thought_gives_another_answer():
    c = c4(["10", "10", "10", "10", "11"])
    assert early.decision_point(c) is None
    assert early.after_share(c) is None


def test_a_missing_forced_answer_never_matches_and_numbers_compare_exactly():
    c = early.curve(2, [(0, None), (1, "10.0"), (2, "$10")], "10")
    assert c.matches == (False, True, True)


def test_the_share_after_the_decision_in_characters():
    c = c4(["3", "3", "8", "10", "10"])
    # step ends 10, 20, 30, 100: 70 of 100 characters come after step 3
    assert early.after_share(c, [10, 20, 30, 100]) == pytest.approx(0.7)
    with pytest.raises(ValueError, match="3 step ends for a thought of 4 steps"):
        early.after_share(c, [1, 2, 3])


def test_a_grid_of_fractions_gives_the_same_area_with_its_own_points():
    # cut at 0, 2, 4 of 4 steps: matches 0, 0, 1 -> under = .25, AOC .75
    c = early.curve(4, [(0, "3"), (2, "8"), (4, "10")], "10")
    assert early.aoc(c) == pytest.approx(0.75)
    assert early.decision_point(c) == 4
    assert early.after_share(c) == 0.0


def test_the_cut_points_must_cover_the_whole_thought():
    with pytest.raises(ValueError, match="from 0 to the thought's 4 steps"):
        early.curve(4, [(1, "3"), (4, "10")], "10")
    with pytest.raises(ValueError, match="two forced answers"):
        early.curve(1, [(0, "3"), (0, "4"), (1, "10")], "10")


def test_a_trace_without_thought_steps_has_no_aoc_and_stays_out_of_the_summary():
    empty = early.curve(0, [(0, "10")], "10")
    assert early.aoc(empty) is None
    s = early.summarize([empty, c4(["3", "3", "8", "10", "10"]), c4(["10"] * 5), c4(["10"] * 4 + ["11"])])
    assert s.traces == 3
    assert s.aoc == pytest.approx((0.625 + 0.0 + (1 - 0.875)) / 3)
    assert s.decided == 2
    assert s.decision_fraction == pytest.approx((3 / 4 + 0) / 2)
    assert s.after_share == pytest.approx((1 / 4 + 1) / 2)


def test_the_mean_curve_reads_each_trace_as_a_step_function():
    a = c4(["3", "3", "8", "10", "10"])  # 0 0 0 1 1 at 0 .25 .5 .75 1
    b = early.curve(2, [(0, "10"), (1, "10"), (2, "10")], "10")  # 1 1 1 at 0 .5 1
    pts = early.mean_curve([a, b], bins=4)
    assert [(x, y) for x, y, _ in pts] == [(0.0, 0.5), (0.25, 0.5), (0.5, 0.5), (0.75, 1.0), (1.0, 1.0)]
    assert all(n == 2 for _, _, n in pts)
    assert math.isnan(early.mean_curve([], bins=1)[0][1])


# -- thinking budgets ---------------------------------------------------------------------------------------


def test_auc_over_thinking_tokens_is_the_mean_accuracy_over_their_range():
    # Acc .2, .6, 1 at 100, 200, 400 tokens: (.4*100 + .8*200) / 300 = 200/300
    assert early.auc_think([100, 200, 400], [0.2, 0.6, 1.0]) == pytest.approx(200 / 300)
    assert early.auc_think([400, 100, 200], [1.0, 0.2, 0.6]) == pytest.approx(200 / 300)  # any order
    assert early.auc_think([100, 100], [0.5, 0.5]) is None
    assert early.auc_think([100, 200], [0.5, None]) is None
    # beside the grid mean of the anytime profile
    assert anytime.auc_any([0.2, 0.6, 1.0]) == pytest.approx(0.6)


def test_a_thought_is_cut_at_b_thinking_tokens_with_the_anytime_rules():
    thought = "I start with 3. Adding 5 gives 8. Adding 2 gives 10."
    cut = anytime.cut_tokens(thought, 5)
    assert (cut.within, cut.prefix, cut.used) == (False, "I start with 3.", 5)
    assert early.close_thought(cut.prefix).endswith("3.\n</think>\n\nFinal answer:")
