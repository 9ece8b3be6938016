"""Shared data and checks for the agreement tests (no tests of its own; named
test_agreement_* so that all agreement test files share one prefix)."""

import math

import numpy as np
import pandas as pd

V, E, N = "valid", "invalid", "neutral"  # E = error (invalid)


def labels(rows, confidence=False):
    cols = ["trace_id", "step", "verdict"] + (["confidence"] if confidence else [])
    return pd.DataFrame(rows, columns=cols)


def scores(rows):
    """rows: (trace_id, n_steps, first_error or None, process[, complete])."""
    cols = ["trace_id", "n_steps", "first_error", "process", "complete"]
    rows = [tuple(r) + (True,) * (5 - len(r)) for r in rows]
    df = pd.DataFrame(rows, columns=cols)
    df["first_error"] = pd.array(df["first_error"].tolist(), dtype="Int64")
    return df


# -- the step-level hand example --------------------------------------------
# pair k:   1  2  3  4  5    6  7  8  9  10
# trace:    t1 t1 t1 t1 t1   t2 t2 t2 t2 t2   (steps 1..5 each)
# ref:      V  V  V  V  V    E  E  E  N  N
# cand:     V  V  V  V  E    E  E  V  N  V
STEP_REF = [("t1", i, V) for i in range(1, 6)] + [
    ("t2", 1, E),
    ("t2", 2, E),
    ("t2", 3, E),
    ("t2", 4, N),
    ("t2", 5, N),
    ("t3", 1, V),  # only the reference labelled t3: not compared
]
STEP_CAND = [("t1", i, V) for i in range(1, 5)] + [
    ("t1", 5, E),
    ("t2", 1, E),
    ("t2", 2, E),
    ("t2", 3, V),
    ("t2", 4, N),
    ("t2", 5, V),
    ("t3", 1, None),  # null verdict = not labelled
]


def find_nan(obj, path="$"):
    """Path of the first float NaN/inf anywhere in a nested structure, else None."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else path
    if isinstance(obj, (np.floating,)):
        return path + " (numpy float)"
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = find_nan(v, f"{path}.{k}")
            if p:
                return p
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            p = find_nan(v, f"{path}[{i}]")
            if p:
                return p
    return None


SCALAR_METRICS = [
    "percent_agreement",
    "kappa",
    "kappa_binary",
    "first_error_exact",
    "first_error_within_1",
    "pb_error_acc",
    "pb_correct_acc",
    "pb_f1",
    "pearson_r",
    "pearson_ci",
    "spearman_rho",
    "spearman_ci",
    "ece",
    "brier",
]


def assert_reasons_consistent(m):
    """Every None metric has a reason, and no defined metric has one."""
    und = m["undefined"]
    assert all(isinstance(v, str) and v for v in und.values())
    for k in SCALAR_METRICS:
        assert (m[k] is None) == (k in und), (k, m[k], und.get(k))
    for src in ("reference", "candidate"):
        if "ratings" in m:
            for k in ("pearson_r", "pearson_ci", "spearman_rho", "spearman_ci"):
                assert (m["ratings"][src][k] is None) == (f"ratings.{src}.{k}" in und)
    if "annotators" in m:
        for k in ("krippendorff_alpha", "fleiss_kappa"):
            assert (m["annotators"][k] is None) == (f"annotators.{k}" in und)
