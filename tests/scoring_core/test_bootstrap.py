"""The one bootstrap (scoring.core.bootstrap): seeded, chunk-independent, and
the same interval as scipy.stats.bootstrap's percentile method given the
same generator."""

import numpy as np
import pytest
from scipy import stats

from scoring.core import bootstrap
from scoring.core.bootstrap import bootstrap_ci, index_chunks, percentile_interval, resample_counts

approx = pytest.approx


def reference_bootstrap(values, n_resamples, seed, level=0.95, stat=np.mean):
    """Straightforward textbook implementation to compare against."""
    v = np.asarray([x for x in values if x is not None and not np.isnan(x)], dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(v), size=(n_resamples, len(v)))
    stats = np.array([stat(v[row]) for row in idx])
    tail = (1 - level) / 2 * 100
    return tuple(np.percentile(stats, [tail, 100 - tail]))


def test_bootstrap_is_seeded_and_matches_the_textbook_method(monkeypatch):
    values = np.random.default_rng(1).normal(5, 2, 300)
    ci = bootstrap_ci(values, seed=42)
    assert ci == bootstrap_ci(values, seed=42)  # deterministic
    assert ci != bootstrap_ci(values, seed=43)
    assert ci == approx(reference_bootstrap(values, 1000, 42), rel=1e-12)
    low, high = ci
    assert low < values.mean() < high
    # chunking does not change the random stream
    monkeypatch.setattr(bootstrap, "CHUNK_ELEMS", 1000)
    assert bootstrap_ci(values, seed=42) == approx(ci, rel=1e-12)


def test_bootstrap_options_and_edge_cases():
    v = [1.0, 2.0, np.nan, 4.0, None, 8.0]
    assert bootstrap_ci(v, seed=0) == approx(reference_bootstrap(v, 1000, 0))
    assert bootstrap_ci([1.0, 2.0, 4.0, 8.0], seed=0) == bootstrap_ci(v, seed=0)  # NaN-safe
    assert bootstrap_ci([3.0], seed=0) is None
    assert bootstrap_ci([np.nan, 1.0], seed=0) is None
    assert bootstrap_ci([], seed=0) is None
    # constant data: degenerate interval
    assert bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)
    # other statistics, with and without an axis keyword; level
    med = bootstrap_ci(v, stat=np.median, n_resamples=200, seed=3)
    assert med == approx(reference_bootstrap(v, 200, 3, stat=np.median))
    mx = bootstrap_ci(v, stat=lambda x: float(max(x)), n_resamples=200, seed=3)
    assert mx == approx(reference_bootstrap(v, 200, 3, stat=np.max))
    wide, narrow = bootstrap_ci(v, level=0.99), bootstrap_ci(v, level=0.5)
    assert wide[0] <= narrow[0] <= narrow[1] <= wide[1]
    with pytest.raises(ValueError, match="^level"):
        bootstrap_ci(v, level=1.5)



def scipy_percentile(data, statistic, n_resamples, seed, level, **kw):
    res = stats.bootstrap(data, statistic, n_resamples=n_resamples, method="percentile", confidence_level=level,
                          rng=np.random.default_rng(seed), **kw)
    return res.confidence_interval.low, res.confidence_interval.high


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_bootstrap_ci_equals_scipy_percentile_on_random_data(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 200))
    values = rng.gamma(2.0, 3.0, n) if seed % 2 else rng.integers(0, 11, n).astype(float)
    level = float(rng.choice([0.5, 0.9, 0.95, 0.99]))
    n_resamples = int(rng.integers(50, 1500))
    for stat in (np.mean, np.median, np.std):
        ours = bootstrap_ci(values, stat=stat, n_resamples=n_resamples, seed=seed, level=level)
        theirs = scipy_percentile((values,), stat, n_resamples, seed, level, vectorized=True)
        assert ours == approx(theirs, rel=1e-12, abs=1e-12), stat.__name__


def test_weighted_sums_from_resample_counts_equal_scipy():
    # The agreement intervals compute each resample from per-item sums
    # weighted by resample_counts; a ratio of sums must match scipy on the
    # same draws (paired resampling of numerator and denominator).
    rng = np.random.default_rng(5)
    num, den = rng.integers(0, 6, 80).astype(float), rng.integers(1, 8, 80).astype(float)
    n_resamples, seed = 700, 9
    dist = np.empty(n_resamples)
    for start, stop, idx in index_chunks(len(num), n_resamples, seed, chunk_elems=900):
        w = resample_counts(idx, len(num))
        dist[start:stop] = (w @ num) / (w @ den)
    ours = percentile_interval(dist, 0.9)

    def ratio(a, b, axis=-1):
        return a.sum(axis=axis) / b.sum(axis=axis)

    theirs = scipy_percentile((num, den), ratio, n_resamples, seed, 0.9, paired=True, vectorized=True)
    assert ours == approx(list(theirs), rel=1e-12)


def test_index_chunks_draw_the_same_stream_whatever_the_block_size():
    whole = np.vstack([idx for _, _, idx in index_chunks(13, 101, 4, chunk_elems=10**9)])
    small = np.vstack([idx for _, _, idx in index_chunks(13, 101, 4, chunk_elems=13 * 3)])
    assert whole.shape == (101, 13)
    assert (whole == small).all()
    assert (whole == np.random.default_rng(4).integers(0, 13, size=(101, 13))).all()


def test_percentile_interval_leaves_out_undefined_resamples():
    assert percentile_interval(np.array([np.nan, np.nan]), 0.95) is None
    assert percentile_interval(np.array([1.0, np.nan, 3.0]), 0.5) == approx([1.5, 2.5])
