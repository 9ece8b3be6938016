"""Input preparation shared by the agreement metrics (pure; docs/agreement.md).

The long tables every metric reads:

* step labels of one source: ``trace_id, step, verdict[, skeleton_refs, confidence]``
  (at most one row per step; a null verdict means "not labelled");
* per-trace scores of one source (the output of ``scoring.core.scores.score_traces``):
  ``trace_id, n_steps, first_error, process[, complete]``.

``paired_steps`` and ``paired_traces`` pair two sources; the other helpers
validate inputs (ValueError naming the table) and make results JSON-ready.
Every metric that cannot be computed is ``None`` with a plain-language reason
in an ``undefined`` dict; no NaN is ever returned.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from scoring.core.labels import VERDICTS, determined_first_errors, verdict_codes


def require(df: pd.DataFrame, cols: Iterable[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{what}: expected a DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}")


def int_steps(s: pd.Series, what: str) -> np.ndarray:
    v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(v).any() or (v != np.floor(v)).any():
        raise ValueError(f"{what}: step must be an integer")
    return v.astype(np.int64)


def confidences(s: pd.Series, what: str) -> np.ndarray:
    v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isnan(v) & ((v < 0) | (v > 1))
    if bad.any():
        raise ValueError(f"{what}: confidence must be within [0, 1], got {v[bad][0]!r}")
    return v


def step_table(labels: pd.DataFrame, what: str, *, with_confidence: bool = False) -> pd.DataFrame:
    """Labelled steps of one source -> trace_id, step, code[, confidence]."""
    require(labels, ["trace_id", "step", "verdict"], what)
    d = labels.loc[labels["verdict"].notna()]
    out = pd.DataFrame(
        {
            "trace_id": d["trace_id"].to_numpy(),
            "step": int_steps(d["step"], what),
            "code": verdict_codes(d["verdict"]).astype(np.int64),
        }
    )
    if with_confidence:
        conf = d["confidence"] if "confidence" in d.columns else pd.Series(np.nan, index=d.index)
        out["confidence"] = confidences(conf, what)
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
    ref = step_table(reference_labels, "reference labels")
    cand = step_table(candidate_labels, "candidate labels", with_confidence=True)
    m = ref.merge(cand, on=["trace_id", "step"], how="inner", suffixes=("_ref", "_cand"))
    m = sorted_frame(m, ["trace_id", "step"])
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


def sorted_frame(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    try:
        return df.sort_values(cols, kind="mergesort").reset_index(drop=True)
    except TypeError:  # unorderable mixed trace ids: keep input order
        return df.reset_index(drop=True)


def codes_of(pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return (
        verdict_codes(pairs["reference_verdict"]).astype(np.int64),
        verdict_codes(pairs["candidate_verdict"]).astype(np.int64),
    )


def score_table(scores: pd.DataFrame, what: str) -> pd.DataFrame:
    require(scores, ["trace_id", "n_steps", "first_error", "process"], what)
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
    ref = score_table(reference_scores, "reference scores")
    cand = score_table(candidate_scores, "candidate scores")
    m = ref.merge(cand, on="trace_id", how="inner", suffixes=("_ref", "_cand"))
    bad = m["n_ref"].to_numpy() != m["n_cand"].to_numpy()
    if bad.any():
        r = m.loc[bad].iloc[0]
        raise ValueError(
            f"scores: trace {r['trace_id']!r} has n_steps {r['n_ref']} in the reference "
            f"but {r['n_cand']} in the candidate"
        )
    keep = m["complete_ref"].to_numpy() & m["complete_cand"].to_numpy() & (m["n_ref"].to_numpy() >= 1)
    m = sorted_frame(m.loc[keep], ["trace_id"])
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


def first_error_determined(scores: pd.DataFrame, labels: pd.DataFrame, what: str) -> pd.DataFrame:
    """Per trace of ``scores`` (trace_id, n_steps[, first_error, complete]):
    its first error and whether one source's ``labels`` *determine* it.

    A first error t* is determined when every step 1..t* is labelled (t* is
    the earliest invalid step and nothing before it is unknown); "no error"
    is determined when every step 1..N is labelled and none is invalid
    (a complete trace). So a ProcessBench reference, labelled only up to its
    earliest error, counts whole (docs/agreement.md, "First-error metrics").
    The scores' own first error and ``complete`` are kept where given.
    Columns trace_id, n_steps, first_error (NaN = none), process (NaN),
    complete (= determined), ready for :func:`paired_traces`.
    """
    require(scores, ["trace_id", "n_steps"], what)
    lab = step_table(labels, what)  # validated: integer steps, one verdict per step
    ids = pd.Series(scores["trace_id"].to_numpy())
    # The rule is scoring's (the score exports fill the same first errors in).
    det = determined_first_errors(
        scores[["trace_id", "n_steps"]],
        pd.DataFrame({"trace_id": lab["trace_id"].to_numpy(), "step": lab["step"].to_numpy(),
                      "verdict": np.asarray(VERDICTS, dtype=object)[lab["code"].to_numpy()]}))
    fe_lab, determined = det["first_error"].to_numpy(dtype=float), det["determined"].to_numpy(dtype=bool)
    if "complete" in scores.columns:
        complete = scores["complete"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    else:
        complete = np.zeros(len(ids), dtype=bool)
    if "first_error" in scores.columns:
        fe = pd.to_numeric(scores["first_error"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        fe = np.where(complete, fe, fe_lab)
    else:
        fe = fe_lab
    return pd.DataFrame({"trace_id": ids.to_numpy(), "n_steps": scores["n_steps"].to_numpy(), "first_error": fe,
                         "process": np.nan, "complete": complete | determined})


def native(x: Any) -> Any:
    if isinstance(x, dict):
        return {(native(k) if not isinstance(k, str) else k): native(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [native(v) for v in x]
    if x is None or x is pd.NA:
        return None
    if isinstance(x, np.generic):
        x = x.item()
    return x


def merge_undefined(target: dict[str, str], part: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    for k, v in part.pop("undefined", {}).items():
        target[prefix + k] = v
    return part
