"""Discrete hazard profile of the first error (spec: "Hazard profile").

Step ``t`` is a discrete time.  A trace with first error ``t*`` has an event
at ``t*``; a trace without error is right-censored at its length ``N``.

    n_t = #traces with N >= t and (no error or t* >= t)     (at risk)
    d_t = #traces with t* = t                               (events)
    h_t = d_t / n_t   (0 where n_t = 0),  t = 1 .. T_max = max N
    H(t) = sum_{k<=t} h_k,  H(0) = 0,  H_max = H(T_max)     (Nelson-Aalen)
    S(t) = prod_{k<=t} (1 - h_k)                            (Kaplan-Meier)

These equal lifelines' ``NelsonAalenFitter(nelson_aalen_smoothing=False)``
and ``KaplanMeierFitter`` evaluated on the timeline 1..T_max (checked in
the tests); the implementation is plain numpy so it stays fast and has no
lifelines dependency at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = [
    "HAZARD_COLUMNS",
    "HazardLookup",
    "add_hazard_counts",
    "hazard_counts",
    "hazard_from_counts",
    "hazard_from_scores",
    "hazard_lookup",
    "hazard_profile",
    "pinned_hazard_table",
]

HAZARD_COLUMNS = ["step", "at_risk", "events", "hazard", "cum_hazard", "survival"]


def _first_error_array(first_error) -> np.ndarray:
    """first_error -> float array with 0 for 'none' (accepts NaN, None, pd.NA)."""
    s = pd.Series(first_error)
    if s.dtype == object:
        s = pd.to_numeric(s, errors="raise")
    return np.nan_to_num(s.to_numpy(dtype=float, na_value=np.nan), nan=0.0)


def _empty_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "step": pd.Series(dtype="int64"),
            "at_risk": pd.Series(dtype="Int64"),
            "events": pd.Series(dtype="Int64"),
            "hazard": pd.Series(dtype="float64"),
            "cum_hazard": pd.Series(dtype="float64"),
            "survival": pd.Series(dtype="float64"),
        }
    )


def hazard_profile(n_steps, first_error) -> pd.DataFrame:
    """Hazard table from per-trace lengths and first errors.

    n_steps      array-like of N (ints >= 0)
    first_error  array-like, 1-based step of the first error; 0, NaN, None
                 or NA mean "no error"

    Only traces with N >= 1 are used (empty traces are dropped here; the
    caller is responsible for passing only traces whose labels are complete).
    Returns columns step, at_risk, events, hazard, cum_hazard, survival for
    step = 1 .. max N (no rows when no trace has N >= 1).  at_risk and events
    are nullable Int64 (null only in pinned tables).
    """
    n = np.asarray(pd.to_numeric(pd.Series(n_steps), errors="raise"), dtype=float)
    if np.isnan(n).any() or (n < 0).any() or (n != np.floor(n)).any():
        raise ValueError("n_steps: must be integers >= 0")
    fe = _first_error_array(first_error)
    if fe.shape != n.shape:
        raise ValueError("first_error: must have the same length as n_steps")
    if (fe < 0).any() or (fe != np.floor(fe)).any():
        raise ValueError("first_error: must be a 1-based step number, 0 or null")
    keep = n >= 1
    n = n[keep].astype(np.int64)
    fe = fe[keep].astype(np.int64)
    if len(n) and (fe > n).any():
        raise ValueError("first_error: must not exceed n_steps")
    return hazard_from_counts(*hazard_counts(n, fe))


def hazard_counts(n_steps: np.ndarray, first_error: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sufficient statistics of :func:`hazard_profile`, which add up over
    disjoint sets of traces (so a study can be read in chunks): ``exits[t]``,
    the traces last at risk at step t, and ``events[t]``, the first errors at
    t, for t = 0 .. max N (index 0 unused). ``n_steps`` (>= 1) and
    ``first_error`` (0 = none, else 1..N) are validated int64 arrays."""
    if len(n_steps) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    t_max = int(n_steps.max())
    has_err = first_error > 0
    exit_t = np.where(has_err, first_error, n_steps)  # last step at which the trace is at risk
    return (np.bincount(exit_t, minlength=t_max + 1).astype(np.int64),
            np.bincount(first_error[has_err], minlength=t_max + 1).astype(np.int64))


