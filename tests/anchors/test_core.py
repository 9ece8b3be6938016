"""The pure formulas of step importance against hand-computed cases (anchors/core, docs/step-importance.md)."""

from __future__ import annotations

import math

import pytest

from anchors.core.alignment import align_chunks
from anchors.core.intervals import step_intervals
from anchors.core.measures import Rollout, accuracy, kl_divergence, step_measures
from anchors.core.sentences import first_sentence
from anchors.core.similarity import SIMILARITY_THRESHOLD, differs, similarities


def R(answer: str, correct: bool | None = None, sim: float | None = None) -> Rollout:
    return Rollout(answer, correct if correct is not None else answer == "5", sim)


def test_accuracy_counts_only_known_correctness():
    assert accuracy([R("5"), R("7"), Rollout("9", None)]) == 0.5
    assert accuracy([Rollout("9", None)]) is None and accuracy([]) is None


def test_kl_with_laplace_smoothing_by_hand():
    # support {5, 7}, alpha 1: P = (3/4, 1/4), Q = (2/4, 2/4)
    expected = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    assert kl_divergence(["5", "5"], ["5", "7"]) == pytest.approx(expected)
    assert kl_divergence(["5", "5"], ["5", "5"]) == 0.0
    assert kl_divergence([], ["5"]) is None
    # an answer only one group gave still has a finite probability in the other
    assert math.isfinite(kl_divergence(["5"], ["7"]))
    # no answer ("") is an answer of its own
    assert kl_divergence(["", ""], ["5", "5"]) > 0


def test_step_measures_by_hand():
    # Before step 2: 4 resamples, 2 right; two of them write another first sentence (similarity 0.1, 0.2),
    # both wrong; one writes the same (0.9); one wrote nothing comparable (None).
    before = [R("5", sim=0.9), R("7", sim=0.1), R("7", sim=0.2), R("5", sim=None)]
    after = [R("5"), R("5"), R("5"), R("7")]
    forced_before, forced_after = [R("3")], [R("5")]
    m = step_measures(2, before, after, forced_before=forced_before, forced_after=forced_after).values
    assert m["accuracy"] == 0.5
    assert m["resampling_importance_accuracy"] == pytest.approx(0.25)
    # KL(after || before): support {5, 7}, after (3+1, 1+1)/6, before (2+1, 2+1)/6
    p, q = (4 / 6, 2 / 6), (3 / 6, 3 / 6)
    assert m["resampling_importance_kl"] == pytest.approx(sum(a * math.log(a / b) for a, b in zip(p, q, strict=True)))
    assert m["counterfactual_importance_accuracy"] == pytest.approx(0.75)  # 3/4 - 0/2
    # KL(after || dissimilar): after (4/6, 2/6), dissimilar {7, 7}: (0+1, 2+1)/4
    q = (1 / 4, 3 / 4)
    assert m["counterfactual_importance_kl"] == pytest.approx(sum(a * math.log(a / b) for a, b in zip(p, q, strict=True)))
    assert m["forced_importance_accuracy"] == 1.0
    assert m["different_trajectories_fraction"] == pytest.approx(2 / 3)
    assert m["overdeterminedness"] == pytest.approx(1 / 3)


def test_a_step_with_no_dissimilar_resample_has_no_counterfactual_importance():
    before = [R("5", sim=1.0)] * 3
    m = step_measures(1, before, [R("5")] * 3).values
    assert m["counterfactual_importance_accuracy"] is None and m["counterfactual_importance_kl"] is None
    assert m["different_trajectories_fraction"] == 0.0 and m["overdeterminedness"] == 1.0
    assert m["resampling_importance_accuracy"] == 0.0 and m["forced_importance_accuracy"] is None


def test_similarity_of_sentences():
    sims = similarities("Plan: add everything up.", ["Plan: add everything up.", "Plan: multiply them together.", ""])
    assert sims[0] == pytest.approx(1.0) and sims[2] is None
    assert sims[1] < SIMILARITY_THRESHOLD  # only "plan" is shared
    assert differs(sims[1]) is True and differs(sims[0]) is False and differs(None) is None
    # a paraphrase sharing most words stays above the threshold
    near = similarities("Adding 5 gives 3 + 5 = 8.", ["Adding 5 gives 8."])[0]
    assert near >= SIMILARITY_THRESHOLD


def test_first_sentence():
    assert first_sentence("\n\nPlan: add everything up.\n\nAdding 5 gives 8.") == "Plan: add everything up."
    assert first_sentence(" So x = 3. Then y.") == "So x = 3."
    assert first_sentence("\n</think>\n\nThe answer is 5.") == ""
    assert first_sentence("no stop at all") == "no stop at all"


def test_bootstrap_intervals_contain_the_estimate_and_collapse_on_constant_groups():
    before = [R("5", sim=0.1), R("7", sim=0.1), R("5", sim=0.9), R("7", sim=0.9)] * 3
    after = [R("5")] * 12
    iv = step_intervals(2, before, after, n_resamples=300, seed=1)
    lo, hi = iv["resampling_importance_accuracy"]
    assert lo <= 0.5 <= hi and hi <= 1.0
    assert iv["accuracy"][0] < 0.5 < iv["accuracy"][1]
    same = step_intervals(1, [R("5", sim=1.0)] * 5, [R("5")] * 5, n_resamples=50)
    assert same["resampling_importance_accuracy"] == [0.0, 0.0]
    assert same["counterfactual_importance_accuracy"] is None  # undefined in every resample
    # the same seed gives the same interval
    assert step_intervals(2, before, after, n_resamples=300, seed=1) == iv


def test_align_chunks_to_paragraph_steps():
    steps = ["I start with 3. Plan: add.", "Adding 5 gives 8.", "Wait, let me check: 8."]
    chunks = ["I start with 3.", "Plan: add.", "Adding  5 gives 8.", "Not in the thought.", "Wait, let me check: 8."]
    assert align_chunks(chunks, steps) == [0, 0, 1, None, 2]
    # a repeated sentence goes to its own occurrence, not back to the first
    assert align_chunks(["Ok.", "Ok."], ["Ok.", "Ok."]) == [0, 1]
