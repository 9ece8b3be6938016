"""Step-level agreement of two label sources: percent agreement, Cohen's
kappa (three verdicts, and invalid vs not), confusion matrix, agreement by
position in the chain, and the disagreeing steps (docs/agreement.md)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from agreement.core.pairs import codes_of, paired_steps
from scoring.core.labels import CODE_INVALID, VERDICTS

#: The verdict codes 0..2 (the classes of every kappa).
CODES = np.arange(len(VERDICTS))


def cohen_kappa(a, b, labels: Sequence[Any]) -> tuple[float | None, str | None]:
    """Cohen's kappa of two paired label vectors via sklearn.

    Returns (kappa, None), or (None, reason) when it is undefined: no pair,
    or both raters used one and the same class only (chance agreement 1).
    """
    # Imported here, not at the top: the pages import this module, and SciPy
    # and scikit-learn must not load at every process's start-up.
    from sklearn.metrics import cohen_kappa_score

    a = np.asarray(a)
    b = np.asarray(b)
    if len(a) == 0:
        return None, "no item was labelled by both"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = cohen_kappa_score(a, b, labels=list(labels))
    if k is None or not math.isfinite(k):
        only = sorted(set(a.tolist()) | set(b.tolist()))
        return None, f"both gave every item the same label ({only[0]!r}), so chance agreement is 1"
    return float(k), None


def confusion_of_codes(ref: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """The (reference x candidate) verdict counts of paired codes: a 3 x 3 int64 matrix, which sums over
    chunks of steps (agreement.core.tallies)."""
    k = len(VERDICTS)
    return np.bincount(np.asarray(ref, dtype=np.int64) * k + np.asarray(cand, dtype=np.int64),
                       minlength=k * k).reshape(k, k).astype(np.int64)


def kappa_of_confusion(cm: np.ndarray) -> tuple[float | None, str | None]:
    """:func:`cohen_kappa` of the pairs a confusion matrix counts: sklearn given each cell once, weighted by
    its count (integer weights: the same int64 confusion, hence the same float arithmetic, as the pairs)."""
    from sklearn.metrics import cohen_kappa_score

    k = cm.shape[0]
    if int(cm.sum()) == 0:
        return None, "no item was labelled by both"
    classes = np.arange(k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = cohen_kappa_score(np.repeat(classes, k), np.tile(classes, k), labels=list(classes),
                              sample_weight=np.asarray(cm, dtype=np.int64).ravel())
    if v is None or not math.isfinite(v):
        return None, "both gave every item the same label, so chance agreement is 1"
    return float(v), None


def _confusion_dict(cm: np.ndarray) -> dict[str, dict[str, int]]:
    k = len(VERDICTS)
    return {VERDICTS[i]: {VERDICTS[j]: int(cm[i, j]) for j in range(k)} for i in range(k)}


def step_agreement(reference_labels: pd.DataFrame, candidate_labels: pd.DataFrame) -> dict[str, Any]:
    """Step-level agreement on the steps labelled by both sources.

    Keys: steps_compared, percent_agreement (fraction 0..1), kappa (3
    classes), kappa_binary (invalid vs not invalid), confusion
    ``{reference_verdict: {candidate_verdict: count}}`` (all three verdicts
    as keys on both levels), undefined.
    """
    return step_agreement_of_pairs(paired_steps(reference_labels, candidate_labels))


def step_agreement_of_pairs(pairs: pd.DataFrame) -> dict[str, Any]:
    return step_agreement_of_confusion(confusion_of_codes(*codes_of(pairs)))


def step_agreement_of_confusion(cm: np.ndarray) -> dict[str, Any]:
    """:func:`step_agreement` from the confusion counts alone (every key is a function of them)."""
    n = int(cm.sum())
    undefined: dict[str, str] = {}
    out: dict[str, Any] = {"steps_compared": n}
    if n:
        out["percent_agreement"] = float(int(np.trace(cm)) / n)
    else:
        out["percent_agreement"] = None
        undefined["percent_agreement"] = "no step was labelled by both sources"
    k, why = kappa_of_confusion(cm)
    out["kappa"] = k
    if why:
        # undefined with pairs: every pair in one cell of the diagonal
        only = VERDICTS[int(np.argmax(cm.sum(axis=1)))] if n else None
        undefined["kappa"] = (
            "no step was labelled by both sources"
            if n == 0
            else f"both sources gave every step the same verdict ({only!r}), so chance agreement is 1"
        )
    inv = np.arange(cm.shape[0]) == CODE_INVALID
    binary = np.array([[cm[~inv][:, ~inv].sum(), cm[~inv][:, inv].sum()],
                       [cm[inv][:, ~inv].sum(), cm[inv][:, inv].sum()]], dtype=np.int64)
    kb, why = kappa_of_confusion(binary)
    out["kappa_binary"] = kb
    if why:
        only = "invalid" if n and binary[1].sum() else "not invalid"
        undefined["kappa_binary"] = (
            "no step was labelled by both sources"
            if n == 0
            else f"both sources called every step {only!r}, so chance agreement is 1"
        )
    out["confusion"] = _confusion_dict(cm)
    out["undefined"] = undefined
    return out


def agreement_by_position(reference_labels: pd.DataFrame, candidate_labels: pd.DataFrame) -> pd.DataFrame:
    """Agreement by step index ("where in the chain do judges go wrong").

    One row per step number that both sources labelled somewhere, sorted:
    step, steps (pairs compared), agree (same verdict), agreement
    (agree / steps), reference_invalid, candidate_invalid (how many of those
    steps each source called invalid).
    """
    return by_position_of_pairs(paired_steps(reference_labels, candidate_labels))


def by_position_of_pairs(pairs: pd.DataFrame) -> pd.DataFrame:
    ref, cand = codes_of(pairs)
    return by_position_of_counts(position_counts(pairs["step"].to_numpy(dtype=np.int64), ref, cand))


def position_counts(step: np.ndarray, ref: np.ndarray, cand: np.ndarray) -> pd.DataFrame:
    """Integer counts per step number (step, steps, agree, reference_invalid, candidate_invalid): the sums
    :func:`by_position_of_counts` reads, which add up over chunks of traces."""
    cols = ["step", "steps", "agree", "reference_invalid", "candidate_invalid"]
    if len(step) == 0:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    pos, inv = np.unique(step, return_inverse=True)
    return pd.DataFrame({
        "step": pos,
        "steps": np.bincount(inv).astype(np.int64),
        "agree": np.bincount(inv, weights=(ref == cand)).astype(np.int64),
        "reference_invalid": np.bincount(inv, weights=(ref == CODE_INVALID)).astype(np.int64),
        "candidate_invalid": np.bincount(inv, weights=(cand == CODE_INVALID)).astype(np.int64),
    })[cols]


def by_position_of_counts(counts: pd.DataFrame) -> pd.DataFrame:
    """:func:`agreement_by_position` of :func:`position_counts` (of one chunk, or several concatenated)."""
    cols = ["step", "steps", "agree", "agreement", "reference_invalid", "candidate_invalid"]
    if len(counts) == 0:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c == "agreement" else "int64") for c in cols})
    if not counts["step"].is_unique or not counts["step"].is_monotonic_increasing:
        counts = counts.groupby("step", sort=True).sum().reset_index()
    steps = counts["steps"].to_numpy(dtype=np.int64)
    agree = counts["agree"].to_numpy(dtype=np.int64)
    return pd.DataFrame(
        {
            "step": counts["step"].to_numpy(dtype=np.int64),
            "steps": steps,
            "agree": agree,
            "agreement": agree / steps,
            "reference_invalid": counts["reference_invalid"].to_numpy(dtype=np.int64),
            "candidate_invalid": counts["candidate_invalid"].to_numpy(dtype=np.int64),
        }
    )[cols]


def disagreements(reference_labels: pd.DataFrame, candidate_labels: pd.DataFrame) -> pd.DataFrame:
    """Steps labelled by both sources with different verdicts.

    Columns trace_id, step, reference_verdict, candidate_verdict, sorted by
    trace_id, step.
    """
    p = paired_steps(reference_labels, candidate_labels)
    p = p.loc[p["reference_verdict"].to_numpy() != p["candidate_verdict"].to_numpy()]
    return p[["trace_id", "step", "reference_verdict", "candidate_verdict"]].reset_index(drop=True)
