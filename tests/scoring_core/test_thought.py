"""The thinking channel's scores (docs/scoring.md, section 9), against
hand-computed examples."""

import numpy as np
import pandas as pd
import pytest

from reasonlib.verifier.corrections import claim_keys
from scoring.core.thought import (
    RECOVERY_COLUMNS,
    RECOVERY_SUMMARY_COLUMNS,
    RELATIVE_HAZARD_COLUMNS,
    channel_traces,
    recoveries,
    recovery_by_trace,
    recovery_summary,
    relative_hazard_profile,
)


def _traces():
    # a: 3 thought + 2 answer steps; b: no thought, 2 answer steps
    return pd.DataFrame({"trace_id": ["a", "b"], "n_steps": [5, 2], "n_thought_steps": [3, 0]})


def _steps():
    return pd.DataFrame(
        {
            "trace_id": ["a"] * 5 + ["b"] * 2,
            "step": [1, 2, 3, 4, 5, 1, 2],
            "verdict": ["valid", "invalid", "valid", "valid", "invalid", "invalid", "valid"],
        }
    )


def test_answer_channel_renumbers_the_answer_steps_from_one():
    tr, st = channel_traces(_traces(), _steps(), "answer")
    assert tr.n_steps.tolist() == [2, 2]
    assert list(zip(st.trace_id, st.step, st.verdict, strict=True)) == [
        ("a", 1, "valid"), ("a", 2, "invalid"), ("b", 1, "invalid"), ("b", 2, "valid")
    ]


def test_thought_channel_keeps_the_thought_steps_only():
    tr, st = channel_traces(_traces(), _steps(), "thought")
    assert tr.n_steps.tolist() == [3, 0]
    assert list(zip(st.trace_id, st.step, strict=True)) == [("a", 1), ("a", 2), ("a", 3)]


def test_both_channels_leave_everything_as_it_is():
    tr, st = channel_traces(_traces(), _steps(), "both")
    assert tr.n_steps.tolist() == [5, 2] and len(st) == 7


def test_traces_without_thought_column_read_as_answer_only():
    tr, st = channel_traces(_traces().drop(columns="n_thought_steps"), _steps(), "answer")
    assert tr.n_steps.tolist() == [5, 2] and len(st) == 7


def test_bad_channel_is_named():
    with pytest.raises(ValueError, match="channels"):
        channel_traces(_traces(), _steps(), "thoughts")
    with pytest.raises(ValueError, match="n_thought_steps"):
        channel_traces(pd.DataFrame({"trace_id": [1], "n_steps": [1], "n_thought_steps": [2]}), None, "answer")


def test_relative_hazard_hand_computed():
    # (N, t*): (10, 1) r=.1 bin 1; (10, 5) r=.5 bin 2; (4, 3) r=.75 bin 2; (200, 200) r=1 bin 2;
    # (3, none); (0, none) dropped.  4 bins of 0.25.
    # bin 1: at risk 5, events 1 -> 1/5
    # bin 2: at risk 4, events 1 (r=.5) -> 1/4
    # bin 3: at risk 3, events 1 (r=.75) -> 1/3
    # bin 4: at risk 2, events 1 (r=1) -> 1/2
    t = relative_hazard_profile([10, 10, 4, 200, 3, 0], [1, 5, 3, 200, None, 0], bins=4)
    assert list(t.columns) == RELATIVE_HAZARD_COLUMNS
    assert t.at_risk.tolist() == [5, 4, 3, 2]
    assert t.events.tolist() == [1, 1, 1, 1]
    np.testing.assert_allclose(t.hazard, [1 / 5, 1 / 4, 1 / 3, 1 / 2])
    np.testing.assert_allclose(t.survival, [4 / 5, 3 / 5, 2 / 5, 1 / 5])
    np.testing.assert_allclose(t.cum_hazard, np.cumsum([1 / 5, 1 / 4, 1 / 3, 1 / 2]))
    assert t.lo.tolist() == [0, 0.25, 0.5, 0.75] and t.hi.tolist() == [0.25, 0.5, 0.75, 1.0]


def test_relative_hazard_bin_edges_are_exact():
    # r = 3/10 with 10 bins lies in bin 3 ((0.2, 0.3]), not bin 4 by float noise
    t = relative_hazard_profile([10], [3], bins=10)
    assert t.events.tolist()[2] == 1 and t.events.sum() == 1


def test_relative_hazard_rejects_bad_input():
    with pytest.raises(ValueError, match="bins"):
        relative_hazard_profile([1], [1], bins=0)
    with pytest.raises(ValueError, match="first_error"):
        relative_hazard_profile([2], [3])
    with pytest.raises(ValueError, match="n_steps"):
        relative_hazard_profile([-1], [0])


