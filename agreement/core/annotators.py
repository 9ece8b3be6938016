"""Agreement among several annotators on their step verdicts: Krippendorff's
alpha, Fleiss' kappa and pairwise Cohen's kappa; which annotators finished the
same traces; each annotator against the adjudicated label, else the others'
consensus (leave-one-out) (docs/agreement.md)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from agreement.core.first_error import first_error_of_pairs
from agreement.core.pairs import first_error_determined, int_steps, paired_steps, paired_traces, require
from agreement.core.steps import CODES, cohen_kappa
from agreement.core.tallies import StepTally
from scoring.core.labels import VERDICTS, final_labels, human_consensus, verdict_codes


def _annotator_matrix(labels: pd.DataFrame) -> tuple[np.ndarray, list[Any]]:
    """Raw labels -> (items x annotators) code matrix (-1 = not labelled)."""
    require(labels, ["trace_id", "step", "annotator", "verdict"], "annotator labels")
    d = labels.loc[labels["verdict"].notna()]
    step = int_steps(d["step"], "annotator labels")
    code = verdict_codes(d["verdict"]).astype(np.int64)
    keys = pd.DataFrame({"trace_id": d["trace_id"].to_numpy(), "step": step})
    # Items in (trace, step) order: the sums below (Fleiss' mean) then do not depend on the order the rows
    # were read in, and chunks of whole traces stack into the study's matrix (AnnotatorTally).
    try:
        item = keys.groupby(["trace_id", "step"], sort=True).ngroup().to_numpy(dtype=np.int64)
    except TypeError:  # unorderable mixed trace ids: first appearance
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
    return annotator_agreement_of_matrix(*_annotator_matrix(annotator_labels))


def annotator_agreement_of_matrix(mat: np.ndarray, names: list[Any]) -> dict[str, Any]:
    """:func:`annotator_agreement` of an (items x annotators) verdict-code matrix (-1: not labelled; columns
    in ``names`` order, sorted)."""
    from statsmodels.stats.inter_rater import fleiss_kappa as _fleiss

    n_items, n_ann = mat.shape
    undefined: dict[str, str] = {}
    k = len(VERDICTS)
    # int32: an item has at most one label per annotator (and the matrix is held for a whole study: 12 bytes
    # an item, not 24)
    counts = np.zeros((n_items, k), dtype=np.int32)
    for c in range(k):
        counts[:, c] = (mat == c).sum(axis=1, dtype=np.int32)
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
        a = nominal_alpha(counts[paired])
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
            v, why = cohen_kappa(mat[both, i], mat[both, j], CODES)
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


def nominal_alpha(counts: np.ndarray) -> float:
    """Krippendorff's alpha (nominal) of an (items x values) count matrix of pairable items (two values or
    more each), as ``krippendorff.alpha(value_counts=counts, level_of_measurement="nominal")`` gives it
    (tests/agreement/core/test_agreement_libraries.py holds the two equal; NaN when the expected disagreement is 0).

    Alpha is ``1 - D_o / D_e`` of the coincidence matrix ``o`` (Krippendorff 2011, "Computing Krippendorff's
    alpha-reliability"): each item adds ``(n n^T - diag(n)) / (m - 1)`` of its value counts ``n`` (``m`` of
    them), and ``D_e`` is of the value totals ``n_c``. The package forms that per-item matrix for every item at
    once -- four (items x values x values) float arrays, 300 MB at the million paired steps of a 1M-trace
    study. Here each *distinct* count row (a handful: with three verdicts and two annotators, six) adds its
    term times how often it occurs, so the memory does not grow with the study."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 2 or not len(counts):
        return float("nan")
    rows, weight = np.unique(counts, axis=0, return_counts=True)
    per = weight / (rows.sum(axis=1) - 1.0)  # each distinct row's weight over its (m - 1)
    o = np.einsum("u,ui,uj->ij", per, rows, rows) - np.diag(per @ rows)
    n_c = o.sum(axis=0)
    n = n_c.sum()
    e = (np.outer(n_c, n_c) - np.diag(n_c)) / (n - 1.0)
    off = ~np.eye(len(n_c), dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(1.0 - o[off].sum() / e[off].sum())


def overlap_sets(annotator_labels: pd.DataFrame, n_steps: pd.Series) -> list[dict[str, Any]]:
    """Which annotators finished the same traces: one row per set of annotators (``annotators`` sorted, ``size``),
    the traces exactly that set finished and their steps (``n_steps`` by trace_id); most traces first, then by
    the names."""
    return overlap_rows(overlap_counts(annotator_labels, n_steps))


def overlap_counts(annotator_labels: pd.DataFrame, n_steps: pd.Series,
                   into: dict[tuple, list[int]] | None = None) -> dict[tuple, list[int]]:
    """Set of annotators -> [traces, steps], added to ``into`` (chunks of whole traces add up)."""
    overlap: dict[tuple, list[int]] = {} if into is None else into
    per_trace = annotator_labels.groupby("trace_id")["annotator"].agg(lambda s: tuple(sorted(set(s.tolist()))))
    for tid, names in per_trace.items():
        entry = overlap.setdefault(names, [0, 0])
        entry[0] += 1
        entry[1] += int(n_steps.get(tid, 0))
    return overlap


def overlap_rows(overlap: dict[tuple, list[int]]) -> list[dict[str, Any]]:
    return [{"annotators": list(k), "size": len(k), "traces": v[0], "steps": v[1]}
            for k, v in sorted(overlap.items(), key=lambda kv: (-kv[1][0], kv[0]))]


class MatrixTally:
    """The (items x annotators) matrices of chunks of whole traces, in trace order, as int8 codes: the
    study's matrix of :func:`annotator_agreement` without its labels held."""

    def __init__(self) -> None:
        self._parts: list[tuple[np.ndarray, list[Any]]] = []

    def add(self, annotator_labels: pd.DataFrame) -> None:
        if len(annotator_labels):
            mat, names = _annotator_matrix(annotator_labels)
            if len(mat):
                self._parts.append((mat.astype(np.int8), names))

    def agreement(self) -> dict[str, Any]:
        names = sorted({n for _, part in self._parts for n in part})
        col = {n: i for i, n in enumerate(names)}
        mat = np.full((sum(len(m) for m, _ in self._parts), len(names)), -1, dtype=np.int8)
        row = 0
        for m, part in self._parts:
            mat[row:row + len(m), [col[n] for n in part]] = m
            row += len(m)
        return annotator_agreement_of_matrix(mat, names)


def first_error_frame(traces: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """trace_id, n_steps, first_error, process (NaN), complete (= first
    error determined) -- what first-error agreement needs, without scoring."""
    return first_error_determined(traces[["trace_id", "n_steps"]], steps, "labels")


def leave_one_out(raw: pd.DataFrame, adjudicated: pd.DataFrame | None, traces: pd.DataFrame, names: dict[int, str],
                  *, n_resamples: int, seed: int) -> list[dict[str, Any]]:
    """Each annotator against the **adjudicated label, else the consensus of the other annotators** (leave-one-out,
    so nobody agrees with themselves): step agreement with bootstrap intervals, first-error agreement, and how often
    each side calls a step invalid; lowest kappa first (who needs calibration), annotators without a kappa last.

    ``raw``: every annotator's labels (trace_id, step, src = the annotator's key in ``names``, verdict,
    skeleton_refs); ``adjudicated``: the adjudicated steps as ``final_labels`` gives them, or None; ``traces``:
    trace_id, n_steps."""
    tally = LeaveOneOutTally(names)
    tally.add(raw, adjudicated, traces)
    return tally.rows(n_resamples=n_resamples, seed=seed)


class LeaveOneOutTally:
    """:func:`leave_one_out` over chunks of whole traces added in trace order: per annotator a StepTally of
    their pairs with the reference, and the traces whose first error both determine (one row each)."""

    def __init__(self, names: dict[int, str]) -> None:
        self.names = names
        self._of: dict[int, dict[str, Any]] = {}

    def add(self, raw: pd.DataFrame, adjudicated: pd.DataFrame | None, traces: pd.DataFrame) -> None:
        src = raw["src"].to_numpy()
        for pk in sorted(self.names, key=lambda p: self.names[p]):
            mine_raw = raw.loc[src == pk]
            if mine_raw.empty:
                continue
            others = raw.loc[src != pk].rename(columns={"src": "annotator"})
            consensus = human_consensus(others) if len(others) else None
            reference = final_labels(adjudicated, consensus, None)
            mine = mine_raw[["trace_id", "step", "verdict", "skeleton_refs"]]
            of = self._of.setdefault(pk, {"traces": 0, "steps": 0, "pairs": StepTally(), "fe": []})
            of["traces"] += int(mine_raw["trace_id"].nunique())
            of["steps"] += int(len(mine_raw))
            of["pairs"].add(paired_steps(reference, mine))
            fe = paired_traces(first_error_frame(traces, reference), first_error_frame(traces, mine))
            of["fe"].append(fe[["trace_id", "reference_first_error", "candidate_first_error"]])

    def rows(self, *, n_resamples: int, seed: int) -> list[dict[str, Any]]:
        rows = []
        for pk, of in sorted(self._of.items(), key=lambda kv: self.names[kv[0]]):
            pairs: StepTally = of["pairs"]
            step = pairs.agreement()
            cis = pairs.intervals(n_resamples=n_resamples, seed=seed, level=0.95)
            fe = first_error_of_pairs(pd.concat(of["fe"], ignore_index=True))
            ref_inv, own_inv = pairs.invalid_rates()
            undefined = {**step["undefined"], **{k: v for k, v in fe["undefined"].items() if k.startswith("first_error")}}
            rows.append({
                "annotator": self.names[pk],
                "traces": of["traces"], "steps_labelled": of["steps"],
                "steps_compared": step["steps_compared"],
                "percent_agreement": step["percent_agreement"], "percent_agreement_ci": cis["percent_agreement_ci"],
                "kappa": step["kappa"], "kappa_ci": cis["kappa_ci"],
                "kappa_binary": step["kappa_binary"], "kappa_binary_ci": cis["kappa_binary_ci"],
                "traces_compared": fe["traces_compared"], "first_error_exact": fe["first_error_exact"],
                "invalid_rate": own_inv, "reference_invalid_rate": ref_inv,
                "confusion": step["confusion"], "undefined": undefined,
            })
        rows.sort(key=lambda r: (r["kappa"] is None, r["kappa"] if r["kappa"] is not None else 0, r["annotator"]))
        return rows
