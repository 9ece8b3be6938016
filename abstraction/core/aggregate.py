"""Γ, the paired Δ and F (spec §3, aggregation exactly as §3.4). Pure pandas / NumPy.

Input: one row per checked item with ``model``, ``sub_dataset``, ``category``, ``task``, ``variant``
(raw | all | num | op), ``instance`` and ``correct`` (0/1).

* Γ_d: the share correct of a sub-dataset.
* Γ of a category: the unweighted mean of its Γ_d; AVG: the unweighted mean of every Γ_d present
  (82 in the full benchmark, so SR weighs 42/82: not the mean of the six categories).
* with_mem: mean Γ_d of the raw EC sub-datasets of the 14 paired task types (EC without square root
  and dates); without_v: mean Γ_d of the SR sub-datasets of variant v; Δ_v = with_mem − without_v
  (signed, spec §10 A3).
* F(Γ, Δ) = w1·AVG + w2·(1 − Δ_ALL), clipped to [0, 1] [I: w1 = w2 = 0.5; the paper gives none].

Intervals: a percentile bootstrap over items (scoring.core.bootstrap's interval), resampling the
instance indices of each paired task once for its raw and remapped sub-datasets together, so Δ stays
paired; every other sub-dataset resamples its own items."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal

import numpy as np
import pandas as pd

from abstraction.core.generators import CATEGORIES, PAIRED_TASKS
from scoring.core.bootstrap import check_level, percentile_interval

VARIANTS = ("all", "num", "op")
COLUMNS = ("model", "sub_dataset", "category", "task", "variant", "instance", "correct")
STATS = (*CATEGORIES, "AVG", "with_mem", "without_all", "without_num", "without_op", "delta_op", "delta_num",
         "delta_all", "F")
_PAIRED = frozenset(PAIRED_TASKS)


def truncate2(value: float | None) -> str:
    """Two decimals truncated (floor), as the paper prints: 0.2999 -> "0.29", in decimal arithmetic."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    d = Decimal(repr(float(value))).quantize(Decimal("0.01"), rounding=ROUND_FLOOR)
    return f"{d:.2f}"


def f_score(gamma: float, delta: float, w1: float = 0.5) -> float:
    if np.isnan(gamma) or np.isnan(delta):
        return float("nan")
    return float(min(1.0, max(0.0, w1 * gamma + (1 - w1) * (1 - delta))))


@dataclass
class ModelResult:
    model: str
    sub_datasets: dict[str, float]
    n_items: dict[str, int]
    stats: dict[str, float]
    intervals: dict[str, list[float] | None] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"model": self.model, **{k: _num(v) for k, v in self.stats.items()},
                "intervals": self.intervals, "sub_datasets": {k: _num(v) for k, v in self.sub_datasets.items()},
                "n_items": self.n_items}


def _num(v: float) -> float | None:
    return None if v is None or np.isnan(v) else float(v)


