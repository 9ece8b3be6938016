"""Agreement core against the reference libraries on random data."""

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr, rankdata, spearmanr
from sklearn.metrics import cohen_kappa_score, confusion_matrix
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

import agreement.core.correlation as agr
from agreement.core.annotators import annotator_agreement, nominal_alpha
from agreement.core.correlation import correlation
from agreement.core.steps import step_agreement

approx = pytest.approx
VERD = np.array(["valid", "invalid", "neutral"], dtype=object)


def random_sources(seed, n_traces=60, max_steps=12, p_same=0.7):
    rng = np.random.default_rng(seed)
    rows_r, rows_c = [], []
    for t in range(n_traces):
        for s in range(1, rng.integers(1, max_steps) + 1):
            r = rng.choice(3, p=[0.7, 0.2, 0.1])
            c = r if rng.random() < p_same else rng.choice(3)
            if rng.random() < 0.9:
                rows_r.append((t, s, VERD[r]))
            if rng.random() < 0.9:
                rows_c.append((t, s, VERD[c]))
    cols = ["trace_id", "step", "verdict"]
    return pd.DataFrame(rows_r, columns=cols), pd.DataFrame(rows_c, columns=cols)


@pytest.mark.parametrize("seed", range(5))
def test_step_level_matches_sklearn(seed):
    ref, cand = random_sources(seed)
    m = step_agreement(ref, cand)
    j = ref.merge(cand, on=["trace_id", "step"], suffixes=("_r", "_c"))
    a, b = j["verdict_r"].to_numpy(), j["verdict_c"].to_numpy()
    assert m["steps_compared"] == len(j)
    assert m["percent_agreement"] == approx(np.mean(a == b))
    assert m["kappa"] == approx(cohen_kappa_score(a, b), abs=1e-12)
    assert m["kappa_binary"] == approx(cohen_kappa_score(a == "invalid", b == "invalid"), abs=1e-12)
    cm = confusion_matrix(a, b, labels=list(VERD))
    assert [[m["confusion"][x][y] for y in VERD] for x in VERD] == cm.tolist()


@pytest.mark.parametrize("seed", range(4))
def test_correlations_match_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 300))
    x = np.round(rng.uniform(0, 10, n), int(rng.integers(0, 4)))  # ties at low precision
    y = np.round(0.5 * x + rng.normal(0, 2, n), 1)
    m = correlation(x, y, n_resamples=50, seed=seed)
    assert m["pearson_r"] == approx(pearsonr(x, y)[0], abs=1e-12)
    assert m["spearman_rho"] == approx(spearmanr(x, y)[0], abs=1e-12)


def naive_bootstrap(x, y, n_resamples, seed, level=0.95):
    """Textbook version: draw the (n_resamples, n) index matrix, compute each
    resample with scipy, drop constant resamples, percentile interval."""
    idx = np.random.default_rng(seed).integers(0, len(x), size=(n_resamples, len(x)))
    pr, sr = [], []
    for row in idx:
        xs, ys = x[row], y[row]
        if np.all(xs == xs[0]) or np.all(ys == ys[0]):
            continue
        pr.append(pearsonr(xs, ys)[0])
        sr.append(spearmanr(rankdata(xs), rankdata(ys))[0])
    tail = (1 - level) / 2 * 100
    return list(np.percentile(pr, [tail, 100 - tail])), list(np.percentile(sr, [tail, 100 - tail]))


@pytest.mark.parametrize("n, decimals", [(4, 0), (9, 0), (60, 1), (400, 3)])
def test_vectorised_bootstrap_matches_the_textbook_method(n, decimals, monkeypatch):
    rng = np.random.default_rng(n)
    x = np.round(rng.uniform(0, 10, n), decimals)
    y = np.round(x + rng.normal(0, 3, n), decimals)
    m = correlation(x, y, n_resamples=300, seed=42)
    p_ci, s_ci = naive_bootstrap(x, y, 300, 42)
    assert m["pearson_ci"] == approx(p_ci, abs=1e-10)
    assert m["spearman_ci"] == approx(s_ci, abs=1e-10)
    # the chunk size does not change the random stream
    monkeypatch.setattr(agr, "_CHUNK_ELEMS", 7)
    m2 = correlation(x, y, n_resamples=300, seed=42)
    assert m2["pearson_ci"] == approx(m["pearson_ci"], abs=1e-12)
    assert m2["spearman_ci"] == approx(m["spearman_ci"], abs=1e-12)
    assert correlation(x, y, n_resamples=300, seed=42, level=0.5)["pearson_ci"] == approx(
        naive_bootstrap(x, y, 300, 42, level=0.5)[0], abs=1e-10
    )