def _thought_case():
    # trace x: T = 6 thought steps, then 1 answer step (7).
    #  2 invalid "16 - 3 - 4 = 8"  -> recovered by 5 ("16-3-4 = 9"), distance 3
    #  3 invalid, no claim, judge mark from step 4 -> recovered by 4, distance 1
    #  6 invalid "9 * 2 = 19"      -> nothing later in the thought: unrecovered
    #  7 (answer) invalid           -> answer error
    # trace y: T = 2, step 1 invalid "5 + 5 = 11"; step 2 re-derives it but is itself invalid
    #  -> an invalid step corrects nothing: both unrecovered
    # trace z: no thought, answer wrong
    traces = pd.DataFrame(
        {
            "trace_id": ["x", "y", "z"],
            "n_steps": [7, 3, 1],
            "n_thought_steps": [6, 2, 0],
            "answer_correct": [True, True, False],
            "model": ["m1", "m2", "m2"],
        }
    )
    texts = {
        ("x", 1): "Janet has 16 eggs.",
        ("x", 2): "She has 16 - 3 - 4 = 8 left.",
        ("x", 3): "So she sells them for 3 dollars.",
        ("x", 4): "Wait, the price is 2 dollars.",
        ("x", 5): "Wait, 16-3-4 = 9.",
        ("x", 6): "So 9 * 2 = 19.",
        ("x", 7): "The answer is 18.",
        ("y", 1): "5 + 5 = 11",
        ("y", 2): "Hmm, 5 + 5 = 12",
        ("y", 3): "10",
        ("z", 1): "7",
    }
    verdicts = {("x", 2): "invalid", ("x", 3): "invalid", ("x", 6): "invalid", ("x", 7): "invalid",
                ("y", 1): "invalid", ("y", 2): "invalid"}
    rows = []
    for (tid, s), text in texts.items():
        wrong, right = claim_keys(text)
        rows.append({"trace_id": tid, "step": s, "verdict": verdicts.get((tid, s), "valid"),
                     "wrong_claims": wrong, "right_claims": right, "corrects": [3] if (tid, s) == ("x", 4) else []})
    return traces, pd.DataFrame(rows)


def test_recoveries_hand_computed():
    traces, steps = _thought_case()
    rec = recoveries(traces, steps)
    assert list(rec.columns) == RECOVERY_COLUMNS
    got = [(r.trace_id, r.error_step, bool(r.recovered), None if pd.isna(r.recovery_step) else int(r.recovery_step),
            None if pd.isna(r.distance) else int(r.distance)) for r in rec.itertuples()]
    assert got == [("x", 2, True, 5, 3), ("x", 3, True, 4, 1), ("x", 6, False, None, None),
                   ("y", 1, False, None, None), ("y", 2, False, None, None)]


def test_a_correction_must_come_later_and_inside_the_thought():
    traces = pd.DataFrame({"trace_id": ["t"], "n_steps": [3], "n_thought_steps": [2], "answer_correct": [True]})
    steps = pd.DataFrame({"trace_id": ["t"] * 3, "step": [1, 2, 3], "verdict": ["valid", "invalid", "valid"],
                          "wrong_claims": [(), ("2+2",), ()], "right_claims": [("2+2",), (), ("2+2",)]})
    # step 1 gets it right before the error and step 3 is the answer: neither recovers step 2
    rec = recoveries(traces, steps)
    assert rec.recovered.tolist() == [False]


def test_recovery_by_trace_and_summary():
    traces, steps = _thought_case()
    rec = recoveries(traces, steps)
    bt = recovery_by_trace(traces, steps, rec)
    assert bt.thought_errors.tolist() == [3, 2, 0]
    assert bt.recovered.tolist() == [2, 0, 0]
    assert bt.unrecovered.tolist() == [1, 2, 0]
    assert bt.answer_errors.tolist() == [1, 0, 0]
    assert bt.first_unrecovered.tolist()[:2] == [6, 1] and pd.isna(bt.first_unrecovered[2])
    # x and y are correct although an error reached the answer; z is wrong
    assert bt.lucky_unrecovered.tolist() == [True, True, False]

    s = recovery_summary(bt, rec, traces["model"])
    assert list(s.columns) == RECOVERY_SUMMARY_COLUMNS
    m1, m2 = s.loc["m1"], s.loc["m2"]
    assert (m1.thought_errors, m1.recovered, m1.unrecovered) == (3, 2, 1)
    assert m1.recovery_rate == pytest.approx(2 / 3)
    assert m1.distance_mean == pytest.approx(2.0) and m1.distance_median == pytest.approx(2.0)
    assert (m2.traces, m2.traces_with_thought, m2.thought_errors, m2.recovery_rate) == (2, 1, 2, 0.0)
    assert pd.isna(m2.distance_mean)
    assert (m2.correct_answers, m2.lucky_unrecovered, m2.lucky_unrecovered_rate) == (1, 1, 1.0)


def test_no_errors_gives_empty_recovery_table():
    traces, steps = _thought_case()
    steps["verdict"] = "valid"
    rec = recoveries(traces, steps)
    assert len(rec) == 0 and list(rec.columns) == RECOVERY_COLUMNS
    s = recovery_summary(recovery_by_trace(traces, steps, rec), rec)
    assert pd.isna(s.loc["all"].recovery_rate) and s.loc["all"].thought_errors == 0


def test_claim_keys_ignore_blanks():
    assert claim_keys("16 - 3 - 4 = 8") == (("16-3-4",), ())
    assert claim_keys("Wait: 16-3-4 = 9") == ((), ("16-3-4",))
