"""How far to trust a scanner: its answers against people's on the test split (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reasonlib.intervals import wilson

#: The F1 interval's bootstrap: resamples and seed (named on the scanner page and in its export).
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
#: Fewest traces for an F1 interval: a percentile bootstrap of 2 agreeing traces resamples only agreement and
#: printed "[1.000, 1.000]" (issue 31); below this the page says the sample is too small instead.
MIN_F1_INTERVAL_N = 10


@dataclass(frozen=True)
class Validation:
    n: int  # test traces with both a person's and the scanner's answer
    tp: int
    fp: int
    fn: int
    tn: int
    precision: float | None
    precision_ci: tuple[float, float] | None
    recall: float | None
    recall_ci: tuple[float, float] | None
    f1: float | None
    f1_ci: tuple[float, float] | None

    @property
    def f1_ci_note(self) -> str:
        """Why F1 has no interval, when it has a value but too few traces for one."""
        if self.f1 is not None and self.f1_ci is None and self.n < MIN_F1_INTERVAL_N:
            return f"no interval: {self.n} trace{'s' if self.n != 1 else ''}, at least {MIN_F1_INTERVAL_N} needed"
        return ""


def f1_of(tp: int, fp: int, fn: int) -> float | None:
    return None if 2 * tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def validate(pairs: Sequence[tuple[bool, bool]], *, n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
             level: float = 0.95) -> Validation:
    """``pairs`` are (person, scanner) answers, "yes" the positive class. Precision and recall get
    Wilson intervals (they are proportions of TP+FP and TP+FN); F1, not a proportion, a percentile
    bootstrap over the traces, from MIN_F1_INTERVAL_N traces on."""
    truth = np.array([p for p, _s in pairs], dtype=bool)
    said = np.array([s for _p, s in pairs], dtype=bool)
    tp = int(np.sum(truth & said))
    fp = int(np.sum(~truth & said))
    fn = int(np.sum(truth & ~said))
    tn = int(np.sum(~truth & ~said))
    f1_ci = None
    if len(pairs) >= MIN_F1_INTERVAL_N:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(pairs), size=(n_resamples, len(pairs)))
        t, s = truth[idx], said[idx]
        btp = np.sum(t & s, axis=1)
        denom = 2 * btp + np.sum(~t & s, axis=1) + np.sum(t & ~s, axis=1)
        stats = np.where(denom > 0, 2 * btp / np.maximum(denom, 1), np.nan)
        stats = stats[~np.isnan(stats)]
        if len(stats):
            alpha = (1 - level) / 2
            f1_ci = (float(np.quantile(stats, alpha)), float(np.quantile(stats, 1 - alpha)))
    return Validation(
        n=len(pairs), tp=tp, fp=fp, fn=fn, tn=tn,
        precision=tp / (tp + fp) if tp + fp else None, precision_ci=wilson(tp, tp + fp),
        recall=tp / (tp + fn) if tp + fn else None, recall_ci=wilson(tp, tp + fn),
        f1=f1_of(tp, fp, fn), f1_ci=f1_ci,
    )

