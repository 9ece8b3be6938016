import json

import numpy as np
import pandas as pd
import pytest
from scoring_core_data import WORKED_MODELS, worked_frames

from scoring.core.aggregate import (
    LEADERBOARD_COLUMNS,
    answer_process_quadrants,
    box_statistics,
    first_error_histogram,
    leaderboard,
    to_records,
)
from scoring.core.bootstrap import bootstrap_ci
from scoring.core.scores import score_traces

approx = pytest.approx


def worked_scores():
    traces, steps = worked_frames()
    s = score_traces(traces, steps)
    s["model"] = s.trace_id.map(WORKED_MODELS)
    return s


def test_leaderboard_on_the_worked_example():
    s = worked_scores()
    lb = leaderboard(s, seed=0)
    assert list(lb.columns) == ["model"] + LEADERBOARD_COLUMNS
    m1, m2 = (lb.iloc[i] for i in range(2))
    assert (m1.model, m2.model) == ("m1", "m2")

    # m1 = A, B, E
    assert m1.traces == 3 and m1.answer_accuracy == 1.0
    # S_HCRS: (89/33 + 7.125 + 0) / 3
    assert m1.s_hcrs_mean == approx((89 / 33 + 7.125) / 3)
    assert m1.process_mean == approx((89 / 33 + 7.125) / 3)
    assert m1.s_prm_mean == approx((7.5 + 10 + 0) / 3)
    assert m1.holistic_mean == approx((0.7 * 89 / 33 + 3 + 7.9875 + 3) / 3)
    assert m1.lucky_guess_rate == approx(2 / 3)  # A and E of 3 correct
    assert m1.svr == approx((0.75 + 1) / 2)  # A, B (E empty: left out)
    assert m1.vsr == approx(0.5)  # only B has no invalid step

    # m2 = C, D, F
    assert m2.answer_accuracy == approx(1 / 3)
    assert m2.s_hcrs_mean == approx(15 / 11)  # only D has a skeleton
    assert m2.s_hcrs_ci is None  # one value only
    assert m2.process_mean == approx((3 + 15 / 11 + 10 / 3) / 3)
    assert m2.s_prm_mean == approx((8 + 5 + 50 / 6) / 3)
    assert m2.holistic_mean == approx((2.1 + 0.7 * 15 / 11 + 3 + 7 / 3) / 3)
    assert m2.lucky_guess_rate == 1.0  # D, the only correct answer
    assert m2.svr == approx((4 / 5 + 1 / 2 + 5 / 6) / 3) and m2.vsr == 0

    # intervals are [low, high] and equal bootstrap_ci on the group's values
    g1 = s[s.model == "m1"]
    assert m1.process_ci == approx(list(bootstrap_ci(g1.process, seed=0)))
    assert m1.holistic_ci == approx(list(bootstrap_ci(g1.holistic, seed=0)))
    assert m1.s_hcrs_ci == approx(list(bootstrap_ci(g1.s_hcrs, seed=0)))
    assert isinstance(m1.process_ci, list) and m1.process_ci[0] <= m1.process_mean <= m1.process_ci[1]

    # deterministic with the seed; JSON-serialisable
    pd.testing.assert_frame_equal(lb, leaderboard(s, seed=0))
    json.dumps(to_records(lb))


def test_leaderboard_none_values_and_whole_table():
    s = pd.DataFrame(
        {
            "model": ["x"],
            "n_steps": [0],
            "answer_correct": [False],
            "s_hcrs": [np.nan],
            "process": [0.0],
            "s_prm": [0.0],
            "holistic": [0.0],
            "lucky_guess": [False],
            "validity_rate": [np.nan],
            "all_valid": pd.array([pd.NA], dtype="boolean"),
        }
    )
    row = leaderboard(s).iloc[0]
    assert row.s_hcrs_mean is None and row.s_hcrs_ci is None and row.process_ci is None
    assert row.lucky_guess_rate is None and row.svr is None and row.vsr is None
    whole = leaderboard(s, group_col=None)
    assert list(whole.columns) == LEADERBOARD_COLUMNS and whole.iloc[0].traces == 1
    with pytest.raises(ValueError, match="missing column"):
        leaderboard(s.drop(columns="validity_rate"))


def test_leaderboard_is_fast_for_100k_traces():

    rng = np.random.default_rng(0)
    n = 100_000
    L = rng.integers(0, 5, n)
    proc = rng.random(n) * 10
    s = pd.DataFrame(
        {
            "model": rng.choice(["a", "b", "c", "d"], n),
            "n_steps": rng.integers(0, 12, n),
            "answer_correct": rng.random(n) < 0.5,
            "s_hcrs": np.where(L > 0, proc, np.nan),
            "process": proc,
            "s_prm": rng.random(n) * 10,
            "holistic": proc * 0.7,
            "lucky_guess": rng.random(n) < 0.1,
            "validity_rate": rng.random(n),
            "all_valid": rng.random(n) < 0.3,
        }
    )
    lb = leaderboard(s)  # its speed is measured in benchmarks/score_large.py, not asserted here
    assert len(lb) == 4 and lb.traces.sum() == n


def test_first_error_histogram():
    s = worked_scores()
    h = first_error_histogram(s, "model")
    # m1 non-empty: A (t*=2), B (none) ; m2: C (1), D (2), F (1)
    rows = [(r.model, None if pd.isna(r.first_error) else int(r.first_error), r.traces) for r in h.itertuples()]
    assert rows == [("m1", 1, 0), ("m1", 2, 1), ("m1", None, 1), ("m2", 1, 2), ("m2", 2, 1), ("m2", None, 0)]
    assert h.fraction.tolist() == approx([0, 0.5, 0.5, 2 / 3, 1 / 3, 0])
    whole = first_error_histogram(s)
    assert list(whole.columns) == ["first_error", "traces", "fraction"]
    assert whole.traces.tolist() == [2, 2, 1]  # t*=1: C, F ; t*=2: A, D ; none: B


def test_to_records():
    df = pd.DataFrame(
        {
            "a": [1.5, np.nan],
            "b": pd.array([1, pd.NA], dtype="Int64"),
            "c": [(1, 2), ()],
            "d": np.array([True, False]),
            "e": pd.array([True, pd.NA], dtype="boolean"),
        }
    )
    recs = to_records(df)
    assert recs == [
        {"a": 1.5, "b": 1, "c": [1, 2], "d": True, "e": True},
        {"a": None, "b": None, "c": [], "d": False, "e": None},
    ]
    assert type(recs[0]["b"]) is int and type(recs[0]["d"]) is bool
    json.dumps(recs)


def test_box_statistics_by_hand():
    box = box_statistics(np.array([1.0, 2.0, 3.0, 4.0, 100.0, np.nan]))
    # Quartiles by linear interpolation over 5 values: 2, 3, 4; IQR 2, so the upper whisker stops at 4
    # (100 > 4 + 1.5 * 2) and the lower one at 1 (>= 2 - 3); the mean is 110 / 5; NaN is left out.
    assert box == {"n": 5, "min": 1.0, "q1": 2.0, "median": 3.0, "q3": 4.0, "max": 100.0, "mean": 22.0,
                   "lowerfence": 1.0, "upperfence": 4.0}
    assert box_statistics(np.array([np.nan])) is None


def test_answer_process_quadrants_count_a_score_at_tau_as_low():
    answer = np.array([True, True, False, False, True])
    process = np.array([1.0, 5.0, 3.0, 9.0, 3.0])
    assert answer_process_quadrants(answer, process, 3.0) == {
        "correct_low": 2, "correct_high": 1, "wrong_low": 1, "wrong_high": 1}
