"""The stratified sample of a calibration study (agreement.core.sampling), against hand-computed allocations."""

from __future__ import annotations

import pandas as pd
import pytest

from agreement.core import sampling


def test_equal_allocation_fills_small_strata_and_shares_the_rest():
    assert sampling.allocate({"a": 10, "b": 2, "c": 10}, 12, "equal") == {"a": 5, "b": 2, "c": 5}
    assert sampling.allocate({"a": 10, "b": 10, "c": 10}, 10, "equal") == {"a": 4, "b": 3, "c": 3}
    assert sampling.allocate({"a": 1, "b": 1}, 50, "equal") == {"a": 1, "b": 1}
    assert sampling.allocate({"a": 0, "b": 5}, 3, "equal") == {"a": 0, "b": 3}


def test_proportional_allocation_rounds_by_largest_remainder():
    assert sampling.allocate({"a": 60, "b": 30, "c": 10}, 10, "proportional") == {"a": 6, "b": 3, "c": 1}
    assert sampling.allocate({"a": 5, "b": 5, "c": 5}, 4, "proportional") == {"a": 2, "b": 1, "c": 1}
    with pytest.raises(sampling.CalibrationError, match="allocation"):
        sampling.allocate({"a": 1}, 1, "random")


def test_the_sample_depends_only_on_the_seed_and_the_set_of_traces():
    frame = pd.DataFrame({"trace_id": range(100), "stratum": [f"m{i % 3} / {'correct' if i % 2 else 'wrong'}"
                                                              for i in range(100)]})
    a = sampling.stratified_sample(frame, 12, seed=4)
    b = sampling.stratified_sample(frame.sample(frac=1, random_state=1), 12, seed=4)
    assert a.equals(b)
    assert len(a) == 12 and a["trace_id"].is_unique
    assert a.groupby("stratum").size().tolist() == [2] * 6  # six strata, equal shares
    assert a["position"].tolist() == list(range(1, 13))
    assert a["stratum"].tolist()[:6] == sorted(a["stratum"].unique())  # strata interleaved in the queue order
    assert not a.equals(sampling.stratified_sample(frame, 12, seed=5))


def test_what_was_drawn_is_said_when_equal_shares_are_impossible():
    assert sampling.describe_allocation({"a": 10, "b": 2, "c": 10}, {"a": 5, "b": 2, "c": 5}) == (
        "12 traces drawn; an equal share was not possible: 1 of 3 strata have fewer traces than the others' share "
        "and gave all they have (b: 2); the other strata gave up to 5 each.")
    assert sampling.describe_allocation({"a": 10, "b": 10}, {"a": 4, "b": 4}) == (
        "8 traces drawn equally: 4 from each of 2 strata.")