def _mean(gd: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Row means over the masked columns, NaN (a sub-dataset a model lacks) left out; NaN if none."""
    if not mask.any():
        return np.full(gd.shape[0], np.nan)
    part = gd[:, mask]
    n = (~np.isnan(part)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.nansum(part, axis=1) / np.maximum(n, 1), np.nan)


def _stats_from(gd: np.ndarray, cats: np.ndarray, raw_paired: np.ndarray, variants: np.ndarray) -> np.ndarray:
    """Every statistic from a (k, n_sub) matrix of Γ_d (NaN: sub-dataset absent): columns in STATS order."""
    out = np.full((gd.shape[0], len(STATS)), np.nan)
    with np.errstate(invalid="ignore"):
        for j, c in enumerate(CATEGORIES):
            out[:, j] = _mean(gd, cats == c)
        out[:, STATS.index("AVG")] = _mean(gd, np.ones(gd.shape[1], dtype=bool))
        with_mem = _mean(gd, raw_paired)
        out[:, STATS.index("with_mem")] = with_mem
        for v in VARIANTS:
            without = _mean(gd, variants == v)
            out[:, STATS.index(f"without_{v}")] = without
            out[:, STATS.index(f"delta_{v}")] = with_mem - without
        gamma, d_all = out[:, STATS.index("AVG")], out[:, STATS.index("delta_all")]
        f = np.clip(0.5 * gamma + 0.5 * (1 - d_all), 0.0, 1.0)
        out[:, STATS.index("F")] = f
    return out


def aggregate(df: pd.DataFrame, *, n_resamples: int = 0, level: float = 0.95, seed: int = 0,
              ) -> list[ModelResult]:
    """One result per model (in order of first appearance); intervals when ``n_resamples`` > 0."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"missing columns: {', '.join(missing)}")
    if n_resamples:
        check_level(level, n_resamples)
    results = []
    if df.empty:
        return results
    # Γ_d of every (model, sub_dataset) at once, as a (models x sub-datasets) matrix with NaN where a model
    # lacks a sub-dataset; every statistic of every model in one pass over it.
    grouped = df.groupby(["model", "sub_dataset"], sort=False, observed=True)["correct"]
    gd_long = grouped.mean()
    n_long = grouped.size()
    wide = gd_long.unstack("sub_dataset")
    models = list(pd.unique(df["model"]))
    wide = wide.reindex(index=models)
    subs = [str(c) for c in wide.columns]
    meta = (df.drop_duplicates("sub_dataset").assign(sub_dataset=lambda d: d["sub_dataset"].astype(str))
            .set_index("sub_dataset").loc[subs])
    cats = meta["category"].astype(str).to_numpy()
    variants = np.where(cats == "SR", meta["variant"].astype(str).to_numpy(), "")
    raw_paired = (cats == "EC") & meta["task"].astype(str).isin(_PAIRED).to_numpy()
    matrix = wide.to_numpy(dtype=float)
    points = _stats_from(matrix, cats, raw_paired, variants)
    n_wide = n_long.unstack("sub_dataset").reindex(index=models).to_numpy(dtype=float)
    for row, model in enumerate(models):
        have = ~np.isnan(matrix[row])
        res = ModelResult(str(model), {subs[j]: float(matrix[row, j]) for j in np.flatnonzero(have)},
                          {subs[j]: int(n_wide[row, j]) for j in np.flatnonzero(have)},
                          dict(zip(STATS, points[row], strict=True)))
        if n_resamples:
            mask = have
            res.intervals = _intervals(df[df["model"] == model], [subs[j] for j in np.flatnonzero(mask)],
                                       cats[mask], raw_paired[mask], variants[mask], n_resamples, level, seed)
        results.append(res)
    return results


def _intervals(rows: pd.DataFrame, subs: list[str], cats: np.ndarray, raw_paired: np.ndarray,
               variants: np.ndarray, n_resamples: int, level: float, seed: int) -> dict[str, list[float] | None]:
    rng = np.random.default_rng(seed)
    col = {s: i for i, s in enumerate(subs)}
    gd = np.empty((n_resamples, len(subs)))
    # A paired task's raw and remapped sub-datasets share one draw of instance indices.
    task, sub = rows["task"].astype(str), rows["sub_dataset"].astype(str)
    rows = rows.assign(sub_dataset=sub, group=np.where(task.isin(_PAIRED) & rows["category"].isin(["EC", "SR"]),
                                                       "task:" + task, "sub:" + sub))
    for _group, g in rows.groupby("group", sort=True):
        wide = g.pivot_table(index="instance", columns="sub_dataset", values="correct", aggfunc="mean")
        values = wide.to_numpy(dtype=float)  # (n_instances, n_subs in group); NaN where a variant lacks an item
        n = values.shape[0]
        idx = rng.integers(0, n, size=(n_resamples, n))
        picked = values[idx]  # (k, n, s)
        with np.errstate(invalid="ignore"):
            means = np.nanmean(picked, axis=1) if np.isnan(values).any() else picked.mean(axis=1)
        for j, s in enumerate(wide.columns):
            gd[:, col[s]] = means[:, j]
    stats = _stats_from(gd, cats, raw_paired, variants)
    return {name: percentile_interval(stats[:, j], level) for j, name in enumerate(STATS)}
