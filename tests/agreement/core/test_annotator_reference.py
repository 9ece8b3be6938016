"""Each annotator against the others (agreement.core.annotators.leave_one_out, overlap_sets), against
hand-computed cases."""

from __future__ import annotations

import pandas as pd
import pytest

from agreement.core.annotators import leave_one_out, overlap_sets
from scoring.core.labels import final_labels

TRACES = pd.DataFrame({"trace_id": [1, 2], "n_steps": [2, 2]})
NAMES = {1: "ann", 2: "bob"}


def raw(rows: list[tuple[int, int, int, str]]) -> pd.DataFrame:
    return pd.DataFrame({"trace_id": [r[0] for r in rows], "step": [r[1] for r in rows],
                         "src": [r[2] for r in rows], "verdict": [r[3] for r in rows],
                         "skeleton_refs": [() for _ in rows]})


# ann calls step 2 of trace 1 invalid; bob calls every step valid.
LABELS = raw([(1, 1, 1, "valid"), (1, 2, 1, "invalid"), (2, 1, 1, "valid"), (2, 2, 1, "valid"),
              (1, 1, 2, "valid"), (1, 2, 2, "valid"), (2, 1, 2, "valid"), (2, 2, 2, "valid")])


def test_without_adjudication_each_annotator_is_measured_against_the_other():
    rows = {r["annotator"]: r for r in leave_one_out(LABELS, None, TRACES, NAMES, n_resamples=20, seed=0)}
    ann, bob = rows["ann"], rows["bob"]
    # 3 of 4 steps agree; bob's verdicts are all "valid", so chance agreement is 3/4 too: kappa = 0.
    assert ann["steps_compared"] == bob["steps_compared"] == 4
    assert ann["percent_agreement"] == bob["percent_agreement"] == pytest.approx(0.75)
    assert ann["kappa"] == pytest.approx(0.0) and bob["kappa"] == pytest.approx(0.0)
    assert (ann["invalid_rate"], ann["reference_invalid_rate"]) == (pytest.approx(0.25), pytest.approx(0.0))
    assert (bob["invalid_rate"], bob["reference_invalid_rate"]) == (pytest.approx(0.0), pytest.approx(0.25))
    # First errors: trace 1 (ann: step 2, bob: none) differs, trace 2 (none, none) agrees.
    assert ann["traces_compared"] == 2 and ann["first_error_exact"] == pytest.approx(0.5)
    assert (ann["traces"], ann["steps_labelled"]) == (2, 4)


def test_an_adjudicated_step_is_the_reference_for_everyone():
    adjudicated = final_labels(pd.DataFrame({"trace_id": [1], "step": [2], "verdict": ["invalid"],
                                             "skeleton_refs": [()]}), None, None)
    rows = leave_one_out(LABELS, adjudicated, TRACES, NAMES, n_resamples=20, seed=0)
    # ann agrees with the adjudicator everywhere (kappa 1), bob misses the one invalid step: listed first.
    assert [r["annotator"] for r in rows] == ["bob", "ann"]
    bob, ann = rows
    assert ann["percent_agreement"] == pytest.approx(1.0) and ann["kappa"] == pytest.approx(1.0)
    assert ann["first_error_exact"] == pytest.approx(1.0)
    assert bob["percent_agreement"] == pytest.approx(0.75) and bob["kappa"] == pytest.approx(0.0)
    assert bob["reference_invalid_rate"] == pytest.approx(0.25)


def test_an_annotator_without_labels_gets_no_row():
    assert [r["annotator"] for r in leave_one_out(LABELS, None, TRACES, {**NAMES, 3: "cyd"},
                                                   n_resamples=20, seed=0)] == ["ann", "bob"]


def test_overlap_sets_count_the_traces_and_steps_each_set_of_annotators_finished():
    labels = pd.DataFrame({"trace_id": [1, 1, 2, 2, 3, 1], "annotator": ["ann", "bob", "bob", "ann", "ann", "ann"]})
    assert overlap_sets(labels, pd.Series({1: 5, 2: 7, 3: 4})) == [
        {"annotators": ["ann", "bob"], "size": 2, "traces": 2, "steps": 12},
        {"annotators": ["ann"], "size": 1, "traces": 1, "steps": 4},
    ]
