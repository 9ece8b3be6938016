"""Agreement between label sources (spec: "Agreement between two label sources").

Pure functions over the long tables of the scoring core:

* step labels of one source: ``trace_id, step, verdict[, skeleton_refs, confidence]``
  (at most one row per step; a null verdict means "not labelled");
* raw labels of several annotators: ``trace_id, step, annotator, verdict``;
* per-trace scores of one source (the output of ``score_traces``):
  ``trace_id, n_steps, first_error, process[, complete]``;
* holistic ratings: ``trace_id, rating[, annotator]`` (0-10).

Every metric that cannot be computed is ``None`` and the reason is recorded
in an ``undefined`` dict (metric name -> plain-language reason); no NaN is
ever returned.  Intervals are seeded percentile bootstraps that resample
traces (pairs of scores) jointly, like ``aggregate.bootstrap_ci``.  Users'
documentation: ``docs/agreement.md``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score

from .labels import CODE_INVALID, VERDICTS, complete_traces, verdict_codes
from .profile import DEFAULT, Profile
from .scores import estimate_hazard, score_traces

__all__ = [
    "DEFAULT_OMEGA_GRID",
    "RELIABILITY_BINS",
    "agreement_by_position",
    "agreement_metrics",
    "annotator_agreement",
    "calibration",
    "cohen_kappa",
    "correlation",
    "disagreements",
    "first_error_agreement",
    "mean_ratings",
    "paired_steps",
    "paired_traces",
    "processbench_f1",
    "rating_correlation",
    "score_correlation",
    "step_agreement",
    "tune_omega",
]

#: Number of equal-width confidence bins of the reliability curve.
RELIABILITY_BINS = 10
#: Default omega grid of :func:`tune_omega`: 0, 0.5, ..., 10.
DEFAULT_OMEGA_GRID: tuple[float, ...] = tuple(k / 2 for k in range(21))

# Max. number of (resample x trace) cells per bootstrap chunk: small enough
# for the working arrays to stay in the CPU cache (measured fastest).
_CHUNK_ELEMS = 100_000
_CODES = np.arange(len(VERDICTS))


# ---------------------------------------------------------------------------
# Input preparation
# ---------------------------------------------------------------------------
def _require(df: pd.DataFrame, cols: Iterable[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{what}: expected a DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}")


def _int_steps(s: pd.Series, what: str) -> np.ndarray:
    v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(v).any() or (v != np.floor(v)).any():
        raise ValueError(f"{what}: step must be an integer")
    return v.astype(np.int64)


def _confidences(s: pd.Series, what: str) -> np.ndarray:
    v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isnan(v) & ((v < 0) | (v > 1))
    if bad.any():
        raise ValueError(f"{what}: confidence must be within [0, 1], got {v[bad][0]!r}")
    return v


def _step_table(labels: pd.DataFrame, what: str, *, with_confidence: bool = False) -> pd.DataFrame:
    """Labelled steps of one source -> trace_id, step, code[, confidence]."""
    _require(labels, ["trace_id", "step", "verdict"], what)
    d = labels.loc[labels["verdict"].notna()]
    out = pd.DataFrame(
        {
            "trace_id": d["trace_id"].to_numpy(),
            "step": _int_steps(d["step"], what),
            "code": verdict_codes(d["verdict"]).astype(np.int64),
        }
    )
    if with_confidence:
        conf = d["confidence"] if "confidence" in d.columns else pd.Series(np.nan, index=d.index)
        out["confidence"] = _confidences(conf, what)
    dup = out.duplicated(["trace_id", "step"])
    if dup.any():
        r = out.loc[dup].iloc[0]
        raise ValueError(f"{what}: trace {r['trace_id']!r} step {r['step']} labelled twice")
    return out


def paired_steps(reference_labels: pd.DataFrame, candidate_labels: pd.DataFrame) -> pd.DataFrame:
    """The steps labelled by both sources.

    Columns trace_id, step, reference_verdict, candidate_verdict,
    confidence (the candidate's, NaN where it gave none), sorted by
    trace_id, step.  Rows with a null verdict count as unlabelled; a source
    labelling a step twice raises ValueError.
    """
    ref = _step_table(reference_labels, "reference labels")
    cand = _step_table(candidate_labels, "candidate labels", with_confidence=True)
    m = ref.merge(cand, on=["trace_id", "step"], how="inner", suffixes=("_ref", "_cand"))
    m = _sorted(m, ["trace_id", "step"])
    verd = np.asarray(VERDICTS, dtype=object)
    return pd.DataFrame(
        {
            "trace_id": m["trace_id"].to_numpy(),
            "step": m["step"].to_numpy(dtype=np.int64),
            "reference_verdict": verd[m["code_ref"].to_numpy(dtype=np.int64)],
            "candidate_verdict": verd[m["code_cand"].to_numpy(dtype=np.int64)],
            "confidence": m["confidence"].to_numpy(dtype=float),
        }
    )


def _sorted(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    try:
        return df.sort_values(cols, kind="mergesort").reset_index(drop=True)
    except TypeError:  # unorderable mixed trace ids: keep input order
        return df.reset_index(drop=True)


def _codes_of(pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return (
        verdict_codes(pairs["reference_verdict"]).astype(np.int64),
        verdict_codes(pairs["candidate_verdict"]).astype(np.int64),
    )


# ---------------------------------------------------------------------------
# Step level
# ---------------------------------------------------------------------------
def cohen_kappa(a, b, labels: Sequence[Any]) -> tuple[float | None, str | None]:
    """Cohen's kappa of two paired label vectors via sklearn.

    Returns (kappa, None), or (None, reason) when it is undefined: no pair,
    or both raters used one and the same class only (chance agreement 1).
    """
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


def _confusion(ref: np.ndarray, cand: np.ndarray) -> dict[str, dict[str, int]]:
    k = len(VERDICTS)
    cm = np.bincount(ref * k + cand, minlength=k * k).reshape(k, k)
    return {VERDICTS[i]: {VERDICTS[j]: int(cm[i, j]) for j in range(k)} for i in range(k)}


def step_agreement(reference_labels: pd.DataFrame, candidate_labels: pd.DataFrame) -> dict[str, Any]:
    """Step-level agreement on the steps labelled by both sources.

    Keys: steps_compared, percent_agreement (fraction 0..1), kappa (3
    classes), kappa_binary (invalid vs not invalid), confusion
    ``{reference_verdict: {candidate_verdict: count}}`` (all three verdicts
    as keys on both levels), undefined.
    """
    return _step_agreement(paired_steps(reference_labels, candidate_labels))


def _step_agreement(pairs: pd.DataFrame) -> dict[str, Any]:
    ref, cand = _codes_of(pairs)
    n = len(ref)
    undefined: dict[str, str] = {}
    out: dict[str, Any] = {"steps_compared": int(n)}
    if n:
        out["percent_agreement"] = float(np.mean(ref == cand))
    else:
        out["percent_agreement"] = None
        undefined["percent_agreement"] = "no step was labelled by both sources"
    k, why = cohen_kappa(ref, cand, _CODES)  # integer codes: much faster in sklearn
    out["kappa"] = k
    if why:
        only = VERDICTS[int(ref[0])] if n else None
        undefined["kappa"] = (
            "no step was labelled by both sources"
            if n == 0
            else f"both sources gave every step the same verdict ({only!r}), so chance agreement is 1"
        )
    rb, cb = (ref == CODE_INVALID).astype(np.int64), (cand == CODE_INVALID).astype(np.int64)
    kb, why = cohen_kappa(rb, cb, [0, 1])
    out["kappa_binary"] = kb
    if why:
        only = "invalid" if n and rb[0] else "not invalid"
        undefined["kappa_binary"] = (
            "no step was labelled by both sources"
            if n == 0
            else f"both sources called every step {only!r}, so chance agreement is 1"
        )
    out["confusion"] = _confusion(ref, cand)
    out["undefined"] = undefined
    return out


def agreement_by_position(reference_labels: pd.DataFrame, candidate_labels: pd.DataFrame) -> pd.DataFrame:
    """Agreement by step index ("where in the chain do judges go wrong").

    One row per step number that both sources labelled somewhere, sorted:
    step, steps (pairs compared), agree (same verdict), agreement
    (agree / steps), reference_invalid, candidate_invalid (how many of those
    steps each source called invalid).
    """
    return _by_position(paired_steps(reference_labels, candidate_labels))


def _by_position(pairs: pd.DataFrame) -> pd.DataFrame:
    ref, cand = _codes_of(pairs)
    step = pairs["step"].to_numpy(dtype=np.int64)
    cols = ["step", "steps", "agree", "agreement", "reference_invalid", "candidate_invalid"]
    if len(step) == 0:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c == "agreement" else "int64") for c in cols})
    pos, inv = np.unique(step, return_inverse=True)
    steps = np.bincount(inv)
    agree = np.bincount(inv, weights=(ref == cand)).astype(np.int64)
    return pd.DataFrame(
        {
            "step": pos,
            "steps": steps,
            "agree": agree,
            "agreement": agree / steps,
            "reference_invalid": np.bincount(inv, weights=(ref == CODE_INVALID)).astype(np.int64),
            "candidate_invalid": np.bincount(inv, weights=(cand == CODE_INVALID)).astype(np.int64),
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


# ---------------------------------------------------------------------------
# Calibration
# ---------------------------------------------------------------------------
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
    return _calibration(paired_steps(reference_labels, candidate_labels), n_bins, has)


def _calibration(pairs: pd.DataFrame, n_bins: int = RELIABILITY_BINS, has_confidence: bool = True) -> dict[str, Any]:
    if int(n_bins) < 1:
        raise ValueError(f"n_bins: must be >= 1, got {n_bins!r}")
    n_bins = int(n_bins)
    conf = pairs["confidence"].to_numpy(dtype=float)
    has = ~np.isnan(conf)
    ref, cand = _codes_of(pairs)
    c = conf[has]
    correct = (ref == cand)[has].astype(float)
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
        if len(pairs) == 0:
            reason = "no step was labelled by both sources"
        elif not has_confidence:
            reason = "the candidate reports no confidences"
        else:
            reason = "the candidate gives no confidence on the steps labelled by both sources"
        out["ece"] = out["brier"] = None
        undefined["ece"] = undefined["brier"] = reason
    out["undefined"] = undefined
    return out


# ---------------------------------------------------------------------------
# Trace level: first error
# ---------------------------------------------------------------------------
def _score_table(scores: pd.DataFrame, what: str) -> pd.DataFrame:
    _require(scores, ["trace_id", "n_steps", "first_error", "process"], what)
    ids = pd.Index(scores["trace_id"])
    if not ids.is_unique:
        raise ValueError(f"{what}: trace_id {ids[ids.duplicated()][0]!r} appears twice")
    n = pd.to_numeric(scores["n_steps"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(n).any() or (n < 0).any() or (n != np.floor(n)).any():
        raise ValueError(f"{what}: n_steps must be integers >= 0")
    fe_s = scores["first_error"]
    fe = pd.to_numeric(fe_s, errors="raise") if fe_s.dtype == object else fe_s
    fe = fe.to_numpy(dtype=float, na_value=np.nan)
    if (~np.isnan(fe) & (fe != np.floor(fe))).any():
        raise ValueError(f"{what}: first_error must be a step number or null")
    fe = np.where(np.isnan(fe) | (fe < 1), 0, fe).astype(np.int64)  # 0 = none
    proc = pd.to_numeric(scores["process"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    if "complete" in scores.columns:
        comp = scores["complete"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    else:
        comp = np.ones(len(scores), dtype=bool)
    return pd.DataFrame(
        {"trace_id": ids.to_numpy(), "n": n.astype(np.int64), "fe": fe, "process": proc, "complete": comp}
    )


def paired_traces(reference_scores: pd.DataFrame, candidate_scores: pd.DataFrame) -> pd.DataFrame:
    """The traces both sources labelled completely, with ``N >= 1``.

    Inputs are per-trace scores (``score_traces`` output or any table with
    trace_id, n_steps, first_error, process); a ``complete`` column, if
    present, marks which traces count, otherwise every row does.  The two
    sources must agree on ``n_steps`` (ValueError otherwise).

    Columns trace_id, n_steps, reference_first_error, candidate_first_error
    (Int64, NA = no error; 0, negative and NaN values read as "no error"),
    reference_process, candidate_process; sorted by trace_id.
    """
    ref = _score_table(reference_scores, "reference scores")
    cand = _score_table(candidate_scores, "candidate scores")
    m = ref.merge(cand, on="trace_id", how="inner", suffixes=("_ref", "_cand"))
    bad = m["n_ref"].to_numpy() != m["n_cand"].to_numpy()
    if bad.any():
        r = m.loc[bad].iloc[0]
        raise ValueError(
            f"scores: trace {r['trace_id']!r} has n_steps {r['n_ref']} in the reference "
            f"but {r['n_cand']} in the candidate"
        )
    keep = m["complete_ref"].to_numpy() & m["complete_cand"].to_numpy() & (m["n_ref"].to_numpy() >= 1)
    m = _sorted(m.loc[keep], ["trace_id"])
    fr = m["fe_ref"].to_numpy(dtype=np.int64)
    fc = m["fe_cand"].to_numpy(dtype=np.int64)
    return pd.DataFrame(
        {
            "trace_id": m["trace_id"].to_numpy(),
            "n_steps": m["n_ref"].to_numpy(dtype=np.int64),
            "reference_first_error": pd.arrays.IntegerArray(fr, fr == 0),
            "candidate_first_error": pd.arrays.IntegerArray(fc, fc == 0),
            "reference_process": m["process_ref"].to_numpy(dtype=float),
            "candidate_process": m["process_cand"].to_numpy(dtype=float),
        }
    )


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
    return _first_error(paired_traces(reference_scores, candidate_scores))


def _first_error(pairs: pd.DataFrame) -> dict[str, Any]:
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


# ---------------------------------------------------------------------------
# Correlations with a vectorised bootstrap
# ---------------------------------------------------------------------------
def _check_level(level: float, n_resamples: int) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: must be within (0, 1), got {level!r}")
    if int(n_resamples) < 1:
        raise ValueError(f"n_resamples: must be >= 1, got {n_resamples!r}")


def _boot_correlations(
    x: np.ndarray, y: np.ndarray, n_resamples: int, seed: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap distributions of Pearson r and Spearman rho of (x, y).

    Each resample draws n trace indices with replacement (one seeded
    generator; index matrix drawn chunk by chunk, the same stream as one
    (n_resamples, n) matrix).  Per resample, with x and y centred on their
    full-sample means (for numerical accuracy):

    * the counts of every distinct x (and y) value in the resample give
      sum x, sum x^2 (sum y, sum y^2) as small matrix products, and
      sum x*y is one gather of the products x_i*y_i; Pearson r is the
      centred dot product cov / sqrt(var_x * var_y) of the resample;
    * Spearman: the average rank of a distinct value within the resample
      is (#resampled values below it) + (its count + 1) / 2, a cumulative
      sum of those counts; Pearson of the ranks then gives rho - identical
      to ``scipy.stats.rankdata`` on each resample, without sorting.

    Resamples in which x or y is constant give NaN.
    """
    n = len(x)
    vals_x, ux = np.unique(x - x.mean(), return_inverse=True)
    vals_y, uy = np.unique(y - y.mean(), return_inverse=True)
    ux, uy = ux.astype(np.int64).ravel(), uy.astype(np.int64).ravel()
    kx, ky = len(vals_x), len(vals_y)
    pxy = vals_x[ux] * vals_y[uy]
    mid = (n + 1) / 2.0
    rng = np.random.default_rng(seed)
    pear = np.empty(n_resamples)
    spear = np.empty(n_resamples)
    step = max(1, _CHUNK_ELEMS // max(1, n))
    for start in range(0, n_resamples, step):
        stop = min(n_resamples, start + step)
        k = stop - start
        idx = rng.integers(0, n, size=(k, n))
        row = np.arange(k, dtype=np.int64)[:, None]
        fx = ux[idx]
        fx += row * kx  # flat index into the (k, kx) class-count matrix
        fy = uy[idx]
        fy += row * ky
        cnt_x = np.bincount(fx.ravel(), minlength=k * kx).reshape(k, kx).astype(float)
        cnt_y = np.bincount(fy.ravel(), minlength=k * ky).reshape(k, ky).astype(float)
        degenerate = (cnt_x.max(axis=1) == n) | (cnt_y.max(axis=1) == n)

        sx, sxx = cnt_x @ vals_x, cnt_x @ (vals_x * vals_x)
        sy, syy = cnt_y @ vals_y, cnt_y @ (vals_y * vals_y)
        sxy = np.take(pxy, idx).sum(axis=1)
        cov, vx, vy = sxy - sx * sy / n, sxx - sx * sx / n, syy - sy * sy / n
        with np.errstate(invalid="ignore", divide="ignore"):
            pear[start:stop] = np.where(degenerate, np.nan, np.clip(cov / np.sqrt(vx * vy), -1.0, 1.0))

        # centred average rank of each distinct value: cum count - (count - 1)/2 - (n + 1)/2
        ax = np.cumsum(cnt_x, axis=1)
        ax -= 0.5 * cnt_x
        ax += 0.5 - mid
        ay = np.cumsum(cnt_y, axis=1)
        ay -= 0.5 * cnt_y
        ay += 0.5 - mid
        r_xy = np.einsum("ij,ij->i", np.take(ax, fx), np.take(ay, fy))
        r_xx = np.einsum("ij,ij,ij->i", cnt_x, ax, ax)
        r_yy = np.einsum("ij,ij,ij->i", cnt_y, ay, ay)
        with np.errstate(invalid="ignore", divide="ignore"):
            spear[start:stop] = np.where(degenerate, np.nan, np.clip(r_xy / np.sqrt(r_xx * r_yy), -1.0, 1.0))
    return pear, spear


def _interval(stats_: np.ndarray, level: float) -> tuple[list[float] | None, str | None]:
    ok = stats_[~np.isnan(stats_)]
    if len(ok) == 0:
        return None, "every bootstrap resample was constant"
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(ok, [tail, 100.0 - tail])
    return [float(lo), float(hi)], None


def correlation(
    x,
    y,
    *,
    n_resamples: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
    names: tuple[str, str] = ("x", "y"),
) -> dict[str, Any]:
    """Pearson r and Spearman rho of paired values, each with a percentile
    bootstrap interval (pairs resampled jointly).

    Pairs with a missing value are dropped.  Keys: n, pearson_r,
    pearson_ci, spearman_rho, spearman_ci ([low, high] or None), undefined.
    Undefined with fewer than 3 pairs or when either side is constant.
    Resamples that happen to be constant are left out of the percentiles
    (as NaN values are in ``aggregate.bootstrap_ci``).
    """
    _check_level(level, n_resamples)
    xa = pd.to_numeric(pd.Series(np.asarray(x, dtype=object).ravel()), errors="coerce").to_numpy(
        dtype=float, na_value=np.nan
    )
    ya = pd.to_numeric(pd.Series(np.asarray(y, dtype=object).ravel()), errors="coerce").to_numpy(
        dtype=float, na_value=np.nan
    )
    if len(xa) != len(ya):
        raise ValueError(f"correlation: {len(xa)} {names[0]} values but {len(ya)} {names[1]} values")
    ok = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[ok], ya[ok]
    n = len(xa)
    out: dict[str, Any] = {
        "n": int(n),
        "pearson_r": None,
        "pearson_ci": None,
        "spearman_rho": None,
        "spearman_ci": None,
    }
    undefined: dict[str, str] = {}
    reason = None
    if n < 3:
        reason = f"fewer than 3 paired values (n = {n})"
    elif np.all(xa == xa[0]):
        reason = f"the {names[0]} values are constant"
    elif np.all(ya == ya[0]):
        reason = f"the {names[1]} values are constant"
    if reason:
        for k in ("pearson_r", "pearson_ci", "spearman_rho", "spearman_ci"):
            undefined[k] = reason
        out["undefined"] = undefined
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = float(sps.pearsonr(xa, ya)[0])
        rho = float(sps.spearmanr(xa, ya)[0])
    out["pearson_r"] = max(-1.0, min(1.0, r))
    out["spearman_rho"] = max(-1.0, min(1.0, rho))
    pear, spear = _boot_correlations(xa, ya, int(n_resamples), seed)
    for key, dist in (("pearson_ci", pear), ("spearman_ci", spear)):
        ci, why = _interval(dist, level)
        out[key] = ci
        if why:
            undefined[key] = why
    out["undefined"] = undefined
    return out


def score_correlation(
    reference_scores: pd.DataFrame,
    candidate_scores: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Pearson / Spearman between the two sources' process scores on
    :func:`paired_traces` (see :func:`correlation` for the keys)."""
    p = paired_traces(reference_scores, candidate_scores)
    return _score_correlation(p, n_resamples, seed, level)


def _score_correlation(pairs: pd.DataFrame, n_resamples: int, seed: int | None, level: float) -> dict[str, Any]:
    return _correlate_or_explain(
        pairs["reference_process"], pairs["candidate_process"], ("reference process scores", "candidate process scores"),
        "no trace with N >= 1 was labelled completely by both sources", n_resamples, seed, level,
    )


def _correlate_or_explain(x: pd.Series, y: pd.Series, names: tuple[str, str], empty_reason: str,
                          n_resamples: int, seed: int | None, level: float) -> dict[str, Any]:
    """:func:`correlation`, with ``empty_reason`` as the reason when nothing was paired."""
    out = correlation(x.to_numpy(dtype=float), y.to_numpy(dtype=float), n_resamples=n_resamples, seed=seed,
                      level=level, names=names)
    if len(x) == 0:
        for k in out["undefined"]:
            out["undefined"][k] = empty_reason
    return out


def mean_ratings(ratings: pd.DataFrame) -> pd.Series:
    """Mean 0-10 holistic rating per trace (over annotators).

    ``ratings``: trace_id, rating[, annotator]; null ratings are ignored,
    values outside 0..10 raise ValueError.  Returns a float Series indexed
    by trace_id (sorted), named ``rating``.
    """
    _require(ratings, ["trace_id", "rating"], "ratings")
    v = pd.to_numeric(ratings["rating"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    raw_missing = ratings["rating"].isna().to_numpy()
    if (np.isnan(v) & ~raw_missing).any():
        raise ValueError(
            f"ratings: rating must be a number, got {ratings['rating'][np.isnan(v) & ~raw_missing].iloc[0]!r}"
        )
    bad = ~np.isnan(v) & ((v < 0) | (v > 10))
    if bad.any():
        raise ValueError(f"ratings: rating must be within [0, 10], got {v[bad][0]!r}")
    d = pd.DataFrame({"trace_id": ratings["trace_id"].to_numpy(), "rating": v}).dropna(subset=["rating"])
    return d.groupby("trace_id", sort=True)["rating"].mean().rename("rating")


def rating_correlation(
    ratings: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Pearson / Spearman between annotators' holistic ratings (mean per
    trace, :func:`mean_ratings`) and one source's process score.

    Uses the traces with a rating, ``N >= 1`` and complete labels (if
    ``scores`` has a ``complete`` column); keys as :func:`correlation`.
    """
    mr = mean_ratings(ratings)
    s = _score_table(scores, "scores")
    s = s.loc[s["complete"].to_numpy() & (s["n"].to_numpy() >= 1)]
    m = pd.DataFrame({"trace_id": mr.index.to_numpy(), "rating": mr.to_numpy()}).merge(
        s[["trace_id", "process"]], on="trace_id", how="inner"
    )
    m = _sorted(m, ["trace_id"])
    return _correlate_or_explain(
        m["rating"], m["process"], ("ratings", "process scores"),
        "no rated trace with N >= 1 and complete labels from this source", n_resamples, seed, level,
    )


# ---------------------------------------------------------------------------
# Among several annotators
# ---------------------------------------------------------------------------
def _annotator_matrix(labels: pd.DataFrame) -> tuple[np.ndarray, list[Any]]:
    """Raw labels -> (items x annotators) code matrix (-1 = not labelled)."""
    _require(labels, ["trace_id", "step", "annotator", "verdict"], "annotator labels")
    d = labels.loc[labels["verdict"].notna()]
    step = _int_steps(d["step"], "annotator labels")
    code = verdict_codes(d["verdict"]).astype(np.int64)
    keys = pd.DataFrame({"trace_id": d["trace_id"].to_numpy(), "step": step})
    item = keys.groupby(["trace_id", "step"], sort=False).ngroup().to_numpy(dtype=np.int64)
    ann, names = pd.factorize(d["annotator"])
    if (ann < 0).any():
        raise ValueError("annotator labels: annotator must not be null")
    names = list(names)
    try:
        order = sorted(range(len(names)), key=lambda i: names[i])
    except TypeError:
        order = list(range(len(names)))
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    ann = rank[ann]
    names = [names[i] for i in order]
    n_items = int(item.max()) + 1 if len(item) else 0
    mat = np.full((n_items, len(names)), -1, dtype=np.int64)
    flat = item * max(1, len(names)) + ann
    sf = np.sort(flat)
    dup = sf[1:] == sf[:-1]
    if dup.any():
        f = int(sf[1:][dup][0])
        row = int(np.flatnonzero(flat == f)[0])
        raise ValueError(
            f"annotator labels: annotator {names[ann[row]]!r} labelled trace "
            f"{keys['trace_id'].iloc[row]!r} step {step[row]} twice"
        )
    mat[item, ann] = code
    return mat, names


def annotator_agreement(annotator_labels: pd.DataFrame) -> dict[str, Any]:
    """Agreement among several annotators on their step verdicts.

    ``annotator_labels``: trace_id, step, annotator, verdict (the input of
    ``human_consensus``).  An item is one (trace, step).

    Keys: annotators (count), items (labelled by anyone), items_paired
    (labelled by >= 2), krippendorff_alpha (nominal, missing data allowed;
    ``krippendorff`` package), fleiss_kappa (statsmodels; over the items
    with >= 2 ratings, only if they all have the same number of ratings),
    ratings_per_item (that number, else None), pairwise_kappa
    ``{"annotators": [...], "kappa": matrix, "steps": matrix}`` (Cohen's
    kappa on the steps both labelled; diagonal None), undefined (including
    ``pairwise_kappa[a|b]`` entries for undefined pairs).
    """
    import krippendorff
    from statsmodels.stats.inter_rater import fleiss_kappa as _fleiss

    mat, names = _annotator_matrix(annotator_labels)
    n_items, n_ann = mat.shape
    undefined: dict[str, str] = {}
    k = len(VERDICTS)
    counts = np.zeros((n_items, k), dtype=np.int64)
    for c in range(k):
        counts[:, c] = (mat == c).sum(axis=1)
    per_item = counts.sum(axis=1)
    paired = per_item >= 2
    out: dict[str, Any] = {"annotators": n_ann, "items": int(n_items), "items_paired": int(paired.sum())}

    # Krippendorff's alpha (nominal) from the items x values count matrix.
    alpha = None
    if n_ann < 2:
        undefined["krippendorff_alpha"] = f"needs at least 2 annotators ({n_ann} found)"
    elif not paired.any():
        undefined["krippendorff_alpha"] = "no step was labelled by two or more annotators"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = krippendorff.alpha(value_counts=counts[paired].astype(float), level_of_measurement="nominal")
        if math.isfinite(a):
            alpha = float(a)
        else:
            undefined["krippendorff_alpha"] = (
                "all ratings of the steps labelled twice or more have the same verdict, "
                "so the expected disagreement is 0"
            )
    out["krippendorff_alpha"] = alpha

    # Fleiss' kappa: equal number of ratings per (paired) item.
    fk, m = None, None
    if not paired.any():
        undefined["fleiss_kappa"] = "no step was labelled by two or more annotators"
    else:
        lo, hi = int(per_item[paired].min()), int(per_item[paired].max())
        if lo != hi:
            undefined["fleiss_kappa"] = (
                f"steps have different numbers of ratings ({lo} to {hi}); "
                "Fleiss' kappa needs the same number for every step"
            )
        else:
            m = lo
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                v = float(_fleiss(counts[paired], method="fleiss"))
            if math.isfinite(v):
                fk = v
            else:
                undefined["fleiss_kappa"] = "every rating has the same verdict, so chance agreement is 1"
    out["fleiss_kappa"] = fk
    out["ratings_per_item"] = m

    # Pairwise Cohen's kappa.
    kap: list[list[float | None]] = [[None] * n_ann for _ in range(n_ann)]
    nsteps: list[list[int]] = [[0] * n_ann for _ in range(n_ann)]
    for i in range(n_ann):
        nsteps[i][i] = int((mat[:, i] >= 0).sum())
        for j in range(i + 1, n_ann):
            both = (mat[:, i] >= 0) & (mat[:, j] >= 0)
            nsteps[i][j] = nsteps[j][i] = int(both.sum())
            v, why = cohen_kappa(mat[both, i], mat[both, j], _CODES)
            if why and both.any():
                only = VERDICTS[int(mat[both, i][0])]
                why = f"both gave every shared step the same verdict ({only!r}), so chance agreement is 1"
            elif why:
                why = "no step was labelled by both"
            kap[i][j] = kap[j][i] = v
            if why:
                undefined[f"pairwise_kappa[{names[i]}|{names[j]}]"] = why
    out["pairwise_kappa"] = {"annotators": names, "kappa": kap, "steps": nsteps}
    out["undefined"] = undefined
    return out


# ---------------------------------------------------------------------------
# Everything at once
# ---------------------------------------------------------------------------
def _native(x: Any) -> Any:
    if isinstance(x, dict):
        return {(_native(k) if not isinstance(k, str) else k): _native(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_native(v) for v in x]
    if x is None or x is pd.NA:
        return None
    if isinstance(x, np.generic):
        x = x.item()
    return x


def _merge_undefined(target: dict[str, str], part: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    for k, v in part.pop("undefined", {}).items():
        target[prefix + k] = v
    return part


def _with_completeness(scores: pd.DataFrame, labels: pd.DataFrame, what: str) -> pd.DataFrame:
    if "complete" in scores.columns:
        return scores
    _require(scores, ["trace_id", "n_steps"], what)
    comp = complete_traces(scores[["trace_id", "n_steps"]], labels)
    return scores.assign(complete=comp.to_numpy())


def agreement_metrics(
    reference_labels: pd.DataFrame,
    candidate_labels: pd.DataFrame,
    reference_scores: pd.DataFrame,
    candidate_scores: pd.DataFrame,
    *,
    ratings: pd.DataFrame | None = None,
    annotator_labels: pd.DataFrame | None = None,
    n_resamples: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """The agreement metrics object of the candidate against the reference.

    Labels: one source each (trace_id, step, verdict; the candidate's
    optional ``confidence`` column enables calibration).  Scores: per-trace
    ``score_traces`` output of each source (trace_id, n_steps, first_error,
    process, complete); without a ``complete`` column completeness is
    derived from the labels.

    Keys (JSON-ready; accuracies are fractions 0..1, intervals [low, high]):

    * step level: steps_compared, percent_agreement, kappa, kappa_binary,
      confusion, by_position (records of :func:`agreement_by_position`);
    * first error: traces_compared, first_error_exact,
      first_error_within_1, pb_error_traces, pb_error_acc,
      pb_correct_traces, pb_correct_acc, pb_f1;
    * scores: pearson_r, pearson_ci, spearman_rho, spearman_ci;
    * calibration: steps_calibrated, ece, brier, reliability;
    * with ``ratings``: ``ratings`` = {traces_rated, reference: {...},
      candidate: {...}} (keys of :func:`correlation`);
    * with ``annotator_labels``: ``annotators`` = :func:`annotator_agreement`;
    * bootstrap: {n_resamples, seed, level};
    * undefined: metric -> reason for every metric that is None (nested
      metrics as ``ratings.reference.pearson_r``, ``annotators.fleiss_kappa``).
    """
    _check_level(level, n_resamples)
    undefined: dict[str, str] = {}
    out: dict[str, Any] = {}

    steps = paired_steps(reference_labels, candidate_labels)
    out.update(_merge_undefined(undefined, _step_agreement(steps)))
    out["by_position"] = [{k: _native(v) for k, v in row.items()} for row in _by_position(steps).to_dict("records")]

    ref_s = _with_completeness(reference_scores, reference_labels, "reference scores")
    cand_s = _with_completeness(candidate_scores, candidate_labels, "candidate scores")
    traces = paired_traces(ref_s, cand_s)
    out.update(_merge_undefined(undefined, _first_error(traces)))
    corr = _merge_undefined(undefined, _score_correlation(traces, int(n_resamples), seed, level))
    corr.pop("n")
    out.update(corr)

    has_conf = "confidence" in candidate_labels.columns
    out.update(_merge_undefined(undefined, _calibration(steps, RELIABILITY_BINS, has_conf)))

    if ratings is not None:
        block: dict[str, Any] = {"traces_rated": int(len(mean_ratings(ratings)))}
        for name, s in (("reference", ref_s), ("candidate", cand_s)):
            block[name] = _merge_undefined(
                undefined,
                rating_correlation(ratings, s, n_resamples=n_resamples, seed=seed, level=level),
                f"ratings.{name}.",
            )
        out["ratings"] = block
    if annotator_labels is not None:
        out["annotators"] = _merge_undefined(undefined, annotator_agreement(annotator_labels), "annotators.")
    out["bootstrap"] = {"n_resamples": int(n_resamples), "seed": seed, "level": level}
    out["undefined"] = undefined
    return _native(out)


# ---------------------------------------------------------------------------
# Tuning omega (and w) against a human reference
# ---------------------------------------------------------------------------
def _reference_series(reference, value_col: str) -> pd.Series:
    if isinstance(reference, pd.Series):
        if not reference.index.is_unique:
            raise ValueError("reference: trace_id appears twice")
        s = pd.to_numeric(reference, errors="coerce")
        return s[s.notna()].astype(float)
    _require(reference, ["trace_id", value_col], "reference")
    d = reference
    keep = np.ones(len(d), dtype=bool)
    if "complete" in d.columns:
        keep &= d["complete"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    if "n_steps" in d.columns:
        keep &= pd.to_numeric(d["n_steps"], errors="coerce").to_numpy(dtype=float) >= 1
    d = d.loc[keep]
    if not pd.Index(d["trace_id"]).is_unique:
        raise ValueError("reference: trace_id appears twice")
    s = pd.Series(
        pd.to_numeric(d[value_col], errors="coerce").to_numpy(dtype=float, na_value=np.nan),
        index=pd.Index(d["trace_id"].to_numpy()),
    )
    return s[s.notna()]


def _pearson_point(x: np.ndarray, y: np.ndarray) -> float | None:
    if len(x) < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = float(sps.pearsonr(x, y)[0])
    return r if math.isfinite(r) else None


def tune_omega(
    traces: pd.DataFrame,
    judge_steps: pd.DataFrame,
    reference,
    *,
    omegas: Sequence[float] = DEFAULT_OMEGA_GRID,
    ws: Sequence[float] | None = None,
    profile: Profile = DEFAULT,
    hazard: pd.DataFrame | None = None,
    value_col: str = "process",
    validation_fraction: float = 0.5,
    seed: int | None = 0,
    n_resamples: int = 1000,
    level: float = 0.95,
) -> dict[str, Any]:
    """Choose omega (and optionally w) on a validation split; report on the rest.

    traces       ``score_traces`` input (trace_id, n_steps, l_gold, answer_correct)
    judge_steps  the judge's step labels
    reference    human reference per trace: a Series indexed by trace_id
                 (e.g. ``mean_ratings(ratings)``) or a DataFrame with
                 trace_id and ``value_col`` (e.g. ``score_traces`` output of
                 the human labels; then only complete traces with N >= 1 count)

    Only traces with N >= 1, complete judge labels and a reference value
    take part.  They are ordered by trace_id and shuffled with
    ``numpy.random.default_rng(seed).permutation``; the first
    ``round(validation_fraction * n)`` form the validation split, the rest
    the held-out split.  For every grid point the judge's traces are scored
    with ``score_traces(..., profile.replace(omega=o[, w=w]), hazard=H)``
    (``H`` = the judge's hazard over all ``traces`` unless given); the
    compared score is ``process`` (or ``holistic`` when ``ws`` is given:
    w does not change ``process``).  The grid point with the highest
    validation Pearson r wins (ties: the first in grid order); its Pearson
    and Spearman with intervals on the held-out split are reported, next to
    those of ``profile`` itself (``baseline``).
    """
    if not 0.0 <= validation_fraction <= 1.0:
        raise ValueError(f"validation_fraction: must be within [0, 1], got {validation_fraction!r}")
    omegas = [float(o) for o in omegas]
    if not omegas:
        raise ValueError("omegas: the grid must not be empty")
    w_grid = [None] if ws is None else [float(w) for w in ws]
    if not w_grid:
        raise ValueError("ws: the grid must not be empty (use None to keep w)")
    score_col = "process" if ws is None else "holistic"
    # validate every grid profile up front (ValueError names the field)
    for o in omegas:
        for w in w_grid:
            profile.replace(omega=o, **({} if w is None else {"w": w}))

    ref = _reference_series(reference, value_col)
    if hazard is None and profile.pinned_hazard is None:
        hazard = estimate_hazard(traces, judge_steps)
    base = score_traces(traces, judge_steps, profile, hazard=hazard)
    ok = base["complete"].to_numpy(dtype=bool) & (base["n_steps"].to_numpy() >= 1)
    ok &= pd.Index(ref.index).get_indexer(base["trace_id"]) >= 0
    ids = pd.Index(base["trace_id"].to_numpy()[ok])
    try:
        ids = ids.sort_values()
    except TypeError:
        pass
    n = len(ids)
    perm = np.random.default_rng(seed).permutation(n)
    n_val = int(round(validation_fraction * n))
    val_ids, test_ids = ids[perm[:n_val]], ids[perm[n_val:]]
    ref_val = ref.loc[val_ids].to_numpy(dtype=float)
    ref_test = ref.loc[test_ids].to_numpy(dtype=float)
    pos = pd.Index(base["trace_id"])
    val_pos, test_pos = pos.get_indexer(val_ids), pos.get_indexer(test_ids)
    answer = base["answer_correct"].to_numpy(dtype=float)

    def judged(scored: pd.DataFrame, w: float | None) -> np.ndarray:
        p = scored["process"].to_numpy(dtype=float)
        # same formula as score_traces' holistic score (checked in the tests)
        return p if w is None else w * p + (1.0 - w) * 10.0 * answer

    grid = []
    best = None
    for o in omegas:
        scored = score_traces(traces, judge_steps, profile.replace(omega=o), hazard=hazard)
        for w in w_grid:
            r = _pearson_point(judged(scored, w)[val_pos], ref_val)
            grid.append({"omega": o, "w": profile.w if w is None else w, "validation_r": r})
            if r is not None and (best is None or r > best[2]):
                best = (o, w, r, scored)

    undefined: dict[str, str] = {}
    out: dict[str, Any] = {
        "score": score_col,
        "traces": int(n),
        "n_validation": int(len(val_ids)),
        "n_test": int(len(test_ids)),
        "validation_ids": list(val_ids),
        "test_ids": list(test_ids),
        "grid": grid,
    }
    if best is None:
        out["best"] = None
        out["validation_r"] = None
        undefined["best"] = undefined["validation_r"] = (
            f"Pearson r is undefined at every grid point on the validation split ({len(val_ids)} traces; "
            "needs 3 or more and non-constant scores)"
        )
        test = None
    else:
        o, w, r, scored = best
        out["best"] = {"omega": o, "w": profile.w if w is None else w}
        out["validation_r"] = r
        test = judged(scored, w)[test_pos]
    names = ("judge scores", "reference values")
    if test is not None:
        out["test"] = _merge_undefined(
            undefined,
            correlation(test, ref_test, n_resamples=n_resamples, seed=seed, level=level, names=names),
            "test.",
        )
    else:
        out["test"] = None
        undefined["test"] = "no best grid point"
    out["baseline"] = _merge_undefined(
        undefined,
        correlation(
            judged(base, None if ws is None else profile.w)[test_pos],
            ref_test,
            n_resamples=n_resamples,
            seed=seed,
            level=level,
            names=names,
        ),
        "baseline.",
    )
    out["baseline"]["omega"] = profile.omega
    out["baseline"]["w"] = profile.w
    out["undefined"] = undefined
    return _native(out)
