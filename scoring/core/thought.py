"""Scores of the thinking channel (docs/scoring.md, section 9): channel
selection, the hazard of the first error by relative position, recovered and
unrecovered errors, and their summaries per model.

Steps are numbered in reading order over both channels (CHANNELS.md): a trace
with ``T`` thought steps and ``A`` answer steps has thought steps ``1..T`` and
answer steps ``T+1..T+A``. Every function here is vectorised over whole
columns; per-trace Python work happens only in ``recoveries``, whose inner
loop runs over the (few) invalid thought steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from .hazard import _first_error_array
from .labels import CODE_INVALID, verdict_codes
from .profile import CHANNELS

__all__ = [
    "ANSWER",
    "BOTH",
    "CHANNELS",
    "RECOVERY_COLUMNS",
    "RECOVERY_SUMMARY_COLUMNS",
    "RELATIVE_HAZARD_COLUMNS",
    "THOUGHT",
    "channel_traces",
    "recoveries",
    "recovery_by_trace",
    "recovery_summary",
    "relative_hazard_profile",
]

THOUGHT = "thought"
ANSWER = "answer"
BOTH = "both"

RELATIVE_HAZARD_COLUMNS = ["bin", "lo", "hi", "at_risk", "events", "hazard", "cum_hazard", "survival"]
RECOVERY_COLUMNS = ["trace_id", "error_step", "recovered", "recovery_step", "distance"]
RECOVERY_SUMMARY_COLUMNS = [
    "traces",
    "traces_with_thought",
    "thought_errors",
    "recovered",
    "unrecovered",
    "recovery_rate",
    "traces_with_unrecovered",
    "distance_mean",
    "distance_median",
    "correct_answers",
    "lucky_unrecovered",
    "lucky_unrecovered_rate",
]


def _ints(values: Any, name: str) -> np.ndarray:
    s = pd.Series(values)
    s = pd.to_numeric(s, errors="coerce") if s.dtype == object else s
    v = s.to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(v).any() or (v < 0).any() or (v != np.floor(v)).any():
        raise ValueError(f"{name}: must be integers >= 0")
    return v.astype(np.int64)


# ---------------------------------------------------------------------------
# Channel selection
# ---------------------------------------------------------------------------
def channel_traces(
    traces: pd.DataFrame, steps: pd.DataFrame | None, channels: str
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The traces and step labels a score reads under ``channels``.

    traces  trace_id, n_steps (N = T + A), n_thought_steps (T; missing = 0)
    steps   trace_id, step (1-based reading order over both channels), ...

    ``answer``: steps T+1..N renumbered 1..A, n_steps = A.
    ``thought``: steps 1..T, n_steps = T.
    ``both``: everything as it is.
    Other columns pass through unchanged; rows outside the channel are dropped.
    """
    if channels not in CHANNELS:
        raise ValueError(f"channels: expected one of {list(CHANNELS)}, got {channels!r}")
    if channels == BOTH:
        return traces, steps
    n = _ints(traces["n_steps"], "n_steps")
    t = _ints(traces["n_thought_steps"], "n_thought_steps") if "n_thought_steps" in traces else np.zeros_like(n)
    if (t > n).any():
        raise ValueError("n_thought_steps: must not exceed n_steps")
    out = traces.copy()
    out["n_steps"] = (n - t) if channels == ANSWER else t
    if steps is None or len(steps) == 0:
        return out, steps
    ids = pd.Index(traces["trace_id"])
    code = ids.get_indexer(steps["trace_id"])
    step = pd.to_numeric(steps["step"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    t_of = np.where(code >= 0, t[np.maximum(code, 0)], 0)
    if channels == ANSWER:
        keep = (code >= 0) & (step > t_of)
        new_step = step - t_of
    else:
        keep = (code >= 0) & (step <= t_of)
        new_step = step
    sel = steps.loc[keep].copy()
    sel["step"] = new_step[keep].astype(np.int64)
    return out, sel.reset_index(drop=True)


# ---------------------------------------------------------------------------
# Hazard by relative position
# ---------------------------------------------------------------------------
def relative_hazard_profile(n_steps, first_error, bins: int = 10) -> pd.DataFrame:
    """Discrete hazard of the first error over the relative position
    r = t*/N in (0, 1], cut into ``bins`` equal bins ((k-1)/B, k/B].

    Every trace without an error survives to r = 1, so unlike the hazard by
    absolute step nobody leaves early: at_risk(k) = traces whose first error
    is not in a bin before k. hazard = events / at_risk (0 when nobody is at
    risk), cum_hazard its running sum, survival the running product of
    (1 - hazard). Traces with N = 0 are dropped.
    """
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or not 1 <= bins <= 1000:
        raise ValueError(f"bins: must be an integer within [1, 1000], got {bins!r}")
    n = _ints(n_steps, "n_steps")
    fe = _first_error_array(first_error)
    if fe.shape != n.shape:
        raise ValueError("first_error: must have the same length as n_steps")
    if (fe < 0).any() or (fe != np.floor(fe)).any():
        raise ValueError("first_error: must be a 1-based step number, 0 or null")
    keep = n >= 1
    n, fe = n[keep], fe[keep].astype(np.int64)
    if (fe > n).any():
        raise ValueError("first_error: must not exceed n_steps")
    has_err = fe > 0
    # bin k = ceil(B * t*/N) in integers: (B*t* + N - 1) // N, exact for any N.
    k = (bins * fe[has_err] + n[has_err] - 1) // n[has_err]
    events = np.bincount(k, minlength=bins + 1)[1:]
    at_risk = len(n) - np.concatenate(([0], np.cumsum(events)[:-1]))
    h = np.where(at_risk > 0, events / np.maximum(at_risk, 1), 0.0)
    edges = np.arange(bins + 1) / bins
    return pd.DataFrame(
        {
            "bin": np.arange(1, bins + 1, dtype=np.int64),
            "lo": edges[:-1],
            "hi": edges[1:],
            "at_risk": at_risk.astype(np.int64),
            "events": events.astype(np.int64),
            "hazard": h,
            "cum_hazard": np.cumsum(h),
            "survival": np.cumprod(1.0 - h),
        }
    )[RELATIVE_HAZARD_COLUMNS]


# ---------------------------------------------------------------------------
# Recovered and unrecovered errors
# ---------------------------------------------------------------------------
def _keys(v: Any) -> frozenset[str]:
    if v is None or (not isinstance(v, (str, Iterable)) and pd.isna(v)):
        return frozenset()
    if isinstance(v, str):
        return frozenset((v,)) if v else frozenset()
    return frozenset(str(x) for x in v)


def _refs(v: Any) -> frozenset[int]:
    if v is None or (not isinstance(v, Iterable) and pd.isna(v)):
        return frozenset()
    if isinstance(v, (str, bytes)):
        raise ValueError(f"corrects: expected a list of step numbers, got {v!r}")
    return frozenset(int(x) for x in v)


def _nonempty(col: pd.Series) -> np.ndarray:
    """Which cells hold a non-empty list, tuple or array (null and anything else: no)."""
    return np.fromiter((isinstance(x, (list, tuple, np.ndarray, frozenset, set)) and len(x) > 0 for x in col),
                       dtype=bool, count=len(col))


def recoveries(traces: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Every invalid thought step and whether a later thought step corrects it.

    traces  trace_id, n_thought_steps (T)
    steps   one label source in reading order: trace_id, step, verdict, and
            optionally
            wrong_claims  keys of the claims the step gets wrong (e.g. the
                          left-hand sides "16 - 3 - 4" of its false equations)
            right_claims  keys of the claims the step gets right
            corrects      step numbers this step is marked as correcting

    An invalid thought step e is *recovered* by the first thought step c with
    e < c <= T that is not labelled invalid and either lists e in
    ``corrects`` or gets right a claim that e got wrong. Otherwise it is
    *unrecovered*: the error reaches the answer. distance = c - e.
    Returns :data:`RECOVERY_COLUMNS`, one row per invalid thought step.
    """
    for col in ("trace_id", "step", "verdict"):
        if col not in steps.columns:
            raise ValueError(f"steps: missing column {col!r}")
    t_by_id = pd.Series(_ints(traces["n_thought_steps"], "n_thought_steps"), index=pd.Index(traces["trace_id"]))
    if not t_by_id.index.is_unique:
        raise ValueError("traces: trace_id appears twice")
    code = t_by_id.index.get_indexer(steps["trace_id"])
    step = _ints(steps["step"], "step")
    t_of = np.where(code >= 0, t_by_id.to_numpy()[np.maximum(code, 0)], 0)
    in_thought = (code >= 0) & (step >= 1) & (step <= t_of)
    v = verdict_codes(steps["verdict"])
    err_rows = np.flatnonzero(in_thought & (v == CODE_INVALID))
    empty = pd.DataFrame({c: pd.Series(dtype="int64") for c in RECOVERY_COLUMNS})
    empty["recovered"] = empty["recovered"].astype(bool)
    empty["trace_id"] = empty["trace_id"].astype(object)
    if len(err_rows) == 0:
        return empty
    # Only traces with an error need their later steps looked at, and of those only the steps
    # that get a claim right or are marked as a correction can recover anything.
    err_traces = np.unique(code[err_rows])
    has_claims = "right_claims" in steps.columns and "wrong_claims" in steps.columns
    has_corrects = "corrects" in steps.columns
    may_correct = np.zeros(len(steps), dtype=bool)
    if has_claims:
        may_correct |= _nonempty(steps["right_claims"])
    if has_corrects:
        may_correct |= _nonempty(steps["corrects"])
    cand = np.flatnonzero(in_thought & may_correct & np.isin(code, err_traces) & (v != CODE_INVALID))
    right = steps["right_claims"].to_numpy(dtype=object) if has_claims else None
    wrong = steps["wrong_claims"].to_numpy(dtype=object) if has_claims else None
    corr = steps["corrects"].to_numpy(dtype=object) if has_corrects else None
    # later non-invalid thought steps of each trace, in step order
    later: dict[int, list[tuple[int, frozenset[str], frozenset[int]]]] = {}
    for r in cand[np.argsort(step[cand], kind="stable")]:
        later.setdefault(int(code[r]), []).append(
            (int(step[r]), _keys(right[r]) if has_claims else frozenset(), _refs(corr[r]) if has_corrects else frozenset())
        )
    ids = steps["trace_id"].to_numpy(dtype=object)
    out_rec: list[bool] = []
    out_step: list[int] = []
    order = err_rows[np.lexsort((step[err_rows], code[err_rows]))]
    for r in order:
        e = int(step[r])
        wrong_e = _keys(wrong[r]) if has_claims else frozenset()
        found = 0
        for s, right_s, corr_s in later.get(int(code[r]), ()):
            if s > e and (e in corr_s or (wrong_e and not wrong_e.isdisjoint(right_s))):
                found = s
                break
        out_rec.append(found > 0)
        out_step.append(found)
    rec = np.array(out_rec, dtype=bool)
    rstep = np.array(out_step, dtype=np.int64)
    err_step = step[order]
    return pd.DataFrame(
        {
            "trace_id": ids[order],
            "error_step": err_step,
            "recovered": rec,
            "recovery_step": pd.arrays.IntegerArray(rstep, ~rec),
            "distance": pd.arrays.IntegerArray(rstep - err_step, ~rec),
        }
    )[RECOVERY_COLUMNS]


def recovery_by_trace(traces: pd.DataFrame, steps: pd.DataFrame, rec: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per trace: thought_errors, recovered, unrecovered, answer_errors
    (invalid answer steps), first_unrecovered (Int64, NA = none) and
    ``lucky_unrecovered``: a correct answer although an error reached it
    (an unrecovered thought error or an invalid answer step).

    traces  trace_id, n_steps, n_thought_steps, answer_correct
    """
    rec = recoveries(traces, steps) if rec is None else rec
    ids = pd.Index(traces["trace_id"])
    n_tr = len(ids)
    rc = ids.get_indexer(rec["trace_id"])
    recovered = rec["recovered"].to_numpy(dtype=bool)
    thought_err = np.bincount(rc, minlength=n_tr)
    n_rec = np.bincount(rc[recovered], minlength=n_tr)
    big = np.iinfo(np.int64).max
    first_unrec = np.full(n_tr, big, dtype=np.int64)
    np.minimum.at(first_unrec, rc[~recovered], rec["error_step"].to_numpy(dtype=np.int64)[~recovered])
    n = _ints(traces["n_steps"], "n_steps")
    t = _ints(traces["n_thought_steps"], "n_thought_steps")
    code = ids.get_indexer(steps["trace_id"])
    step = _ints(steps["step"], "step")
    t_of = np.where(code >= 0, t[np.maximum(code, 0)], 0)
    n_of = np.where(code >= 0, n[np.maximum(code, 0)], 0)
    ans_inv = (code >= 0) & (step > t_of) & (step <= n_of) & (verdict_codes(steps["verdict"]) == CODE_INVALID)
    answer_errors = np.bincount(code[ans_inv], minlength=n_tr)
    unrec = thought_err - n_rec
    correct = traces["answer_correct"].to_numpy(dtype=bool)
    return pd.DataFrame(
        {
            "trace_id": traces["trace_id"].to_numpy(),
            "n_thought_steps": t,
            "thought_errors": thought_err.astype(np.int64),
            "recovered": n_rec.astype(np.int64),
            "unrecovered": unrec.astype(np.int64),
            "answer_errors": answer_errors.astype(np.int64),
            "first_unrecovered": pd.arrays.IntegerArray(np.where(first_unrec == big, 0, first_unrec), first_unrec == big),
            "answer_correct": correct,
            "lucky_unrecovered": correct & ((unrec > 0) | (answer_errors > 0)),
        }
    )


def recovery_summary(by_trace: pd.DataFrame, rec: pd.DataFrame, group: pd.Series | None = None) -> pd.DataFrame:
    """Recovery figures per group (e.g. per model): rates over thought errors,
    distances over recovered errors, lucky_unrecovered over correct answers.

    ``group`` is aligned with ``by_trace`` (None: one group named "all").
    Returns one row per group (index = group), :data:`RECOVERY_SUMMARY_COLUMNS`.
    """
    g = pd.Series("all", index=by_trace.index) if group is None else pd.Series(group.to_numpy(), index=by_trace.index)
    trace_group = pd.Series(g.to_numpy(), index=pd.Index(by_trace["trace_id"]))
    dist = rec.loc[rec["recovered"].to_numpy(dtype=bool)]
    dist_group = trace_group.reindex(dist["trace_id"]).to_numpy()
    rows: dict[Any, dict[str, Any]] = {}
    for name, idx in by_trace.groupby(g.to_numpy(), sort=True).groups.items():
        bt = by_trace.loc[idx]
        errors = int(bt["thought_errors"].sum())
        recovered = int(bt["recovered"].sum())
        d = dist["distance"].to_numpy(dtype=float, na_value=np.nan)[dist_group == name]
        correct = int(bt["answer_correct"].sum())
        lucky = int(bt["lucky_unrecovered"].sum())
        rows[name] = {
            "traces": int(len(bt)),
            "traces_with_thought": int((bt["n_thought_steps"] > 0).sum()),
            "thought_errors": errors,
            "recovered": recovered,
            "unrecovered": errors - recovered,
            "recovery_rate": recovered / errors if errors else None,
            "traces_with_unrecovered": int((bt["unrecovered"] > 0).sum()),
            "distance_mean": float(d.mean()) if len(d) else None,
            "distance_median": float(np.median(d)) if len(d) else None,
            "correct_answers": correct,
            "lucky_unrecovered": lucky,
            "lucky_unrecovered_rate": lucky / correct if correct else None,
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=RECOVERY_SUMMARY_COLUMNS)
