"""Bootstrap intervals of the step measures over rollouts (pure). The project's one bootstrap
(scoring.core.bootstrap: the same generator, index matrix and percentile interval): each of the step's four
groups of rollouts (resampled before and after it, forced before and after it) is resampled with
replacement on its own stream (seed, seed+1, seed+2, seed+3), every measure is recomputed on each resample,
and the interval is the percentile interval of the defined resamples."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from anchors.core.measures import KL_ALPHA, MEASURES, Rollout, step_measures
from anchors.core.similarity import SIMILARITY_THRESHOLD
from scoring.core.bootstrap import index_chunks, percentile_interval

DEFAULT_RESAMPLES = 200
DEFAULT_LEVEL = 0.95


def _draws(group: Sequence[Rollout], n_resamples: int, seed: int) -> list[list[Rollout]]:
    if not group:
        return [[] for _ in range(n_resamples)]
    rows: list[list[Rollout]] = []
    for _start, _stop, idx in index_chunks(len(group), n_resamples, seed):
        rows.extend([group[j] for j in row] for row in idx)
    return rows


def step_intervals(step: int, before: Sequence[Rollout], after: Sequence[Rollout], *,
                   forced_before: Sequence[Rollout] = (), forced_after: Sequence[Rollout] = (),
                   n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0, level: float = DEFAULT_LEVEL,
                   threshold: float = SIMILARITY_THRESHOLD,
                   alpha: float = KL_ALPHA) -> dict[str, list[float] | None]:
    """{measure: [low, high] or None} for every measure of ``step`` (None: undefined in every resample)."""
    groups = [_draws(g, n_resamples, seed + k) for k, g in enumerate((before, after, forced_before, forced_after))]
    stats = {m: np.full(n_resamples, np.nan) for m in MEASURES}
    for r in range(n_resamples):
        m = step_measures(step, groups[0][r], groups[1][r], forced_before=groups[2][r], forced_after=groups[3][r],
                          threshold=threshold, alpha=alpha)
        for name, value in m.values.items():
            if value is not None:
                stats[name][r] = value
    return {name: percentile_interval(values, level) for name, values in stats.items()}
