"""Γ, Δ and F exactly as spec §3.4, with the paired bootstrap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from abstraction.core import aggregate as agg
from abstraction.core import generators as g


def _rows(model: str, sub: str, correct: list[int]) -> list[dict]:
    category, task, variant = g.classify(sub)
    return [{"model": model, "sub_dataset": sub, "category": category, "task": task, "variant": variant,
             "instance": i, "correct": c} for i, c in enumerate(correct)]


def _frame(model: str, rates: dict[str, float], n: int = 100) -> pd.DataFrame:
    rows = []
    for sub, rate in rates.items():
        k = round(rate * n)
        rows += _rows(model, sub, [1] * k + [0] * (n - k))
    return pd.DataFrame(rows)


def _full_rates(seed: int = 1) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    subs = [s for c in g.CATEGORIES for s in g.sub_datasets(c)]
    return {s: float(rng.integers(0, 101)) / 100 for s in subs}


def test_avg_is_the_mean_over_all_82_sub_datasets_not_over_categories():
    rates = _full_rates()
    (res,) = agg.aggregate(_frame("m", rates))
    cats = {c: np.mean([rates[s] for s in g.sub_datasets(c)]) for c in g.CATEGORIES}
    assert res.stats["AVG"] == pytest.approx(np.mean(list(rates.values())))
    weighted = (4 * cats["BC"] + 16 * cats["EC"] + 12 * cats["NBR"] + cats["MA"] + 7 * cats["SMA"] + 42 * cats["SR"]) / 82
    assert res.stats["AVG"] == pytest.approx(weighted)
    for c in g.CATEGORIES:
        assert res.stats[c] == pytest.approx(cats[c])


def test_delta_uses_the_14_paired_ec_tasks_and_satisfies_the_sr_identity():
    rates = _full_rates(2)
    (res,) = agg.aggregate(_frame("m", rates))
    with_mem = np.mean([rates[g.raw_name(t)] for t in g.PAIRED_TASKS])  # no square root, no dates
    for v in ("all", "num", "op"):
        without = np.mean([rates[g.variant_name(t, v)] for t in g.PAIRED_TASKS])
        assert res.stats[f"delta_{v}"] == pytest.approx(with_mem - without)
    s = res.stats
    assert s["SR"] == pytest.approx(s["with_mem"] - (s["delta_op"] + s["delta_num"] + s["delta_all"]) / 3)
    assert s["F"] == pytest.approx(min(1, max(0, 0.5 * s["AVG"] + 0.5 * (1 - s["delta_all"]))))


def test_delta_is_signed():
    (res,) = agg.aggregate(_frame("m", {"fixed_len_chat_bit_raw_dataset": 0.2, "fixed_len_chat_bit_dataset": 0.5}))
    assert res.stats["delta_all"] == pytest.approx(-0.3)


def test_the_paper_truncates_to_two_decimals():
    assert agg.truncate2(0.0590) == "0.05" and agg.truncate2(0.40996) == "0.40"
    assert agg.truncate2(0.29) == "0.29" and agg.truncate2(0.3095) == "0.30" and agg.truncate2(1.0) == "1.00"
    assert agg.truncate2(float("nan")) == "–"


def test_intervals_cover_the_point_and_a_paired_delta_is_tighter_than_an_unpaired_one():
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 2, 96)
    flip = rng.random(96) < 0.1
    remapped = np.where(flip, 1 - raw, raw)
    df = pd.DataFrame(_rows("m", "fixed_len_chat_bit_raw_dataset", list(raw))
                      + _rows("m", "fixed_len_chat_bit_dataset", list(remapped)))
    (res,) = agg.aggregate(df, n_resamples=500, seed=3)
    lo, hi = res.intervals["delta_all"]
    assert lo <= res.stats["delta_all"] <= hi
    assert hi - lo < 0.15  # paired: only the 10% flipped items vary; unpaired it would be ~0.28 wide
    lo, hi = res.intervals["EC"]
    assert lo <= res.stats["EC"] <= hi


def test_models_are_aggregated_separately_and_columns_are_checked():
    df = pd.concat([_frame("a", {"chat_add_dataset": 0.5}), _frame("b", {"chat_add_dataset": 0.25})])
    a, b = agg.aggregate(df)
    assert (a.model, a.stats["BC"], b.model, b.stats["BC"]) == ("a", 0.5, "b", 0.25)
    assert np.isnan(a.stats["delta_all"])
    with pytest.raises(ValueError, match="missing columns: correct"):
        agg.aggregate(df.drop(columns=["correct"]))
