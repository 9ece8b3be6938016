"""Sums of one pairing of two sources' steps, added chunk by chunk (pure; docs/agreement.md).

A report of the whole study (agreement.streamed) reads it in chunks of whole traces, in trace order, and
keeps of each chunk only what its metrics are functions of: the 3 x 3 confusion counts, the counts per
step number, each trace's confusion cells and calibration cells (compact per-trace arrays: the bootstrap
resamples traces), and the confidences of the compared steps that have one. Every metric is then the
same function of those sums as of the whole pairing at once (agreement.core.steps, calibration,
intervals), so the numbers do not depend on the chunk size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from agreement.core.calibration import RELIABILITY_BINS, calibration_of_arrays
from agreement.core.intervals import (
    calibration_cells,
    calibration_intervals_of,
    step_cells,
    step_intervals_of,
)
from agreement.core.pairs import codes_of
from agreement.core.steps import (
    by_position_of_counts,
    confusion_of_codes,
    position_counts,
    step_agreement_of_confusion,
)
from scoring.core.labels import CODE_INVALID, VERDICTS


def _stack(parts: list[np.ndarray], width: int) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros((0, width))


class StepTally:
    """The pairings (``agreement.core.pairs.paired_steps`` output) of chunks of whole traces, added in
    trace order. ``calibration``: also the candidate's confidences (its ``confidence`` column)."""

    def __init__(self, *, calibration: bool = False, n_bins: int = RELIABILITY_BINS) -> None:
        self.confusion = np.zeros((len(VERDICTS), len(VERDICTS)), dtype=np.int64)
        self.n_bins = n_bins
        self.calibration = calibration
        self._positions: list[pd.DataFrame] = []
        self._cells: list[np.ndarray] = []
        self._conf: list[np.ndarray] = []
        self._correct: list[np.ndarray] = []
        self._conf_cells: list[np.ndarray] = []

    def add(self, pairs: pd.DataFrame) -> None:
        if len(pairs) == 0:
            return
        ref, cand = codes_of(pairs)
        self.confusion += confusion_of_codes(ref, cand)
        self._positions.append(position_counts(pairs["step"].to_numpy(dtype=np.int64), ref, cand))
        self._cells.append(step_cells(pairs["trace_id"], ref, cand))
        if self.calibration:
            conf = pairs["confidence"].to_numpy(dtype=float)
            has = ~np.isnan(conf)
            if has.any():
                c, correct = conf[has], (ref == cand)[has].astype(float)
                self._conf.append(c)
                self._correct.append(correct)
                self._conf_cells.append(calibration_cells(pairs["trace_id"].loc[has], c, correct, self.n_bins))

    @property
    def n(self) -> int:
        return int(self.confusion.sum())

    def agreement(self) -> dict[str, Any]:
        """``agreement.core.steps.step_agreement`` of every pair added."""
        return step_agreement_of_confusion(self.confusion)

    def invalid_rates(self) -> tuple[float | None, float | None]:
        """How often the reference, and the candidate, call a compared step invalid."""
        n = self.n
        if not n:
            return None, None
        return float(int(self.confusion[CODE_INVALID].sum()) / n), float(int(self.confusion[:, CODE_INVALID].sum()) / n)

    def by_position(self) -> pd.DataFrame:
        counts = pd.concat(self._positions, ignore_index=True) if self._positions else position_counts(
            np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        return by_position_of_counts(counts)

    def calibration_metrics(self, has_confidence: bool) -> dict[str, Any]:
        c = np.concatenate(self._conf) if self._conf else np.zeros(0)
        correct = np.concatenate(self._correct) if self._correct else np.zeros(0)
        return calibration_of_arrays(c, correct, self.n, self.n_bins, has_confidence)

    def intervals(self, *, n_resamples: int, seed: int | None, level: float) -> dict[str, list[float] | None]:
        """``step_intervals`` (and with ``calibration`` ``calibration_intervals``) of every pair added."""
        out = step_intervals_of(_stack(self._cells, 9), n_resamples=n_resamples, seed=seed, level=level)
        if self.calibration:
            out.update(calibration_intervals_of(_stack(self._conf_cells, 3 * self.n_bins + 1), n_bins=self.n_bins,
                                                n_resamples=n_resamples, seed=seed, level=level))
        return out
