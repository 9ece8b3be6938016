"""The pure formulas of subjects.core against values computed by hand."""

from __future__ import annotations

from math import comb

import pytest

from subjects import core
from subjects.core import Sample


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (1, 1, 1, 1.0),
    (1, 0, 1, 0.0),
    (10, 3, 1, 0.3),  # pass@1 is the fraction correct
    (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    (4, 1, 2, 1 - 3 / 6),  # 1 - C(3,2)/C(4,2) = 0.5
    (4, 3, 2, 1.0),  # n - c = 1 < k: every pair holds a correct sample
    (10, 0, 5, 0.0),
    (6, 2, 3, 1 - 4 / 20),  # 1 - C(4,3)/C(6,3) = 0.8
])
def test_pass_at_k_matches_hand_computed_values(n, c, k, expected):
    assert core.pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_is_the_binomial_ratio_for_large_n():
    n, c, k = 200, 13, 10
    assert core.pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, 1, 0), (3, 1, 4), (2, -1, 1)])
def test_pass_at_k_refuses_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        core.pass_at_k(n, c, k)


def test_majority_vote_takes_the_most_frequent_answer_of_the_first_k():
    samples = [Sample("7", True), Sample("8", False), Sample("8", False), Sample("7", True), Sample("7", True)]
    assert core.majority_correct(samples, 3) is False  # 8 twice among the first three
    assert core.majority_correct(samples, 5) is True  # 7 three times
    # a tie goes to the answer seen first; samples without an answer do not vote
    assert core.majority_correct([Sample("", None), Sample("8", False), Sample("7", True)], 3) is False
    assert core.majority_correct([Sample("", None)], 1) is False


def test_aggregate_over_problems():
    per_problem = [
        [Sample("5", True), Sample("6", False)],  # pass@2 = 1, maj@2: tie -> "5" first -> correct
        [Sample("1", False), Sample("1", False)],  # pass@2 = 0, maj = wrong
        [Sample("9", True)],  # fewer than k samples: counts for accuracy only
    ]
    agg = core.aggregate(per_problem, 2)
    assert (agg.problems, agg.samples, agg.problems_with_k) == (3, 5, 2)
    assert agg.accuracy == pytest.approx(2 / 5)
    assert agg.pass_at_k == pytest.approx(0.5)
    assert agg.maj_at_k == pytest.approx(0.5)


def test_seeds_and_trace_ids_are_deterministic():
    assert [core.sample_seed(7, i) for i in range(3)] == [7, 8, 9]
    assert core.sample_seed(None, 2) is None
    assert core.generated_trace_id("tiny", 2, "p1", 0) == "gen/tiny/v2/p1/s0"
    long_id = core.generated_trace_id("tiny", 1, "x" * 400, 3)
    assert len(long_id) <= 300 and long_id == core.generated_trace_id("tiny", 1, "x" * 400, 3)
