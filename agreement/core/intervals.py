"""Bootstrap intervals for the agreement metrics that the scoring core gives
as point values only: percent agreement, both kappas, the first-error and
ProcessBench accuracies, ECE and the Brier score.

Pure numpy/pandas (no Django, no I/O); users'
documentation: docs/agreement.md ("Intervals for every metric").

The resampling unit is the **trace**, as for the correlation intervals of
the core: the steps of one trace are not independent (an error early in a
chain makes later errors likely), so resampling steps one by one would make
the intervals too narrow. Each metric is a function of a few sums over
traces (per-trace confusion counts, per-bin confidence sums, per-trace
first-error indicators); a resample only re-weights those sums, so all
resamples are computed at once as one matrix product per chunk.

The resampling is ``scoring.core.bootstrap`` (one seeded generator, the
``(n_resamples, n)`` index matrix in blocks, percentile intervals), shared
with every other interval of the product: resamples where a metric is undefined (e.g. kappa when both
sides are constant) left out, and ``None`` with a reason when nothing is
left. Traces are ordered by ``trace_id`` before drawing, so the intervals do
not depend on the order of the input rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from scoring.core.bootstrap import index_chunks, percentile_interval, resample_counts
from scoring.core.labels import CODE_INVALID, VERDICTS

_CODE = {v: i for i, v in enumerate(VERDICTS)}
# (resample x trace) cells per block, as in agreement.core.correlation.
_CHUNK_ELEMS = 100_000

#: The metrics this module adds an interval to, as ``<metric>_ci``.
STEP_METRICS = ("percent_agreement", "kappa", "kappa_binary")
CALIBRATION_METRICS = ("ece", "brier")
TRACE_METRICS = ("first_error_exact", "first_error_within_1", "pb_error_acc", "pb_correct_acc", "pb_f1")


def _codes(values: pd.Series) -> np.ndarray:
    return values.map(_CODE).to_numpy(dtype=np.int64)


def _groups(trace_ids: pd.Series) -> tuple[np.ndarray, int]:
    """Row -> index of its trace in sorted trace order."""
    codes, uniques = pd.factorize(trace_ids, sort=True)
    return codes.astype(np.int64), len(uniques)


def _per_trace(group: np.ndarray, n_groups: int, columns: np.ndarray) -> np.ndarray:
    """Sum of each column over the rows of each trace: (n_groups, k)."""
    out = np.zeros((n_groups, columns.shape[1]))
    np.add.at(out, group, columns)
    return out


def _resampled_totals(per_trace: np.ndarray, n_resamples: int, seed: int | None):
    """Yield (start, stop, totals) with totals[r] = the column sums of resample r."""
    n = per_trace.shape[0]
    for start, stop, idx in index_chunks(n, n_resamples, seed, _CHUNK_ELEMS):
        yield start, stop, resample_counts(idx, n) @ per_trace


def _kappa(cm: np.ndarray, k: int) -> np.ndarray:
    """Cohen's kappa of flattened (r, k*k) confusion counts, NaN when undefined.

    With integer counts: (n * agree - sum_v row_v col_v) / (n^2 - sum_v row_v col_v),
    exactly 0/0 when both raters are constant (chance agreement 1)."""
    m = cm.reshape(-1, k, k)
    n = m.sum(axis=(1, 2))
    agree = np.trace(m, axis1=1, axis2=2)
    chance = np.einsum("ri,ri->r", m.sum(axis=2), m.sum(axis=1))
    den = n * n - chance
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den == 0, np.nan, (n * agree - chance) / den)


def _run(per_trace: np.ndarray, metrics: dict[str, Callable[[np.ndarray], np.ndarray]], n_resamples: int,
         seed: int | None, level: float) -> dict[str, list[float] | None]:
    dists = {name: np.empty(n_resamples) for name in metrics}
    for start, stop, totals in _resampled_totals(per_trace, n_resamples, seed):
        for name, fn in metrics.items():
            dists[name][start:stop] = fn(totals)
    return {name: percentile_interval(d, level) for name, d in dists.items()}


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den == 0, np.nan, num / np.where(den == 0, 1, den))


def step_intervals(pairs: pd.DataFrame, *, n_resamples: int = 1000, seed: int | None = 0,
                   level: float = 0.95) -> dict[str, list[float] | None]:
    """Intervals of percent_agreement, kappa and kappa_binary.

    ``pairs``: ``agreement.core.pairs.paired_steps`` output (trace_id, step,
    reference_verdict, candidate_verdict). Resamples the traces that have at
    least one compared step.
    """
    if len(pairs) == 0:
        return {f"{m}_ci": None for m in STEP_METRICS}
    per_trace = step_cells(pairs["trace_id"], _codes(pairs["reference_verdict"]), _codes(pairs["candidate_verdict"]))
    return step_intervals_of(per_trace, n_resamples=n_resamples, seed=seed, level=level)


def step_cells(trace_ids: pd.Series, ref: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Each trace's confusion counts (traces in sorted order, cells reference * 3 + candidate): (n_traces, 9).
    A trace's rows are its own, so the rows of chunks of whole traces, in trace order, stack into the
    study's."""
    group, n_groups = _groups(trace_ids)
    cells = np.zeros((len(ref), 9))
    cells[np.arange(len(ref)), np.asarray(ref, dtype=np.int64) * 3 + np.asarray(cand, dtype=np.int64)] = 1.0
    return _per_trace(group, n_groups, cells)


