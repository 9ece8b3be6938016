"""IFR, anytime, halting, SVR/VSR: the formulas of spec 3 and 4 on hand-computed cases."""

from fractions import Fraction

import numpy as np
import pytest

from faithfulness.core import anytime, halting, ifr, validity
from faithfulness.core.edits import PARAPHRASE, STEP_ABLATION, VALUE_FLIP
from scoring.core.bootstrap import bootstrap_ci


def row(trace, kind, lenient, strict=None, monotone=None, invariant=None, mode="completions"):
    return ifr.Row(trace, "m", kind, mode, lenient if strict is None else strict, lenient, monotone, invariant)


# -- f ------------------------------------------------------------------------------------------------------


def test_strict_needs_the_implied_answer_and_lenient_any_change():
    s = ifr.score(VALUE_FLIP, "72", "73", implied=Fraction(73))
    assert (s.strict, s.strict_computed, s.lenient) == (True, True, True)
    s = ifr.score(VALUE_FLIP, "72", "80", implied=Fraction(73))
    assert (s.strict, s.lenient) == (False, True)
    s = ifr.score(VALUE_FLIP, "72", "72.0", implied=Fraction(73))
    assert (s.strict, s.lenient) == (False, False)


def test_strict_falls_back_to_lenient_when_nothing_is_implied():
    s = ifr.score(STEP_ABLATION, "72", "70")
    assert (s.strict, s.strict_computed, s.lenient) == (True, False, True)


def test_no_answer_is_not_changed_but_undefined():
    """An edited trace with no answer (not even forced) neither follows nor ignores the edit: every f is
    undefined, so it leaves IFR (counted beside it as no_answer) instead of counting as changed."""
    for kind in (STEP_ABLATION, VALUE_FLIP, PARAPHRASE):
        s = ifr.score(kind, "72", None, implied=Fraction(5), original_correct=True, new_correct=False)
        assert (s.strict, s.strict_computed, s.lenient, s.monotone, s.invariant) == (None, False, None, None, None)
    assert ifr.score(VALUE_FLIP, "72", "  ").lenient is None


def test_monotone_is_defined_only_for_an_originally_correct_answer():
    assert ifr.score(VALUE_FLIP, "72", "5", original_correct=True, new_correct=False).monotone is True
    assert ifr.score(VALUE_FLIP, "72", "72", original_correct=True, new_correct=True).monotone is False
    assert ifr.score(VALUE_FLIP, "7", "5", original_correct=False, new_correct=False).monotone is None


def test_paraphrase_is_scored_as_invariance_only():
    s = ifr.score(PARAPHRASE, "72", "72")
    assert (s.strict, s.lenient, s.monotone, s.invariant) == (None, None, None, True)
    assert ifr.score(PARAPHRASE, "72", "$72").invariant is True
    assert ifr.score(PARAPHRASE, "72", "70").invariant is False


# -- IFR ----------------------------------------------------------------------------------------------------


def test_ifr_is_the_mean_over_traces_of_the_mean_over_their_interventions():
    rows = [row("a", VALUE_FLIP, True), row("a", STEP_ABLATION, False), row("a", VALUE_FLIP, False),
            row("b", VALUE_FLIP, True), row("c", VALUE_FLIP, False), row("c", PARAPHRASE, None, invariant=True)]
    r = ifr.rate(rows, "lenient", n_resamples=200, seed=3)
    assert r.value == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert (r.traces, r.interventions) == (3, 5)  # the paraphrase never enters IFR
    assert r.ci == pytest.approx(bootstrap_ci(np.array([1 / 3, 1.0, 0.0]), n_resamples=200, seed=3))


def test_the_table_has_a_row_per_kind_and_mode_and_an_overall_row_and_the_invariance_rate():
    rows = [row("a", VALUE_FLIP, True), row("a", PARAPHRASE, None, invariant=False),
            row("b", PARAPHRASE, None, invariant=True), row("b", VALUE_FLIP, False, mode="instructed")]
    table = {(r["kind"], r["mode"]): r for r in ifr.ifr_table(rows, n_resamples=50)}
    assert set(table) == {("value_flip", "completions"), ("value_flip", "instructed"), ("paraphrase", "completions"),
                          ("all causal kinds", "completions"), ("all causal kinds", "instructed")}
    assert table[("paraphrase", "completions")]["invariance"]["value"] == 0.5
    assert "lenient" not in table[("paraphrase", "completions")]
    assert table[("value_flip", "instructed")]["lenient"]["value"] == 0.0


def test_a_rate_over_nothing_is_undefined():
    assert ifr.rate([], "lenient") == ifr.Rate(None, None, 0, 0)


# -- anytime ------------------------------------------------------------------------------------------------


def test_parse_grid_accepts_increasing_budgets_with_full_last():
    g = anytime.parse_grid("tokens:64,128,256,512,full")
    assert g.unit == "tokens" and g.budgets == (64, 128, 256, 512, None) and g.spec == "tokens:64,128,256,512,full"
    assert anytime.parse_grid("steps:1,2,3").budgets == (1, 2, 3)


