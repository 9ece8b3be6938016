"""Step importance from rollouts (pure; docs/step-importance.md).

A thought of n steps has prefix positions 0..n: position k keeps the first k steps and the model writes
the rest. Step i (1-based) is measured by two groups of rollouts:

* ``before`` -- resampled from position i-1: the model writes step i anew (and everything after it);
* ``after`` -- resampled from position i: step i is kept.

Every measure compares ``after`` with ``before`` (or a part of it); positive accuracy forms mean keeping
the step makes the answer more often right. Answers are compared as the caller normalised them; "" (no
answer) is a category of its own in the answer distributions."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from anchors.core.similarity import SIMILARITY_THRESHOLD, differs

#: Additive (Laplace) smoothing of the answer distributions in every KL: alpha pseudo-counts for each answer
#: seen in either group, so an answer one group never gave has a small, not a zero, probability.
KL_ALPHA = 1.0

MEASURES = ("accuracy", "resampling_importance_accuracy", "resampling_importance_kl",
            "counterfactual_importance_accuracy", "counterfactual_importance_kl",
            "forced_importance_accuracy", "forced_importance_kl",
            "different_trajectories_fraction", "overdeterminedness")


@dataclass(frozen=True)
class Rollout:
    """One continuation from a prefix position: its answer (normalised; "" none), whether it is correct
    (None: no gold to check) and, for a resampled one, the TF-IDF similarity of its first new sentence
    with the original step it replaced (None: not compared, or no sentence)."""

    answer: str
    correct: bool | None
    similarity: float | None = None


@dataclass
class StepMeasures:
    step: int
    values: dict[str, float | None] = field(default_factory=dict)
    n: int = 0  # resampled rollouts behind the step (before + after)
    n_dissimilar: int = 0  # resamples of the step whose first sentence differs in meaning


def accuracy(rollouts: Sequence[Rollout]) -> float | None:
    """Share of correct answers among rollouts whose correctness is known (None: none known)."""
    known = [r.correct for r in rollouts if r.correct is not None]
    return sum(known) / len(known) if known else None


def kl_divergence(p_answers: Sequence[str], q_answers: Sequence[str], alpha: float = KL_ALPHA) -> float | None:
    """D_KL(P || Q) in nats between the answer distributions of two groups, each smoothed by ``alpha``
    pseudo-counts over the answers seen in either group. None when a group is empty."""
    if not p_answers or not q_answers:
        return None
    support = sorted(set(p_answers) | set(q_answers))
    p_counts, q_counts = Counter(p_answers), Counter(q_answers)
    p_total = len(p_answers) + alpha * len(support)
    q_total = len(q_answers) + alpha * len(support)
    out = 0.0
    for a in support:
        p = (p_counts[a] + alpha) / p_total
        q = (q_counts[a] + alpha) / q_total
        out += p * math.log(p / q)
    return max(0.0, out)


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def dissimilar(rollouts: Sequence[Rollout], threshold: float = SIMILARITY_THRESHOLD) -> list[Rollout]:
    return [r for r in rollouts if differs(r.similarity, threshold) is True]


def step_measures(step: int, before: Sequence[Rollout], after: Sequence[Rollout], *,
                  forced_before: Sequence[Rollout] = (), forced_after: Sequence[Rollout] = (),
                  threshold: float = SIMILARITY_THRESHOLD, alpha: float = KL_ALPHA) -> StepMeasures:
    """Every measure of step ``step`` from its two groups of resampled rollouts and (optionally) the forced
    answers at the same two positions. A measure that cannot be computed (a group empty, no gold) is None."""
    compared = [r for r in before if r.similarity is not None]
    cf = dissimilar(before, threshold)
    acc_before, acc_after = accuracy(before), accuracy(after)
    values: dict[str, float | None] = {
        "accuracy": acc_before,
        "resampling_importance_accuracy": _diff(acc_after, acc_before),
        "resampling_importance_kl": kl_divergence([r.answer for r in after], [r.answer for r in before], alpha),
        "counterfactual_importance_accuracy": _diff(acc_after, accuracy(cf)),
        "counterfactual_importance_kl": kl_divergence([r.answer for r in after], [r.answer for r in cf], alpha),
        "forced_importance_accuracy": _diff(accuracy(forced_after), accuracy(forced_before)),
        "forced_importance_kl": kl_divergence([r.answer for r in forced_after], [r.answer for r in forced_before],
                                              alpha),
        "different_trajectories_fraction": len(cf) / len(compared) if compared else None,
        "overdeterminedness": (len(compared) - len(cf)) / len(compared) if compared else None,
    }
    return StepMeasures(step, values, n=len(before) + len(after), n_dissimilar=len(cf))
