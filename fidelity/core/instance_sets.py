"""Accuracy over GSM-Symbolic instance sets (Mirzadeh et al. 2024, §3). Pure.

The paper draws N instances of every template and calls the i-th instance of every template
"instance set i": one whole benchmark like GSM8K. A model's accuracy is then not one number but
a distribution over the N sets; it reports the mean and the standard deviation of those N
accuracies, and per template the share of its instances the model got right.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceSet:
    index: int
    n: int  # templates with an answered instance in this set
    correct: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.n


@dataclass(frozen=True)
class Distribution:
    sets: tuple[InstanceSet, ...]  # by instance index
    mean: float | None  # mean of the sets' accuracies
    sd: float | None  # population standard deviation of the sets' accuracies (numpy.std, ddof=0)
    per_template: dict[str, tuple[int, int]]  # template -> (correct, answered)


def distribution(results: Iterable[tuple[str, int, bool]]) -> Distribution:
    """``results``: (template, instance index, correct) for every answered instance. A set's accuracy
    is over the templates answered in it; the mean and sd are over the sets (None without any)."""
    by_set: dict[int, list[bool]] = defaultdict(list)
    by_template: dict[str, list[bool]] = defaultdict(list)
    for template, index, ok in results:
        by_set[index].append(bool(ok))
        by_template[template].append(bool(ok))
    sets = tuple(InstanceSet(i, len(v), sum(v)) for i, v in sorted(by_set.items()))
    accs = [s.accuracy for s in sets]
    mean = sum(accs) / len(accs) if accs else None
    sd = math.sqrt(sum((a - mean) ** 2 for a in accs) / len(accs)) if mean is not None else None
    per_template = {t: (sum(v), len(v)) for t, v in sorted(by_template.items())}
    return Distribution(sets, mean, sd, per_template)
