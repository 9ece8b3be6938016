"""The agreement core's intervals resample like scipy.stats.bootstrap
(percentile method, paired), through scoring.core.bootstrap."""

import numpy as np
import pytest
from scipy import stats

from agreement.core.correlation import correlation


@pytest.mark.parametrize("seed", [0, 3, 8])
def test_pearson_interval_equals_scipy_paired_percentile(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, 60)
    y = x + rng.normal(0, 1.5, 60)

    def pearson(a, b, axis=-1):
        a = a - a.mean(axis=axis, keepdims=True)
        b = b - b.mean(axis=axis, keepdims=True)
        return (a * b).sum(axis=axis) / np.sqrt((a * a).sum(axis=axis) * (b * b).sum(axis=axis))

    res = stats.bootstrap((x, y), pearson, n_resamples=500, method="percentile", paired=True, vectorized=True,
                          confidence_level=0.9, rng=np.random.default_rng(seed))
    ours = correlation(x, y, n_resamples=500, seed=seed, level=0.9)["pearson_ci"]
    assert ours == pytest.approx([res.confidence_interval.low, res.confidence_interval.high], rel=1e-9)
