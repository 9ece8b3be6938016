"""Trace-level agreement on the first error: exact and within-one agreement
on t*, and the ProcessBench accuracies and F1 (docs/agreement.md)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from agreement.core.pairs import paired_traces


def processbench_f1(error_acc: float | None, correct_acc: float | None) -> float | None:
    """Harmonic mean of the two ProcessBench accuracies (0 if both are 0;
    None if either is undefined)."""
    if error_acc is None or correct_acc is None:
        return None
    s = error_acc + correct_acc
    return 0.0 if s == 0 else 2.0 * error_acc * correct_acc / s


def first_error_agreement(reference_scores: pd.DataFrame, candidate_scores: pd.DataFrame) -> dict[str, Any]:
    """First-error agreement on :func:`paired_traces`.

    Keys: traces_compared; first_error_exact (same t*, "none" = "none");
    first_error_within_1 (both none, or both a step and at most one apart);
    pb_error_traces / pb_error_acc (traces the reference says erroneous;
    share where the candidate finds the same t*); pb_correct_traces /
    pb_correct_acc (traces the reference says correct; share where the
    candidate finds no error either); pb_f1 (harmonic mean); undefined.
    """
    return first_error_of_pairs(paired_traces(reference_scores, candidate_scores))


def first_error_of_pairs(pairs: pd.DataFrame) -> dict[str, Any]:
    fr = pairs["reference_first_error"].to_numpy(dtype=float, na_value=0).astype(np.int64)
    fc = pairs["candidate_first_error"].to_numpy(dtype=float, na_value=0).astype(np.int64)
    n = len(fr)
    undefined: dict[str, str] = {}
    out: dict[str, Any] = {"traces_compared": int(n)}
    if n:
        out["first_error_exact"] = float(np.mean(fr == fc))
        within = ((fr == 0) & (fc == 0)) | ((fr > 0) & (fc > 0) & (np.abs(fr - fc) <= 1))
        out["first_error_within_1"] = float(np.mean(within))
    else:
        out["first_error_exact"] = out["first_error_within_1"] = None
        undefined["first_error_exact"] = undefined["first_error_within_1"] = (
            "no trace with N >= 1 was labelled completely by both sources"
        )
    err = fr > 0
    out["pb_error_traces"] = int(err.sum())
    out["pb_correct_traces"] = int((~err).sum())
    if err.any():
        out["pb_error_acc"] = float(np.mean(fc[err] == fr[err]))
    else:
        out["pb_error_acc"] = None
        undefined["pb_error_acc"] = (
            "the reference finds an error in none of the compared traces" if n else "no trace compared"
        )
    if (~err).any():
        out["pb_correct_acc"] = float(np.mean(fc[~err] == 0))
    else:
        out["pb_correct_acc"] = None
        undefined["pb_correct_acc"] = (
            "the reference finds an error in every compared trace" if n else "no trace compared"
        )
    out["pb_f1"] = processbench_f1(out["pb_error_acc"], out["pb_correct_acc"])
    if out["pb_f1"] is None:
        missing = [k for k in ("pb_error_acc", "pb_correct_acc") if out[k] is None]
        undefined["pb_f1"] = "needs both ProcessBench accuracies; undefined: " + ", ".join(
            f"{k} ({undefined[k]})" for k in missing
        )
    out["undefined"] = undefined
    return out
