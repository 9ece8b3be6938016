"""Vectorised per-trace scores (spec: "Per-trace scores").

Entry point :func:`score_traces`.  Everything is computed with numpy over
whole columns; there is no Python loop per trace or per step (except a
fallback for exotic ``skeleton_refs`` values).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .hazard import HazardLookup, hazard_counts, hazard_lookup, hazard_profile
from .labels import CODE_INVALID, CODE_NEUTRAL, CODE_VALID, flatten_refs, verdict_codes
from .profile import DEFAULT, Profile

__all__ = [
    "LUCKY_EPS",
    "SCORE_COLUMNS",
    "estimate_hazard",
    "estimate_hazard_counts",
    "format_penalty",
    "hazard_penalty",
    "score_traces",
]

SCORE_COLUMNS = [
    "trace_id",
    "n_steps",
    "l_gold",
    "coverage",
    "first_error",
    "answer_correct",
    "s_base",
    "p_fmt",
    "p_haz",
    "s_hcrs",
    "s_prm",
    "s_prm_haz",
    "process",
    "holistic",
    "lucky_guess",
    "empty",
    "complete",
    "validity_rate",
    "all_valid",
]

#: Tolerance of the lucky-guess test ``P <= tau``: absorbs floating-point
#: noise such as 3.0000000000000004 from 10*C/L - penalties.
LUCKY_EPS = 1e-9


# ---------------------------------------------------------------------------
# Penalties as standalone vectorised functions
# ---------------------------------------------------------------------------
def format_penalty(n_steps, l_gold, profile: Profile = DEFAULT) -> np.ndarray:
    """P_fmt = 0 if L = 0 (or N = 0, empty trace); else
    min(alpha, beta * (eta if N < L else 1) * |N - L| / L)."""
    n = np.asarray(n_steps, dtype=float)
    L = np.asarray(l_gold, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = profile.beta * np.where(n < L, profile.eta, 1.0) * np.abs(n - L) / L
        return np.where((L > 0) & (n > 0), np.minimum(profile.alpha, raw), 0.0)


def hazard_penalty(first_error, lookup: HazardLookup, profile: Profile = DEFAULT) -> np.ndarray:
    """P_haz = 0 if no error (0/NaN) or H_max = 0; else
    min(C_haz, omega * (1 - H(t* - 1) / H_max))."""
    fe = np.nan_to_num(np.asarray(first_error, dtype=float), nan=0.0)
    h_max = lookup.h_max
    if h_max <= 0:
        return np.zeros(fe.shape)
    has_err = fe >= 1
    h_prev = lookup(np.where(has_err, fe - 1, 0).astype(np.int64))
    pen = np.minimum(profile.c_haz, profile.omega * (1.0 - h_prev / h_max))
    return np.where(has_err, pen, 0.0)


# ---------------------------------------------------------------------------
# Input preparation
# ---------------------------------------------------------------------------
def _require(df: pd.DataFrame, cols, what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}")


def _int_column(s: pd.Series, name: str, *, null_as: int | None = None) -> np.ndarray:
    s = pd.to_numeric(s, errors="coerce") if s.dtype == object else s
    v = s.to_numpy(dtype=float, na_value=np.nan)
    if null_as is not None:
        v = np.where(np.isnan(v), null_as, v)
    if np.isnan(v).any() or (v < 0).any() or (v != np.floor(v)).any():
        raise ValueError(f"{name}: must be integers >= 0")
    return v.astype(np.int64)


def _bool_column(s: pd.Series, name: str) -> np.ndarray:
    if s.isna().any():
        raise ValueError(f"{name}: must be true/false (found nulls)")
    if s.dtype == bool:
        return s.to_numpy()
    v = s.to_numpy()
    if s.dtype == object:
        ok = np.array(
            [isinstance(x, (bool, np.bool_)) or (isinstance(x, (int, np.integer)) and x in (0, 1)) for x in v]
        )
        if not ok.all():
            raise ValueError(f"{name}: must be true/false, got {v[~ok][0]!r}")
        return v.astype(bool)
    f = s.to_numpy(dtype=float)
    if not np.isin(f, (0.0, 1.0)).all():
        raise ValueError(f"{name}: must be true/false or 0/1")
    return f.astype(bool)


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """np.unique via sorting (faster than numpy's hash path for int64)."""
    if len(a) == 0:
        return a
    a = np.sort(a, kind="stable")
    return a[np.concatenate(([True], a[1:] != a[:-1]))]


class _Prepared:
    """Per-trace arrays derived from the traces and steps tables."""

    __slots__ = ("ids", "n", "L", "a", "labelled", "invalid", "neutral", "first_error", "coverage")


def _prepare(
    traces: pd.DataFrame, steps: pd.DataFrame | None, *, need_answers: bool = True, need_coverage: bool = True
) -> _Prepared:
    _require(traces, ["trace_id", "n_steps"] + (["l_gold", "answer_correct"] if need_answers else []), "traces")
    p = _Prepared()
    p.ids = pd.Index(traces["trace_id"])
    if not p.ids.is_unique:
        dup = p.ids[p.ids.duplicated()][0]
        raise ValueError(f"traces: trace_id {dup!r} appears twice")
    n_tr = len(p.ids)
    p.n = _int_column(traces["n_steps"], "n_steps")
    if need_answers:
        p.L = _int_column(traces["l_gold"], "l_gold", null_as=0)
        p.a = _bool_column(traces["answer_correct"], "answer_correct")
    else:
        p.L = np.zeros(n_tr, np.int64)
        p.a = np.zeros(n_tr, bool)

    if steps is None or len(steps) == 0:
        zero = np.zeros(n_tr, np.int64)
        p.labelled, p.invalid, p.neutral, p.first_error, p.coverage = zero, zero, zero, zero, zero
        return p
    _require(steps, ["trace_id", "step", "verdict"], "steps")

    code = p.ids.get_indexer(steps["trace_id"])
    vcode = verdict_codes(steps["verdict"])
    step_s = steps["step"]
    step_s = pd.to_numeric(step_s, errors="coerce") if step_s.dtype == object else step_s
    step = step_s.to_numpy(dtype=float, na_value=np.nan)
    # Keep labelled steps of known traces within 1..N (others are ignored).
    keep = (code >= 0) & (vcode >= 0)
    ncode = np.where(code >= 0, p.n[np.maximum(code, 0)], 0)
    keep &= (step >= 1) & (step <= ncode) & (step == np.floor(step))
    rows = np.flatnonzero(keep)
    code, vcode, step = code[rows], vcode[rows], step[rows].astype(np.int64)

    t_span = int(p.n.max(initial=0)) + 1
    key = code.astype(np.int64) * t_span + step
    sk = np.sort(key)
    dup = sk[1:] == sk[:-1]
    if dup.any():
        k = int(sk[1:][dup][0])
        raise ValueError(f"steps: trace {p.ids[k // t_span]!r} step {k % t_span} labelled twice")

    p.labelled = np.bincount(code, minlength=n_tr)
    inv = vcode == CODE_INVALID
    p.invalid = np.bincount(code[inv], minlength=n_tr)
    p.neutral = np.bincount(code[vcode == CODE_NEUTRAL], minlength=n_tr)
    big = np.iinfo(np.int64).max
    fe = np.full(n_tr, big, dtype=np.int64)
    np.minimum.at(fe, code[inv], step[inv])
    p.first_error = np.where(fe == big, 0, fe)

    p.coverage = np.zeros(n_tr, np.int64)
    if need_coverage and "skeleton_refs" in steps.columns:
        val = vcode == CODE_VALID
        vcodes = code[val]
        # only valid steps of traces with a skeleton can cover anything
        has_skel = p.L[vcodes] > 0
        vrows = rows[val][has_skel]
        vcodes = vcodes[has_skel]
        if len(vrows):
            refs = steps["skeleton_refs"].to_numpy(dtype=object)[vrows]
            ridx, rval = flatten_refs(refs)
            rc = vcodes[ridx]
            ok = np.isfinite(rval) & (rval >= 1) & (rval == np.floor(rval))
            ok &= rval <= np.where(ok, p.L[rc], 0)
            rc, rv = rc[ok], rval[ok].astype(np.int64)
            l_span = int(p.L.max(initial=0)) + 1
            uniq = _sorted_unique(rc.astype(np.int64) * l_span + rv)
            p.coverage = np.bincount(uniq // l_span, minlength=n_tr)
    return p


def _estimate(p: _Prepared) -> pd.DataFrame:
    m = (p.labelled == p.n) & (p.n >= 1)
    return hazard_profile(p.n[m], p.first_error[m])


def estimate_hazard_counts(traces: pd.DataFrame, steps: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray]:
    """What :func:`estimate_hazard` counts, as ``hazard.hazard_counts``: the counts of disjoint chunks of a
    study add up (``add_hazard_counts``) to the counts of the whole, whose ``hazard_from_counts`` is the
    study's table -- the same numbers as ``estimate_hazard`` over the whole study."""
    p = _prepare(traces, steps, need_answers=False, need_coverage=False)
    m = (p.labelled == p.n) & (p.n >= 1)
    return hazard_counts(p.n[m], p.first_error[m])


def estimate_hazard(traces: pd.DataFrame, steps: pd.DataFrame | None) -> pd.DataFrame:
    """Hazard table of one study and label source: traces with N >= 1 whose
    labels are complete (every step 1..N labelled).

    ``traces`` needs trace_id, n_steps; ``steps`` trace_id, step, verdict.
    """
    p = _prepare(traces, steps, need_answers=False, need_coverage=False)
    return _estimate(p)


# ---------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------
def score_traces(
    traces: pd.DataFrame,
    steps: pd.DataFrame | None,
    profile: Profile = DEFAULT,
    hazard: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Score every trace of ``traces`` with the labels in ``steps``.

    traces  trace_id (unique), n_steps (N >= 0), l_gold (L >= 0; null = 0),
            answer_correct (bool / 0-1, no nulls)
    steps   one label source: trace_id, step (1-based), verdict
            ('valid'/'invalid'/'neutral'; null = unlabelled), skeleton_refs
            (iterable of ints, optional).  At most one row per (trace, step);
            rows of unknown traces or outside 1..N are ignored.
    profile scoring parameters
    hazard  hazard table to use (e.g. the study-wide one when scoring a
            subset); if None it is estimated from ``traces`` themselves
            (complete traces with N >= 1).  A profile's ``pinned_hazard``
            replaces both.

    Returns one row per trace, in input order, with :data:`SCORE_COLUMNS`.
    s_base / s_hcrs are NaN when L = 0; first_error is Int64 (NA = none);
    validity_rate (= share of steps not labelled invalid) is NaN and
    all_valid NA for empty traces.

    Unlabelled steps of an incomplete trace are treated like ``neutral``
    steps (neither error nor coverage); such traces are flagged
    ``complete = False`` and excluded from the hazard estimate.
    """
    if not isinstance(profile, Profile):
        raise ValueError("profile: expected a Profile")
    p = _prepare(traces, steps)
    n, L, a = p.n, p.L, p.a
    nf, Lf = n.astype(float), L.astype(float)
    empty = n == 0
    complete = p.labelled == n
    has_err = p.first_error > 0

    if profile.pinned_hazard is not None:
        lookup = hazard_lookup(list(profile.pinned_hazard))
    elif hazard is not None:
        lookup = hazard_lookup(hazard)
    else:
        lookup = hazard_lookup(_estimate(p))

    with np.errstate(divide="ignore", invalid="ignore"):
        s_base = np.where(L > 0, 10.0 * p.coverage / Lf, np.nan)
        p_fmt = format_penalty(nf, Lf, profile)
        p_haz = hazard_penalty(p.first_error, lookup, profile)
        s_hcrs = np.where(L > 0, np.clip(s_base - p_fmt - p_haz, 0.0, 10.0), np.nan)
        # Non-invalid steps: valid + neutral (+ unlabelled, treated as neutral).
        neutral_like = p.neutral + (n - p.labelled)  # neutral + unlabelled steps
        passes = (n - p.invalid) - (1.0 - profile.neutral_as) * neutral_like
        s_prm = np.where(empty, 0.0, 10.0 * passes / np.maximum(nf, 1.0))
        s_prm_haz = np.clip(s_prm - p_haz, 0.0, 10.0)
        process = np.where(L > 0, s_hcrs, s_prm_haz if profile.prm_hazard else s_prm)
        process = np.where(empty, 0.0, process)
        holistic = profile.w * process + (1.0 - profile.w) * 10.0 * a
        lucky = a & (process <= profile.tau + LUCKY_EPS)
        validity = np.where(empty, np.nan, (n - p.invalid) / np.maximum(nf, 1.0))

    all_valid = pd.array(p.invalid == 0, dtype="boolean")
    all_valid[empty] = pd.NA
    out = pd.DataFrame(
        {
            "trace_id": traces["trace_id"].to_numpy(),
            "n_steps": n,
            "l_gold": L,
            "coverage": p.coverage.astype(np.int64),
            "first_error": pd.arrays.IntegerArray(p.first_error.astype(np.int64), ~has_err),
            "answer_correct": a.astype(bool),
            "s_base": s_base,
            "p_fmt": p_fmt,
            "p_haz": p_haz,
            "s_hcrs": s_hcrs,
            "s_prm": s_prm,
            "s_prm_haz": s_prm_haz,
            "process": process,
            "holistic": holistic,
            "lucky_guess": lucky,
            "empty": empty,
            "complete": complete,
            "validity_rate": validity,
            "all_valid": all_valid,
        }
    )
    return out[SCORE_COLUMNS]
