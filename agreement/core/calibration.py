"""Calibration of a candidate's step confidences against the reference:
expected calibration error, Brier score and the reliability curve
(docs/agreement.md)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from agreement.core.pairs import codes_of, paired_steps

#: Number of equal-width confidence bins of the reliability curve.
RELIABILITY_BINS = 10


def calibration(
    reference_labels: pd.DataFrame, candidate_labels: pd.DataFrame, n_bins: int = RELIABILITY_BINS
) -> dict[str, Any]:
    """Calibration of the candidate's confidences against the reference.

    On the steps labelled by both where the candidate gives a confidence
    ``c`` (column ``confidence``, 0..1): the candidate is *correct* when its
    verdict equals the reference verdict (3 classes), and ``c`` is read as
    its probability of being correct.

    Keys: steps_calibrated, ece, brier, reliability (``n_bins`` equal-width
    bins ``[k/n, (k+1)/n)``, the last one closed; each with bin, lower,
    upper, count, mean_confidence, accuracy, the last two None for an empty
    bin), undefined.
    """
    has = "confidence" in candidate_labels.columns
    return calibration_of_pairs(paired_steps(reference_labels, candidate_labels), n_bins, has)


def calibration_of_pairs(pairs: pd.DataFrame, n_bins: int = RELIABILITY_BINS, has_confidence: bool = True) -> dict[str, Any]:
    conf = pairs["confidence"].to_numpy(dtype=float)
    has = ~np.isnan(conf)
    ref, cand = codes_of(pairs)
    return calibration_of_arrays(conf[has], (ref == cand)[has].astype(float), len(pairs), n_bins, has_confidence)


def calibration_of_arrays(c: np.ndarray, correct: np.ndarray, n_pairs: int, n_bins: int = RELIABILITY_BINS,
                          has_confidence: bool = True) -> dict[str, Any]:
    """:func:`calibration` of the compared steps with a confidence: ``c`` their confidences and ``correct``
    (1.0 / 0.0) whether the candidate's verdict was the reference's, in pair order; ``n_pairs`` the steps
    compared (with or without a confidence)."""
    if int(n_bins) < 1:
        raise ValueError(f"n_bins: must be >= 1, got {n_bins!r}")
    n_bins = int(n_bins)
    n = len(c)
    b = np.minimum(np.floor(c * n_bins), n_bins - 1).astype(np.int64)
    counts = np.bincount(b, minlength=n_bins)
    sum_c = np.bincount(b, weights=c, minlength=n_bins)
    sum_ok = np.bincount(b, weights=correct, minlength=n_bins)
    rel = []
    for k in range(n_bins):
        nk = int(counts[k])
        rel.append(
            {
                "bin": k,
                "lower": k / n_bins,
                "upper": (k + 1) / n_bins,
                "count": nk,
                "mean_confidence": float(sum_c[k] / nk) if nk else None,
                "accuracy": float(sum_ok[k] / nk) if nk else None,
            }
        )
    out: dict[str, Any] = {"steps_calibrated": int(n), "reliability": rel}
    undefined: dict[str, str] = {}
    if n:
        nz = counts > 0
        out["ece"] = float(np.sum(np.abs(sum_ok[nz] - sum_c[nz])) / n)  # sum_k n_k/n |acc_k - conf_k|
        out["brier"] = float(np.mean((c - correct) ** 2))
    else:
        if n_pairs == 0:
            reason = "no step was labelled by both sources"
        elif not has_confidence:
            reason = "the candidate reports no confidences"
        else:
            reason = "the candidate gives no confidence on the steps labelled by both sources"
        out["ece"] = out["brier"] = None
        undefined["ece"] = undefined["brier"] = reason
    out["undefined"] = undefined
    return out
