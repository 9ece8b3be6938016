"""All agreement metrics for 10k traces / 100k steps, 1,000 resamples, < 5 s."""

import time

import numpy as np
import pandas as pd

from agreement.core.metrics import agreement_metrics
from scoring.core.scores import score_traces

VERD = np.array(["valid", "invalid", "neutral"], dtype=object)


def big_study(n_traces=10_000, n_steps=100_000, seed=1):
    rng = np.random.default_rng(seed)
    n = 10 + rng.integers(-5, 6, n_traces)
    d = n_steps - int(n.sum())
    n[: abs(d)] += int(np.sign(d))
    ids = np.arange(n_traces)
    traces = pd.DataFrame(
        {
            "trace_id": ids,
            "n_steps": n,
            "l_gold": rng.integers(0, 8, n_traces),
            "answer_correct": rng.random(n_traces) < 0.6,
        }
    )
    tid = np.repeat(ids, n)
    step = np.arange(len(tid)) - np.repeat(np.cumsum(n) - n, n) + 1
    r = rng.choice(3, len(tid), p=[0.8, 0.1, 0.1])
    c = np.where(rng.random(len(tid)) < 0.8, r, rng.choice(3, len(tid)))
    ref = pd.DataFrame({"trace_id": tid, "step": step, "verdict": VERD[r]})
    cand = pd.DataFrame({"trace_id": tid, "step": step, "verdict": VERD[c], "confidence": rng.random(len(tid))})
    return traces, ref, cand


def test_all_metrics_for_10k_traces_and_100k_steps():
    traces, ref, cand = big_study()
    assert len(ref) == 100_000
    rs, cs = score_traces(traces, ref), score_traces(traces, cand)
    t0 = time.perf_counter()
    m = agreement_metrics(ref, cand, rs, cs, n_resamples=1000, seed=0)
    elapsed = time.perf_counter() - t0
    print(f"\nagreement_metrics, 10k traces / 100k steps, 1,000 resamples: {elapsed:.2f} s")
    assert m["steps_compared"] == 100_000 and m["traces_compared"] == 10_000
    assert m["pearson_ci"] is not None and m["spearman_ci"] is not None and m["ece"] is not None
