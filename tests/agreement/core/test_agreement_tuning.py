"""tune_omega: choosing omega (and w) on a validation split."""

import json

import numpy as np
import pandas as pd
import pytest

from agreement.core.correlation import mean_ratings
from agreement.core.tuning import DEFAULT_OMEGA_GRID, tune_omega
from scoring.core.profile import DEFAULT
from scoring.core.scores import estimate_hazard, score_traces

approx = pytest.approx
VERD = np.array(["valid", "invalid", "neutral"], dtype=object)


def study(seed=0, n_traces=120):
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 9, n_traces)
    n[:3] = 0  # empty traces never take part
    traces = pd.DataFrame(
        {
            "trace_id": [f"tr{i:03d}" for i in range(n_traces)],
            "n_steps": n,
            "l_gold": rng.integers(0, 6, n_traces),
            "answer_correct": rng.random(n_traces) < 0.5,
        }
    )
    rows = [
        (tid, s, VERD[rng.choice(3, p=[0.75, 0.15, 0.1])], [int(rng.integers(1, 6))])
        for tid, k in zip(traces["trace_id"], n, strict=True)
        for s in range(1, k + 1)
    ]
    steps = pd.DataFrame(rows, columns=["trace_id", "step", "verdict", "skeleton_refs"])
    steps = steps.drop(index=steps.index[5])  # one incomplete trace
    return traces, steps


def test_recovers_the_omega_that_generated_the_reference():
    traces, steps = study()
    hz = estimate_hazard(traces, steps)
    # The "human" reference is the judge's own process score at omega = 3:
    # only omega = 3 reproduces it exactly (the clipping makes the others differ).
    ref = score_traces(traces, steps, DEFAULT.replace(omega=3.0), hazard=hz)
    out = tune_omega(traces, steps, ref, n_resamples=100)
    assert out["score"] == "process"
    assert out["best"] == {"omega": 3.0, "w": DEFAULT.w}
    assert out["validation_r"] == approx(1.0)
    assert out["test"]["pearson_r"] == approx(1.0) and out["test"]["spearman_rho"] == approx(1.0)
    assert [g["omega"] for g in out["grid"]] == list(DEFAULT_OMEGA_GRID)
    others = [g["validation_r"] for g in out["grid"] if g["omega"] != 3.0]
    assert max(others) < out["validation_r"]
    # the baseline is the default profile (omega = 5) on the held-out split
    assert out["baseline"]["omega"] == 5.0 and out["baseline"]["pearson_r"] < 1.0
    json.dumps(out, allow_nan=False)


def test_split_is_deterministic_complete_and_disjoint():
    traces, steps = study(1)
    ref = score_traces(traces, steps)
    a = tune_omega(traces, steps, ref, omegas=[0, 5], seed=7, n_resamples=10)
    b = tune_omega(traces.iloc[::-1], steps.sample(frac=1, random_state=2), ref, omegas=[0, 5], seed=7, n_resamples=10)
    assert a["validation_ids"] == b["validation_ids"] and a["test_ids"] == b["test_ids"]
    c = tune_omega(traces, steps, ref, omegas=[0, 5], seed=8, n_resamples=10)
    assert c["validation_ids"] != a["validation_ids"]
    val, test = set(a["validation_ids"]), set(a["test_ids"])
    assert not val & test
    sc = score_traces(traces, steps)
    eligible = set(sc.loc[sc["complete"] & (sc["n_steps"] >= 1), "trace_id"])
    assert val | test == eligible and a["traces"] == len(eligible)
    assert a["n_validation"] == round(0.5 * len(eligible))
    d = tune_omega(traces, steps, ref, omegas=[0, 5], validation_fraction=0.25, n_resamples=10)
    assert d["n_validation"] == round(0.25 * len(eligible))


def test_grid_over_omega_and_w_uses_the_holistic_score():
    traces, steps = study(2)
    hz = estimate_hazard(traces, steps)
    target = score_traces(traces, steps, DEFAULT.replace(omega=2.0, w=0.4), hazard=hz)
    reference = target.set_index("trace_id")["holistic"]  # a Series indexed by trace_id
    out = tune_omega(traces, steps, reference, omegas=[1, 2, 4], ws=[0.2, 0.4, 0.9], n_resamples=50)
    assert out["score"] == "holistic"
    assert len(out["grid"]) == 9
    assert out["best"] == {"omega": 2.0, "w": 0.4}
    # the holistic score of the grid equals score_traces' own
    assert out["validation_r"] == approx(1.0, abs=1e-12) and out["test"]["pearson_r"] == approx(1.0, abs=1e-12)


def test_reference_from_human_ratings():
    traces, steps = study(3)
    sc = score_traces(traces, steps, DEFAULT.replace(omega=1.0))
    ratings = pd.DataFrame(
        {"trace_id": sc["trace_id"], "annotator": "h1", "rating": np.clip(np.round(sc["process"]), 0, 10)}
    )
    out = tune_omega(traces, steps, mean_ratings(ratings), omegas=[0, 1, 5, 10], n_resamples=50)
    assert out["best"]["omega"] in (0.0, 1.0, 5.0, 10.0)
    assert out["validation_r"] == max(g["validation_r"] for g in out["grid"])


def test_ties_go_to_the_first_grid_point_and_degenerate_cases():
    traces, steps = study(4)
    # no error anywhere: omega changes nothing, every grid point ties
    clean = steps.assign(verdict="valid")
    ref = score_traces(traces, clean)
    out = tune_omega(traces, clean, ref, omegas=[7, 2, 3], n_resamples=10)
    assert out["best"]["omega"] == 7.0

    few = tune_omega(traces.iloc[:5], steps, ref, omegas=[1, 2], n_resamples=10)
    assert few["best"] is None and few["test"] is None
    assert "undefined at every grid point" in few["undefined"]["best"]
    assert few["baseline"]["pearson_r"] is None and "baseline.pearson_r" in few["undefined"]

    with pytest.raises(ValueError, match="omega"):
        tune_omega(traces, steps, ref, omegas=[-1])
    with pytest.raises(ValueError, match="w: must be within"):
        tune_omega(traces, steps, ref, omegas=[1], ws=[2])
    with pytest.raises(ValueError, match="validation_fraction"):
        tune_omega(traces, steps, ref, validation_fraction=1.5)
    with pytest.raises(ValueError, match="empty"):
        tune_omega(traces, steps, ref, omegas=[])
