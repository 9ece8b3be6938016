"""Step labels: verdict constants, human consensus, the ``final`` source.

All functions take and return *long* pandas tables, one row per labelled
step (and annotator, for raw human labels):

    trace_id, step (1-based), [annotator], verdict, skeleton_refs

``skeleton_refs`` is any iterable of skeleton step numbers (list, tuple,
numpy array) or None/NaN for "no refs"; outputs always use sorted tuples of
ints.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "INVALID",
    "NEUTRAL",
    "SEVERITY",
    "VALID",
    "VERDICTS",
    "complete_traces",
    "determined_first_errors",
    "final_labels",
    "flatten_refs",
    "human_consensus",
    "normalize_refs",
    "normalize_refs_many",
    "normalize_verdict",
    "verdict_codes",
]

VALID = "valid"
INVALID = "invalid"
NEUTRAL = "neutral"
#: Verdicts in code order: code 0 = valid, 1 = invalid, 2 = neutral.
VERDICTS: tuple[str, str, str] = (VALID, INVALID, NEUTRAL)
#: Tie-break order of the human consensus (higher = more severe, wins ties).
SEVERITY: dict[str, int] = {VALID: 0, NEUTRAL: 1, INVALID: 2}

CODE_VALID, CODE_INVALID, CODE_NEUTRAL = 0, 1, 2

_FAST_REF_TYPES = {list, tuple, np.ndarray}

# Origins reported by final_labels().
ORIGIN_ADJUDICATED = "adjudicated"
ORIGIN_HUMAN = "human"
ORIGIN_JUDGE = "judge"


def normalize_verdict(value: Any) -> str:
    """'Valid ' -> 'valid'; raises ValueError for anything not a verdict."""
    if isinstance(value, str):
        v = value.strip().lower()
        if v in SEVERITY:
            return v
    raise ValueError(f"verdict: expected one of {list(VERDICTS)}, got {value!r}")


def verdict_codes(verdicts: pd.Series | Iterable[Any]) -> np.ndarray:
    """Vectorised verdict -> code (0 valid, 1 invalid, 2 neutral, -1 missing).

    Missing values (None/NaN/NA) give -1; any other unknown value raises
    ValueError.  Case and surrounding blanks are ignored.
    """
    s = verdicts if isinstance(verdicts, pd.Series) else pd.Series(list(verdicts), dtype=object)
    codes = np.asarray(pd.Categorical(s, categories=list(VERDICTS)).codes, dtype=np.int8).copy()
    bad = (codes == -1) & s.notna().to_numpy()
    if bad.any():
        # Slow path only for values that are not already canonical.
        raw = s[bad]
        norm = raw.map(lambda x: x.strip().lower() if isinstance(x, str) else x)
        fixed = np.asarray(pd.Categorical(norm, categories=list(VERDICTS)).codes, dtype=np.int8)
        if (fixed == -1).any():
            example = raw[fixed == -1].iloc[0]
            raise ValueError(f"verdict: expected one of {list(VERDICTS)}, got {example!r}")
        codes[bad] = fixed
    return codes


def _is_missing(x: Any) -> bool:
    if x is None:
        return True
    try:
        return bool(pd.isna(x)) if np.ndim(x) == 0 else False
    except (TypeError, ValueError):
        return False


def normalize_refs(refs: Any) -> tuple[int, ...]:
    """Any refs value -> sorted tuple of distinct ints (non-integers dropped)."""
    if _is_missing(refs):
        return ()
    if isinstance(refs, (str, bytes)) or np.ndim(refs) == 0:
        refs = [refs]
    out = set()
    for r in refs:
        if isinstance(r, (bool, np.bool_)):
            continue
        try:
            f = float(r)
        except (TypeError, ValueError):
            continue
        if np.isfinite(f) and f == int(f):
            out.add(int(f))
    return tuple(sorted(out))


def _require(df: pd.DataFrame, cols: Iterable[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}")


def flatten_refs(refs) -> tuple[np.ndarray, np.ndarray]:
    """Sequence of refs values -> (row position, ref as float), vectorised.

    Fast path for lists/tuples/arrays of numbers; falls back to pandas
    explode for None/NaN/scalars/strings.  Non-numeric values become NaN.
    """
    if not isinstance(refs, np.ndarray):
        refs = _object_array(list(refs))
    if len(refs) == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    try:
        if not set(map(type, refs)) <= _FAST_REF_TYPES:
            raise TypeError
        lens = np.fromiter(map(len, refs), dtype=np.int64, count=len(refs))
        flat = np.fromiter(chain.from_iterable(refs), dtype=float, count=int(lens.sum()))
        rows = np.repeat(np.arange(len(refs), dtype=np.int64), lens)
        return rows, flat
    except (TypeError, ValueError):
        pass
    ex = pd.Series(refs, dtype=object).explode()
    vals = pd.to_numeric(ex, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return ex.index.to_numpy(dtype=np.int64), vals


def _object_array(items: list) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _tuples_by_row(rows: np.ndarray, vals: np.ndarray, n_rows: int) -> np.ndarray:
    """Sorted (row, val) int pairs -> object array of tuples, one per row."""
    out = [()] * n_rows
    if len(rows):
        starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
        ends = np.append(starts[1:], len(rows))
        vlist = vals.tolist()
        for s_, e_ in zip(starts.tolist(), ends.tolist(), strict=True):
            out[int(rows[s_])] = tuple(vlist[s_:e_])
    return _object_array(out)


def normalize_refs_many(values) -> np.ndarray:
    """Vectorised :func:`normalize_refs`: object array of sorted int tuples."""
    if not isinstance(values, np.ndarray):
        values = _object_array(list(values))
    ridx, rval = flatten_refs(values)
    ok = np.isfinite(rval) & (rval == np.floor(rval))
    pairs = pd.DataFrame({"r": ridx[ok], "v": rval[ok].astype(np.int64)}).drop_duplicates()
    pairs = pairs.sort_values(["r", "v"], kind="mergesort")
    return _tuples_by_row(pairs["r"].to_numpy(), pairs["v"].to_numpy(), len(values))


def human_consensus(labels: pd.DataFrame) -> pd.DataFrame:
    """One consensus label per (trace_id, step) from raw human labels.

    ``labels`` columns: trace_id, step, annotator, verdict, skeleton_refs
    (skeleton_refs optional).  Rows with a missing verdict are ignored (the
    annotator did not label that step).  One annotator may label a step only
    once (ValueError otherwise).

    Rules
    -----
    * verdict = the verdict given by most annotators of the step;
    * ties are broken by severity, ``invalid > neutral > valid``: if half of
      the annotators flag an error, the consensus must not silently drop it
      (a false alarm costs an adjudicator a look, a lost error biases every
      score and the hazard estimate towards "no error");
    * refs = the skeleton steps cited by at least half of the annotators who
      gave the consensus verdict (``2 * cites >= n_agree``); an annotator
      citing a step twice counts once; non-integer refs are dropped.

    Returns columns trace_id, step, verdict, skeleton_refs (sorted tuple of
    ints), n_annotators, n_agree; sorted by trace_id, step.  The result does
    not depend on the order of the rows or of the annotators.
    """
    out_cols = ["trace_id", "step", "verdict", "skeleton_refs", "n_annotators", "n_agree"]
    _require(labels, ["trace_id", "step", "annotator", "verdict"], "human labels")
    df = labels.loc[labels["verdict"].notna()]
    if df.empty:
        return pd.DataFrame(
            {
                "trace_id": pd.Series(dtype=object),
                "step": pd.Series(dtype="int64"),
                "verdict": pd.Series(dtype=object),
                "skeleton_refs": pd.Series(dtype=object),
                "n_annotators": pd.Series(dtype="int64"),
                "n_agree": pd.Series(dtype="int64"),
            }
        )[out_cols]
    step = pd.to_numeric(df["step"], errors="raise").to_numpy(dtype=np.int64)
    sev = np.array([SEVERITY[v] for v in VERDICTS], dtype=np.int64)[verdict_codes(df["verdict"])]
    keys = pd.DataFrame({"trace_id": df["trace_id"].to_numpy(), "step": step})
    g = keys.groupby(["trace_id", "step"], sort=True).ngroup().to_numpy(dtype=np.int64)
    n_groups = int(g.max()) + 1
    ann, ann_names = pd.factorize(df["annotator"])
    ann = ann.astype(np.int64)
    if (ann < 0).any():
        raise ValueError("human labels: annotator must not be null")
    n_ann_ids = len(ann_names)

    ga = np.sort(g * n_ann_ids + ann)
    dup = ga[1:] == ga[:-1]
    if dup.any():
        k = int(ga[1:][dup][0])
        row = np.flatnonzero((g == k // n_ann_ids) & (ann == k % n_ann_ids))[0]
        raise ValueError(
            f"human labels: annotator {ann_names[k % n_ann_ids]!r} labelled trace "
            f"{keys['trace_id'].iloc[row]!r} step {step[row]} twice"
        )

    # votes[g, severity]; consensus = most votes, ties -> most severe.
    votes = np.bincount(g * 3 + sev, minlength=n_groups * 3).reshape(n_groups, 3)
    cons_sev = np.argmax(votes * 3 + np.arange(3), axis=1)
    n_agree = votes[np.arange(n_groups), cons_sev]
    n_annotators = votes.sum(axis=1)

    refs_out = _object_array([()] * n_groups)
    if "skeleton_refs" in df.columns:
        agree = np.flatnonzero(sev == cons_sev[g])
        ridx, rval = flatten_refs(df["skeleton_refs"].to_numpy(dtype=object)[agree])
        ok = np.isfinite(rval) & (rval == np.floor(rval))
        rg = g[agree][ridx][ok]
        ra = ann[agree][ridx][ok]
        rv = rval[ok].astype(np.int64)
        if len(rv):
            # distinct (group, ref, annotator), then count annotators per (group, ref)
            trip = pd.DataFrame({"g": rg, "r": rv, "a": ra}).drop_duplicates()
            cnt = trip.groupby(["g", "r"], sort=True).size()
            gi = cnt.index.get_level_values(0).to_numpy(dtype=np.int64)
            ri = cnt.index.get_level_values(1).to_numpy(dtype=np.int64)
            keep = 2 * cnt.to_numpy() >= n_agree[gi]
            refs_out = _tuples_by_row(gi[keep], ri[keep], n_groups)

    first = np.zeros(n_groups, dtype=np.int64)
    first[g[::-1]] = np.arange(len(g))[::-1]  # any row of each group
    sev_to_verdict = np.empty(3, dtype=object)
    for v, s_ in SEVERITY.items():
        sev_to_verdict[s_] = v
    return pd.DataFrame(
        {
            "trace_id": keys["trace_id"].to_numpy()[first],
            "step": step[first],
            "verdict": sev_to_verdict[cons_sev],
            "skeleton_refs": refs_out,
            "n_annotators": n_annotators.astype(np.int64),
            "n_agree": n_agree.astype(np.int64),
        }
    )[out_cols]


def _as_source(df: pd.DataFrame | None, origin: str) -> pd.DataFrame:
    cols = ["trace_id", "step", "verdict", "skeleton_refs"]
    if df is None or len(df) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols + ["origin"]})
    _require(df, ["trace_id", "step", "verdict"], f"{origin} labels")
    d = df.loc[df["verdict"].notna()].copy()
    if "skeleton_refs" not in d.columns:
        d["skeleton_refs"] = _object_array([()] * len(d))
    d["step"] = pd.to_numeric(d["step"], errors="raise").astype("int64")
    if d.duplicated(["trace_id", "step"]).any():
        r = d.loc[d.duplicated(["trace_id", "step"])].iloc[0]
        raise ValueError(f"{origin} labels: trace {r['trace_id']!r} step {r['step']} labelled twice")
    d = d[cols].copy()
    d["origin"] = origin
    return d


def final_labels(
    adjudicated: pd.DataFrame | None,
    human: pd.DataFrame | None,
    judge: pd.DataFrame | None,
) -> pd.DataFrame:
    """The ``final`` label source, decided step by step.

    For every (trace_id, step) present in any input: the adjudicated label if
    there is one, else the human consensus (output of
    :func:`human_consensus`), else the primary judge's label.  Each input has
    columns trace_id, step, verdict, skeleton_refs and at most one row per
    step; any input may be None or empty.

    Returns trace_id, step, verdict, skeleton_refs, origin
    (``adjudicated`` / ``human`` / ``judge``), sorted by trace_id, step.
    """
    parts = [
        _as_source(adjudicated, ORIGIN_ADJUDICATED),
        _as_source(human, ORIGIN_HUMAN),
        _as_source(judge, ORIGIN_JUDGE),
    ]
    parts = [p for p in parts if len(p)]
    cols = ["trace_id", "step", "verdict", "skeleton_refs", "origin"]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    allp = pd.concat(parts, ignore_index=True)  # priority order = concat order
    out = allp.drop_duplicates(["trace_id", "step"], keep="first")
    out = out.sort_values(["trace_id", "step"], kind="mergesort").reset_index(drop=True)
    out["verdict"] = np.asarray(VERDICTS, dtype=object)[verdict_codes(out["verdict"])]
    out["skeleton_refs"] = normalize_refs_many(out["skeleton_refs"].to_numpy(dtype=object))
    return out[cols]


def complete_traces(traces: pd.DataFrame, labels: pd.DataFrame) -> pd.Series:
    """Whether each trace's labels from one source are complete.

    ``traces``: trace_id, n_steps.  ``labels``: trace_id, step, verdict (one
    source).  A trace is complete when every step 1..N has a non-missing
    verdict; labels for steps outside 1..N are ignored.  An empty trace
    (N = 0) is vacuously complete.  Returns a bool Series indexed by
    trace_id in the order of ``traces``.
    """
    _require(traces, ["trace_id", "n_steps"], "traces")
    _require(labels, ["trace_id", "step", "verdict"], "labels")
    ids = pd.Index(traces["trace_id"])
    n = traces["n_steps"].to_numpy(dtype=np.int64)
    lab = labels.loc[labels["verdict"].notna(), ["trace_id", "step"]]
    code = ids.get_indexer(lab["trace_id"])
    step = pd.to_numeric(lab["step"], errors="coerce").to_numpy(dtype=float)
    ok = code >= 0
    code, step = code[ok], step[ok]
    ok = (step >= 1) & (step <= n[code]) & (step == np.floor(step))
    span = int(n.max(initial=0)) + 1
    pairs = np.sort(code[ok].astype(np.int64) * span + step[ok].astype(np.int64))
    if len(pairs):
        pairs = pairs[np.concatenate(([True], pairs[1:] != pairs[:-1]))]
    counts = np.bincount(pairs // span, minlength=len(ids))
    return pd.Series(counts == n, index=ids, name="complete")


def determined_first_errors(traces: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """Each trace's first error under one source's labels, and whether the labels determine it.

    ``traces``: trace_id, n_steps.  ``labels``: trace_id, step, verdict (one source, at most one
    verdict per step; a null verdict is no label).  The first error t* is the earliest invalid step
    (NaN when no step is invalid).  It is *determined* when every step 1..t* is labelled (t* = N
    when no step is invalid), so a trace labelled only up to its earliest error (ProcessBench's
    protocol) determines its first error though it is not complete (``complete_traces``: its
    process scores need every step); "no error" is determined only by a complete trace.  Returns
    trace_id, first_error (float, NaN = none), determined (bool), in the order of ``traces``.
    """
    _require(traces, ["trace_id", "n_steps"], "traces")
    _require(labels, ["trace_id", "step", "verdict"], "labels")
    ids = pd.Series(traces["trace_id"].to_numpy())
    n = pd.to_numeric(traces["n_steps"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    lab = labels.loc[labels["verdict"].notna(), ["trace_id", "step", "verdict"]]
    step = pd.to_numeric(lab["step"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    invalid = verdict_codes(lab["verdict"]) == CODE_INVALID
    first = pd.Series(step[invalid]).groupby(lab["trace_id"].to_numpy()[invalid]).min()
    fe = ids.map(first).to_numpy(dtype=float, na_value=np.nan)
    limit = np.where(np.isnan(fe), n, fe)
    lim = lab["trace_id"].map(dict(zip(ids.tolist(), limit.tolist(), strict=True))).to_numpy(dtype=float,
                                                                                           na_value=np.nan)
    within = lab.loc[(step >= 1) & (step <= lim), ["trace_id", "step"]].drop_duplicates()
    counts = ids.map(within.groupby("trace_id").size()).fillna(0).to_numpy(dtype=float)
    return pd.DataFrame({"trace_id": ids.to_numpy(), "first_error": fe, "determined": counts == limit})
