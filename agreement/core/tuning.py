"""Tuning omega (and w) of the scoring profile against a human reference on
a validation split, reported on the held-out rest (docs/agreement.md)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from agreement.core.correlation import correlation
from agreement.core.pairs import merge_undefined, native, require
from scoring.core.profile import DEFAULT, Profile
from scoring.core.scores import estimate_hazard, score_traces

#: Default omega grid of :func:`tune_omega`: 0, 0.5, ..., 10.
DEFAULT_OMEGA_GRID: tuple[float, ...] = tuple(k / 2 for k in range(21))


def _reference_series(reference, value_col: str) -> pd.Series:
    if isinstance(reference, pd.Series):
        if not reference.index.is_unique:
            raise ValueError("reference: trace_id appears twice")
        s = pd.to_numeric(reference, errors="coerce")
        return s[s.notna()].astype(float)
    require(reference, ["trace_id", value_col], "reference")
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
    # Imported here, not at the top: the pages import this module, and SciPy
    # and scikit-learn must not load at every process's start-up.
    from scipy import stats as sps

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
        out["test"] = merge_undefined(
            undefined,
            correlation(test, ref_test, n_resamples=n_resamples, seed=seed, level=level, names=names),
            "test.",
        )
    else:
        out["test"] = None
        undefined["test"] = "no best grid point"
    out["baseline"] = merge_undefined(
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
    return native(out)
