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

from agreement.core.first_error import first_error_agreement
from agreement.core.intervals import step_intervals
from agreement.core.pairs import first_error_determined, int_steps, paired_steps, require
from agreement.core.steps import CODES, cohen_kappa, step_agreement
from scoring.core.labels import INVALID, VERDICTS, final_labels, human_consensus, verdict_codes


def _annotator_matrix(labels: pd.DataFrame) -> tuple[np.ndarray, list[Any]]:
    """Raw labels -> (items x annotators) code matrix (-1 = not labelled)."""
    require(labels, ["trace_id", "step", "annotator", "verdict"], "annotator labels")
    d = labels.loc[labels["verdict"].notna()]
    step = int_steps(d["step"], "annotator labels")
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


def overlap_sets(annotator_labels: pd.DataFrame, n_steps: pd.Series) -> list[dict[str, Any]]:
    """Which annotators finished the same traces: one row per set of annotators (``annotators`` sorted, ``size``),
    the traces exactly that set finished and their steps (``n_steps`` by trace_id); most traces first, then by
    the names."""
    per_trace = annotator_labels.groupby("trace_id")["annotator"].agg(lambda s: tuple(sorted(set(s.tolist()))))
    overlap: dict[tuple, list[int]] = {}
    for tid, names in per_trace.items():
        entry = overlap.setdefault(names, [0, 0])
        entry[0] += 1
        entry[1] += int(n_steps.get(tid, 0))
    return [{"annotators": list(k), "size": len(k), "traces": v[0], "steps": v[1]}
            for k, v in sorted(overlap.items(), key=lambda kv: (-kv[1][0], kv[0]))]


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
    rows = []
    for pk, name in sorted(names.items(), key=lambda kv: kv[1]):
        mine_raw = raw.loc[raw["src"].to_numpy() == pk]
        if mine_raw.empty:
            continue
        others = raw.loc[raw["src"].to_numpy() != pk].rename(columns={"src": "annotator"})
        consensus = human_consensus(others) if len(others) else None
        reference = final_labels(adjudicated, consensus, None)
        mine = mine_raw[["trace_id", "step", "verdict", "skeleton_refs"]]
        pairs = paired_steps(reference, mine)
        step = step_agreement(reference, mine)
        cis = step_intervals(pairs, n_resamples=n_resamples, seed=seed)
        fe = first_error_agreement(first_error_frame(traces, reference), first_error_frame(traces, mine))
        ref_inv = float(np.mean(pairs["reference_verdict"].to_numpy() == INVALID)) if len(pairs) else None
        own_inv = float(np.mean(pairs["candidate_verdict"].to_numpy() == INVALID)) if len(pairs) else None
        undefined = {**step["undefined"], **{k: v for k, v in fe["undefined"].items() if k.startswith("first_error")}}
        rows.append({
            "annotator": name,
            "traces": int(mine_raw["trace_id"].nunique()), "steps_labelled": int(len(mine_raw)),
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