def add_hazard_counts(a: tuple[np.ndarray, np.ndarray],
                      b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The counts of two disjoint sets of traces together (the shorter padded with zeros)."""
    size = max(len(a[0]), len(b[0]))
    return tuple(np.pad(x, (0, size - len(x))) + np.pad(y, (0, size - len(y)))  # type: ignore[return-value]
                 for x, y in zip(a, b, strict=True))


def hazard_from_counts(exits: np.ndarray, events: np.ndarray) -> pd.DataFrame:
    """The hazard table of :func:`hazard_counts` (summed over chunks or not):
    the same table, to the last bit, as ``hazard_profile`` of all those traces."""
    if len(exits) == 0:
        return _empty_table()
    t_max = len(exits) - 1
    # at_risk[t] = #exit_t >= t  (reverse cumulative count), t = 1..T_max
    at_risk = np.cumsum(exits[::-1])[::-1][1:]
    events = events[1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(at_risk > 0, events / np.maximum(at_risk, 1), 0.0)
    return pd.DataFrame(
        {
            "step": np.arange(1, t_max + 1, dtype=np.int64),
            "at_risk": pd.array(at_risk, dtype="Int64"),
            "events": pd.array(events, dtype="Int64"),
            "hazard": h,
            "cum_hazard": np.cumsum(h),
            "survival": np.cumprod(1.0 - h),
        }
    )


def pinned_hazard_table(hazard: Sequence[float]) -> pd.DataFrame:
    """Hazard table for a pinned vector (h_1, h_2, ...): at_risk/events null."""
    h = np.asarray(hazard, dtype=float)
    if h.ndim != 1 or len(h) == 0:
        raise ValueError("pinned_hazard: must be a non-empty list of numbers")
    if not np.isfinite(h).all() or (h < 0).any() or (h > 1).any():
        raise ValueError("pinned_hazard: every h_t must be within [0, 1]")
    t = len(h)
    return pd.DataFrame(
        {
            "step": np.arange(1, t + 1, dtype=np.int64),
            "at_risk": pd.array([pd.NA] * t, dtype="Int64"),
            "events": pd.array([pd.NA] * t, dtype="Int64"),
            "hazard": h,
            "cum_hazard": np.cumsum(h),
            "survival": np.cumprod(1.0 - h),
        }
    )


@dataclass(frozen=True)
class HazardLookup:
    """Cumulative hazard as an array ``H[t]`` for t = 0..T_max (``H[0] = 0``).

    ``lookup(t)`` is vectorised; t < 0 is treated as 0 and t > T_max as
    T_max (the hazard is 0 beyond the last estimated step, so H stays at
    H_max).
    """

    H: np.ndarray

    @property
    def t_max(self) -> int:
        return len(self.H) - 1

    @property
    def h_max(self) -> float:
        return float(self.H[-1])

    def __call__(self, t):
        idx = np.clip(np.asarray(t, dtype=np.int64), 0, self.t_max)
        out = self.H[idx]
        return float(out) if np.ndim(out) == 0 else out


def hazard_lookup(hazard) -> HazardLookup:
    """H(t) lookup from a hazard table (uses its ``step`` and ``hazard``
    columns; missing steps count as h = 0) or directly from a vector of h_t
    (h_1 first)."""
    if isinstance(hazard, pd.DataFrame):
        if len(hazard) == 0:
            return HazardLookup(np.zeros(1))
        steps = hazard["step"].to_numpy(dtype=np.int64)
        if (steps < 1).any() or len(np.unique(steps)) != len(steps):
            raise ValueError("hazard: steps must be distinct and >= 1")
        h = np.zeros(int(steps.max()) + 1)
        h[steps] = hazard["hazard"].to_numpy(dtype=float)
    else:
        h = np.concatenate([[0.0], np.asarray(hazard, dtype=float)])
    if not np.isfinite(h).all() or (h < 0).any():
        raise ValueError("hazard: values must be finite and >= 0")
    return HazardLookup(np.cumsum(h))


def hazard_from_scores(scored: pd.DataFrame) -> pd.DataFrame:
    """Hazard table from a score table (output of ``score_traces``), using
    only complete, non-empty traces - e.g. restricted to one model."""
    keep = scored["complete"].to_numpy(dtype=bool) & (scored["n_steps"].to_numpy() >= 1)
    return hazard_profile(
        scored["n_steps"].to_numpy()[keep], scored["first_error"].to_numpy(dtype=float, na_value=np.nan)[keep]
    )