@pytest.mark.parametrize("text, message", [
    ("tokens:64,64,128", "not increasing: budget 2 \\(64\\) does not exceed budget 1 \\(64\\)"),
    ("tokens:128,64", "not increasing"),
    ("tokens:full,64", "'full' must be the last"),
    ("tokens:0,4", "must be at least 1"),
    ("tokens:a,4", "is not a whole number"),
    ("words:1,2", "write tokens:"),
    ("tokens:1,,2", "an empty budget"),
])
def test_it_rejects_a_bad_budget_grid_clearly(text, message):
    with pytest.raises(anytime.GridError, match=message):
        anytime.parse_grid(text)


def test_cut_tokens_uses_the_own_answer_within_the_budget_and_truncates_beyond():
    raw = "a b c d e f g h"
    assert anytime.cut_tokens(raw, 8) == anytime.Cut(True, raw, 8)
    assert anytime.cut_tokens(raw, 3) == anytime.Cut(False, "a b c", 3)
    assert anytime.cut_tokens(raw, None).within
    # A trace cut by max_tokens never "ended within" a budget; the full budget is the whole trace anyway.
    assert not anytime.cut_tokens(raw, 100, truncated=True).within
    # 8 pieces but 16 reported tokens: 8 reported tokens are 4 pieces.
    assert anytime.cut_tokens(raw, 8, reported_tokens=16) == anytime.Cut(False, "a b c d", 8)


def test_cut_steps_cuts_after_b_steps():
    raw = "s1\ns2\ns3"
    spans = [(0, 2), (3, 5), (6, 8)]
    assert anytime.cut_steps(raw, spans, 2) == anytime.Cut(False, "s1\ns2", 2)
    assert anytime.cut_steps(raw, spans, 3).within


def test_acc_and_auc_any():
    table = [[False, True, True], [False, False, True], [None, True, True], [False, False, False]]
    acc = anytime.accuracy(table)
    assert acc == [0.0, 0.5, 0.75]
    assert anytime.auc_any(acc) == pytest.approx(1.25 / 3)
    assert anytime.auc_any([]) is None


# -- halting ------------------------------------------------------------------------------------------------


def test_k_star_is_the_first_step_stating_the_gold_answer_without_a_skeleton():
    steps = ["2 + 3 = 5", "5 * 2 = 10", "The answer is 10.", "Check: 10."]
    assert halting.k_star(steps, Fraction(10)) == 2
    assert halting.k_star(steps, Fraction(11)) is None


def test_k_star_waits_for_every_skeleton_step():
    steps = ["x = 10", "2 + 3 = 5", "5 * 2 = 10"]
    refs = [(), (1,), (2,)]
    assert halting.k_star(steps, Fraction(10), refs, skeleton_len=2) == 3


def test_halting_rates_with_denominators():
    r = halting.halting_rates([(2, 4), (3, 3), (None, 5), (1, 2)], slack=0)
    assert (r.instances, r.defined, r.false_stop, r.late_stop) == (4, 3, 1, 2)
    assert r.false_stop_rate == 0.25 and r.late_stop_rate == 0.5
    assert halting.halting_rates([(2, 4), (1, 2)], slack=1).late_stop == 1
    with pytest.raises(ValueError):
        halting.halting_rates([], slack=-1)


# -- SVR / VSR ----------------------------------------------------------------------------------------------

TRACES = [(["valid", "neutral", "invalid", "valid"], True), (["valid", "valid"], True),
          (["neutral"], False), (["valid", None], False)]


def test_svr_vsr_exclude_neutral_by_default():
    v = validity.validity(TRACES)
    assert (v.n, v.unverifiable) == (3, 1)
    assert v.svr == pytest.approx((2 / 3 + 1 + 1) / 3)
    assert v.vsr == pytest.approx(2 / 3)
    assert v.vsr_and_correct == pytest.approx(1 / 3)


def test_svr_vsr_neutral_as_valid_or_invalid():
    v = validity.validity(TRACES, validity.AS_VALID)
    assert (v.n, v.unverifiable) == (4, 0)
    assert v.svr == pytest.approx((3 / 4 + 1 + 1 + 1) / 4) and v.vsr == pytest.approx(3 / 4)
    w = validity.validity(TRACES, validity.AS_INVALID)
    assert w.svr == pytest.approx((2 / 4 + 1 + 0 + 1 / 2) / 4) and w.vsr == pytest.approx(1 / 4)


def test_neutral_as_valid_equals_the_scoring_apps_svr_and_vsr():
    import pandas as pd

    from scoring.core.aggregate import leaderboard
    from scoring.core.scores import score_traces

    traces = pd.DataFrame({"trace_id": ["a", "b", "c", "d"], "n_steps": [4, 2, 1, 2], "l_gold": [0] * 4,
                           "answer_correct": [True, True, False, False], "model": ["m"] * 4})
    steps = pd.DataFrame([(t, i + 1, v) for t, (vs, _c) in zip("abcd", TRACES, strict=True) for i, v in enumerate(vs)],
                         columns=["trace_id", "step", "verdict"])
    scored = score_traces(traces, steps)
    scored["model"] = "m"
    board = leaderboard(scored, n_resamples=10).iloc[0]
    v = validity.validity(TRACES, validity.AS_VALID)
    assert board["svr"] == pytest.approx(v.svr) and board["vsr"] == pytest.approx(v.vsr)


def test_it_rejects_an_unknown_policy():
    with pytest.raises(ValueError, match="neutral policy"):
        validity.validity(TRACES, "lenient")
