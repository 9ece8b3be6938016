"""Pure functions of generation (no ORM, no I/O): the unbiased pass@k of
Chen et al. (2021), maj@k, per-sample seeds and trace ids, and the
aggregate of one subject model's samples (docs/generation.md)."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator of pass@k from n samples of which c are correct:
    1 - C(n - c, k) / C(n, k), the chance that k of the n samples drawn without
    replacement hold at least one correct one. Computed as a product,
    1 - prod_{i = n-c+1..n} (1 - k / i), so large n does not overflow."""
    if not 0 <= c <= n:
        raise ValueError(f"c must lie in 0..n (n={n}, c={c})")
    if not 1 <= k <= n:
        raise ValueError(f"k must lie in 1..n (n={n}, k={k})")
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


@dataclass(frozen=True)
class Sample:
    """One completion of a problem: its normalized answer ("" when none was
    found) and whether it was correct (None: not checked)."""

    answer: str
    correct: bool | None


def majority_correct(samples: Sequence[Sample], k: int) -> bool:
    """maj@k on one problem: the most frequent answer among the first k
    samples (ties go to the answer seen first; samples without an answer do
    not vote) is correct. False when no sample of the first k gave an answer."""
    votes = Counter(s.answer for s in samples[:k] if s.answer)
    if not votes:
        return False
    top = max(votes.values())
    winner = next(s for s in samples[:k] if s.answer and votes[s.answer] == top)
    return bool(winner.correct)


@dataclass(frozen=True)
class Aggregate:
    problems: int
    samples: int
    accuracy: float | None  # correct samples / checked samples
    k: int
    pass_at_k: float | None  # mean over the problems with at least k samples
    maj_at_k: float | None
    problems_with_k: int  # how many problems the two means above are over


def aggregate(per_problem: Sequence[Sequence[Sample]], k: int) -> Aggregate:
    """Accuracy over every sample; pass@k and maj@k averaged over the
    problems that have at least k samples (a problem with fewer would bias
    pass@k downwards)."""
    checked = [s for samples in per_problem for s in samples if s.correct is not None]
    full = [samples for samples in per_problem if len(samples) >= k] if k >= 1 else []
    pk = [pass_at_k(len(s), sum(bool(x.correct) for x in s), k) for s in full]
    mk = [majority_correct(s, k) for s in full]
    return Aggregate(
        problems=len(per_problem),
        samples=sum(len(s) for s in per_problem),
        accuracy=sum(bool(s.correct) for s in checked) / len(checked) if checked else None,
        k=k,
        pass_at_k=sum(pk) / len(pk) if pk else None,
        maj_at_k=sum(mk) / len(mk) if mk else None,
        problems_with_k=len(full),
    )


def sample_seed(seed: int | None, sample: int) -> int | None:
    """The seed of sample ``sample`` (0-based): the configured seed plus the
    index, so K samples under a fixed seed differ and each one is reproducible."""
    return None if seed is None else seed + sample


def generated_trace_id(subject: str, version: int, problem_id: str, sample: int) -> str:
    """The trace id of one completion: the same (subject model, config version,
    problem, sample) always gives the same id, so a re-run or a re-delivered
    chunk never makes a second trace. Long problem ids are hashed to fit."""
    tid = f"gen/{subject}/v{version}/{problem_id}/s{sample}"
    if len(tid) <= 300:
        return tid
    digest = hashlib.sha256(problem_id.encode()).hexdigest()[:32]
    return f"gen/{subject}/v{version}/{digest}/s{sample}"