def step_intervals_of(per_trace: np.ndarray, *, n_resamples: int = 1000, seed: int | None = 0,
                      level: float = 0.95) -> dict[str, list[float] | None]:
    """:func:`step_intervals` of the per-trace confusion counts (:func:`step_cells`)."""
    if per_trace.shape[0] == 0:
        return {f"{m}_ci": None for m in STEP_METRICS}
    # binary confusion: invalid vs not invalid, as a 2x2 block of the 3x3 one
    binary = np.zeros((9, 4))
    for r in range(3):
        for c in range(3):
            binary[r * 3 + c, int(r == CODE_INVALID) * 2 + int(c == CODE_INVALID)] = 1.0

    def percent(t: np.ndarray) -> np.ndarray:
        return _ratio(t[:, 0] + t[:, 4] + t[:, 8], t.sum(axis=1))

    out = _run(per_trace, {
        "percent_agreement": percent,
        "kappa": lambda t: _kappa(t, 3),
        "kappa_binary": lambda t: _kappa(t @ binary, 2),
    }, n_resamples, seed, level)
    return {f"{m}_ci": v for m, v in out.items()}


def calibration_intervals(pairs: pd.DataFrame, *, n_bins: int = 10, n_resamples: int = 1000,
                          seed: int | None = 0, level: float = 0.95) -> dict[str, list[float] | None]:
    """Intervals of ece and brier over the compared steps with a confidence
    (the candidate's ``confidence`` column of ``paired_steps``), binned as in
    ``agreement.core.calibration.calibration``."""
    conf = pairs["confidence"].to_numpy(dtype=float) if "confidence" in pairs else np.array([])
    has = ~np.isnan(conf)
    if not has.any():
        return {f"{m}_ci": None for m in CALIBRATION_METRICS}
    d = pairs.loc[has]
    correct = (_codes(d["reference_verdict"]) == _codes(d["candidate_verdict"])).astype(float)
    per_trace = calibration_cells(d["trace_id"], conf[has], correct, n_bins)
    return calibration_intervals_of(per_trace, n_bins=n_bins, n_resamples=n_resamples, seed=seed, level=level)


def calibration_cells(trace_ids: pd.Series, c: np.ndarray, correct: np.ndarray, n_bins: int = 10) -> np.ndarray:
    """Per trace (sorted) of the compared steps with a confidence ``c``: count per bin, confidence sum per
    bin, correct sum per bin, squared error: (n_traces, 3 * n_bins + 1); stacks over chunks as
    :func:`step_cells` does."""
    b = np.minimum(np.floor(c * n_bins), n_bins - 1).astype(np.int64)
    group, n_groups = _groups(trace_ids)
    cols = np.zeros((len(c), 3 * n_bins + 1))
    rows = np.arange(len(c))
    cols[rows, b] = 1.0
    cols[rows, n_bins + b] = c
    cols[rows, 2 * n_bins + b] = correct
    cols[:, -1] = (c - correct) ** 2
    return _per_trace(group, n_groups, cols)


