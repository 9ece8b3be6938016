"""Hypothesis properties of the scores."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.core.hazard import hazard_lookup
from scoring.core.profile import Profile
from scoring.core.scores import hazard_penalty, score_traces

SCORE_0_10 = ["s_base", "p_fmt", "p_haz", "s_hcrs", "s_prm", "s_prm_haz", "process", "holistic"]

verdict = st.sampled_from(["valid", "invalid", "neutral", None])


@st.composite
def study(draw):
    n_traces = draw(st.integers(1, 12))
    trace_rows, step_rows = [], []
    for t in range(n_traces):
        n = draw(st.integers(0, 9))
        L = draw(st.integers(0, 6))
        trace_rows.append((t, n, L, draw(st.booleans())))
        for i in range(1, n + 1):
            v = draw(verdict)
            refs = draw(st.lists(st.integers(-1, 8), max_size=3))
            step_rows.append((t, i, v, refs))
    traces = pd.DataFrame(trace_rows, columns=["trace_id", "n_steps", "l_gold", "answer_correct"])
    steps = pd.DataFrame(step_rows, columns=["trace_id", "step", "verdict", "skeleton_refs"])
    return traces, steps


profiles = st.builds(
    Profile,
    alpha=st.floats(0, 10),
    beta=st.floats(0, 5),
    eta=st.floats(0, 5),
    omega=st.floats(0, 20),
    c_haz=st.floats(0, 10),
    neutral_as=st.sampled_from([0, 1]),
    prm_hazard=st.booleans(),
    w=st.floats(0, 1),
    tau=st.floats(0, 10),
)


@settings(max_examples=80, deadline=None)
@given(study(), profiles)
def test_all_scores_within_0_10(data, profile):
    traces, steps = data
    s = score_traces(traces, steps, profile)
    for col in SCORE_0_10:
        v = s[col].to_numpy(dtype=float)
        v = v[~np.isnan(v)]
        assert ((v >= 0) & (v <= 10 + 1e-9)).all(), col
    has_skel = s.l_gold > 0
    assert s.s_base.isna().eq(~has_skel).all() and s.s_hcrs.isna().eq(~has_skel).all()
    assert s.process.notna().all() and s.holistic.notna().all()
    assert (s.coverage <= s.l_gold).all()
    assert (~s.lucky_guess | s.answer_correct).all()
    fe = s.first_error.to_numpy(dtype=float, na_value=np.nan)
    assert (np.isnan(fe) | ((fe >= 1) & (fe <= s.n_steps))).all()
    assert (s.p_haz[np.isnan(fe)] == 0).all()
    assert (s.p_haz <= profile.c_haz + 1e-12).all() and (s.p_fmt <= profile.alpha + 1e-12).all()


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=15),
    profiles,
    st.integers(1, 20),
    st.integers(1, 20),
)
def test_earlier_first_error_never_lowers_p_haz(h, profile, t1, t2):
    lk = hazard_lookup(h)
    early, late = min(t1, t2), max(t1, t2)
    p_early, p_late, p_none = hazard_penalty([early, late, 0], lk, profile)
    assert p_early >= p_late >= p_none == 0


@settings(max_examples=40, deadline=None)
@given(study(), st.data())
def test_moving_the_first_error_earlier_never_lowers_p_haz_in_score_traces(data, draw):
    traces, steps = data
    base = score_traces(traces, steps)
    # rescore with the same hazard after making one step invalid
    from scoring.core.scores import estimate_hazard

    hz = estimate_hazard(traces, steps)
    if steps.empty:
        return
    row = draw.draw(st.integers(0, len(steps) - 1))
    moved = steps.copy()
    moved.loc[row, "verdict"] = "invalid"
    after = score_traces(traces, moved, hazard=hz)
    before = score_traces(traces, steps, hazard=hz)
    assert (after.p_haz.to_numpy() >= before.p_haz.to_numpy() - 1e-12).all()
    assert len(base) == len(after)