def random_annotators(seed, n_items=80, n_ann=4, p_missing=0.3, equal=False):
    rng = np.random.default_rng(seed)
    truth = rng.choice(3, n_items, p=[0.6, 0.3, 0.1])
    rows = []
    for i in range(n_items):
        for a in range(n_ann):
            if not equal and rng.random() < p_missing:
                continue
            v = truth[i] if rng.random() < 0.75 else rng.choice(3)
            rows.append((f"t{i // 5}", i % 5 + 1, f"ann{a}", VERD[v]))
    return pd.DataFrame(rows, columns=["trace_id", "step", "annotator", "verdict"])


@pytest.mark.parametrize("seed", range(4))
def test_annotator_metrics_match_krippendorff_statsmodels_sklearn(seed):
    df = random_annotators(seed)
    m = annotator_agreement(df)
    wide = df.pivot_table(index="annotator", columns=["trace_id", "step"], values="verdict", aggfunc="first")
    codes = wide.apply(lambda c: c.map({v: k for k, v in enumerate(VERD)})).to_numpy(dtype=float)
    ref_alpha = krippendorff.alpha(reliability_data=codes, level_of_measurement="nominal")
    assert m["krippendorff_alpha"] == approx(ref_alpha, abs=1e-12)
    assert m["fleiss_kappa"] is None  # missing data: unequal numbers of ratings

    names = m["pairwise_kappa"]["annotators"]
    assert names == sorted(df["annotator"].unique())
    for i in range(len(names)):
        for j in range(len(names)):
            if i == j:
                continue
            both = ~np.isnan(codes[i]) & ~np.isnan(codes[j])
            assert m["pairwise_kappa"]["steps"][i][j] == both.sum()
            assert m["pairwise_kappa"]["kappa"][i][j] == approx(cohen_kappa_score(codes[i][both], codes[j][both]))


@pytest.mark.parametrize("seed", range(12))
def test_nominal_alpha_of_the_distinct_rows_is_the_packages_alpha(seed):
    """agreement.core.annotators.nominal_alpha sums each distinct count row once, times how often it occurs;
    the krippendorff package forms every item's coincidences. The same alpha, for two to seven raters per
    item, two to five values, rows repeated or not."""
    rng = np.random.default_rng(seed)
    n_values = int(rng.integers(2, 6))
    n_items = int(rng.integers(2, 400))
    raters = rng.integers(2, 8, size=n_items)
    counts = np.stack([rng.multinomial(r, rng.dirichlet(np.ones(n_values) * 0.6)) for r in raters])
    if seed % 3 == 0:  # a few distinct rows, many times each (the shape of a large study's matrix)
        counts = counts[rng.integers(0, min(5, n_items), size=5_000)]
    ours = nominal_alpha(counts)
    ref = krippendorff.alpha(value_counts=counts.astype(float), level_of_measurement="nominal")
    assert (np.isnan(ours) and not np.isfinite(ref)) or ours == approx(ref, abs=1e-12)


def test_nominal_alpha_when_every_rating_agrees_is_undefined_as_the_packages():
    counts = np.array([[2, 0, 0], [3, 0, 0], [2, 0, 0]])
    assert np.isnan(nominal_alpha(counts))
    with np.errstate(invalid="ignore", divide="ignore"):
        assert not np.isfinite(krippendorff.alpha(value_counts=counts.astype(float), level_of_measurement="nominal"))


@pytest.mark.parametrize("seed", range(3))
def test_fleiss_matches_statsmodels_when_everyone_rates_everything(seed):
    df = random_annotators(seed, equal=True)
    m = annotator_agreement(df)
    wide = df.pivot_table(index=["trace_id", "step"], columns="annotator", values="verdict", aggfunc="first")
    table, _ = aggregate_raters(wide.to_numpy())
    assert m["ratings_per_item"] == 4
    assert m["fleiss_kappa"] == approx(fleiss_kappa(table, method="fleiss"), abs=1e-12)