def calibration_intervals_of(per_trace: np.ndarray, *, n_bins: int = 10, n_resamples: int = 1000,
                             seed: int | None = 0, level: float = 0.95) -> dict[str, list[float] | None]:
    """:func:`calibration_intervals` of :func:`calibration_cells`."""
    if per_trace.shape[0] == 0:
        return {f"{m}_ci": None for m in CALIBRATION_METRICS}

    def ece(t: np.ndarray) -> np.ndarray:
        n = t[:, :n_bins].sum(axis=1)
        gap = np.abs(t[:, 2 * n_bins:3 * n_bins] - t[:, n_bins:2 * n_bins]).sum(axis=1)
        return _ratio(gap, n)

    def brier(t: np.ndarray) -> np.ndarray:
        return _ratio(t[:, -1], t[:, :n_bins].sum(axis=1))

    out = _run(per_trace, {"ece": ece, "brier": brier}, n_resamples, seed, level)
    return {f"{m}_ci": v for m, v in out.items()}


def trace_intervals(traces: pd.DataFrame, *, n_resamples: int = 1000, seed: int | None = 0,
                    level: float = 0.95) -> dict[str, list[float] | None]:
    """Intervals of the first-error metrics and the ProcessBench pair.

    ``traces``: ``agreement.core.pairs.paired_traces`` output (reference_first_error
    and candidate_first_error, NA = no error). A resample in which the
    reference finds no error (or only errors) leaves pb_error_acc
    (pb_correct_acc) and pb_f1 undefined, and is left out of those.
    """
    if len(traces) == 0:
        return {f"{m}_ci": None for m in TRACE_METRICS}
    d = traces.sort_values("trace_id", kind="mergesort")
    fr = d["reference_first_error"].to_numpy(dtype=float, na_value=0).astype(np.int64)
    fc = d["candidate_first_error"].to_numpy(dtype=float, na_value=0).astype(np.int64)
    err = fr > 0
    per_trace = np.column_stack([
        fr == fc,  # exact
        ((fr == 0) & (fc == 0)) | ((fr > 0) & (fc > 0) & (np.abs(fr - fc) <= 1)),  # within one
        err,  # reference finds an error
        err & (fc == fr),  # ... and the candidate finds the same step
        ~err,  # reference says correct
        ~err & (fc == 0),  # ... and so does the candidate
        np.ones(len(fr), dtype=bool),
    ]).astype(float)

    def f1(t: np.ndarray) -> np.ndarray:
        a, b = _ratio(t[:, 3], t[:, 2]), _ratio(t[:, 5], t[:, 4])
        s = a + b
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(s == 0, 0.0, 2 * a * b / np.where(s == 0, 1, s))

    out = _run(per_trace, {
        "first_error_exact": lambda t: _ratio(t[:, 0], t[:, 6]),
        "first_error_within_1": lambda t: _ratio(t[:, 1], t[:, 6]),
        "pb_error_acc": lambda t: _ratio(t[:, 3], t[:, 2]),
        "pb_correct_acc": lambda t: _ratio(t[:, 5], t[:, 4]),
        "pb_f1": f1,
    }, n_resamples, seed, level)
    return {f"{m}_ci": v for m, v in out.items()}


def add_intervals(metrics: dict[str, Any], pairs: pd.DataFrame, traces: pd.DataFrame, *, n_resamples: int = 1000,
                  seed: int | None = 0, level: float = 0.95) -> dict[str, Any]:
    """The core's metrics object with ``<metric>_ci`` after each metric of
    this module, and a reason in ``undefined`` for every null interval."""
    cis: dict[str, Any] = {}
    cis.update(step_intervals(pairs, n_resamples=n_resamples, seed=seed, level=level))
    cis.update(calibration_intervals(pairs, n_resamples=n_resamples, seed=seed, level=level))
    cis.update(trace_intervals(traces, n_resamples=n_resamples, seed=seed, level=level))
    return with_intervals(metrics, cis)


def with_intervals(metrics: dict[str, Any], cis: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` with each interval of ``cis`` (``<metric>_ci``) after its metric (see add_intervals)."""
    undefined = dict(metrics.get("undefined", {}))
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if key == "undefined":
            continue
        out[key] = value
        ci_key = f"{key}_ci"
        if ci_key in cis and ci_key not in metrics:
            ci = cis[ci_key] if value is not None else None
            out[ci_key] = ci
            if ci is None:
                undefined[ci_key] = undefined.get(key) or "every bootstrap resample left it undefined"
    out["undefined"] = undefined
    return out
