"""Agreement among several annotators on their step verdicts: Krippendorff's
alpha, Fleiss' kappa and pairwise Cohen's kappa (docs/agreement.md)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from agreement.core.pairs import int_steps, require
from agreement.core.steps import CODES, cohen_kappa
from scoring.core.labels import VERDICTS, verdict_codes


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
