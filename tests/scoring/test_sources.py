"""Which labels each source uses, and stored scores equal to scoring.core's
on the same inputs."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from annotation.models import Trace
from scoring import score_jobs, storage
from scoring.core.labels import human_consensus
from scoring.core.profile import Profile
from scoring.core.scores import score_traces
from scoring.models import ScoreSet
from tests.scoring.conftest import add_judge_labels, adjudicate

pytestmark = pytest.mark.django_db


def stored(study, source: str, profile: str = "default") -> pd.DataFrame:
    score_set = ScoreSet.objects.get(study=study, source=source, profile__name=profile, profile__is_current=True)
    return storage.read_scores(score_set, columns=storage.VALUE_COLUMNS).set_index("trace_id")


def pks(study) -> dict[str, int]:
    return dict(Trace.objects.filter(study=study).values_list("trace_id", "pk"))


def test_it_scores_human_labels_only_from_complete_reviews(seeded):
    score_jobs.recompute(seeded, warm=False)
    human = stored(seeded, "human")
    # t1 (two complete reviews), t3 (one), t5 (empty); not t2 (a partial review) nor t4 (no labels)
    assert sorted(human.index) == ["t1", "t3", "t5"]
    # t1: the annotators tie on step 2 (valid vs invalid) -> invalid wins
    assert human.loc["t1", "first_error"] == 2
    assert human.loc["t3", "first_error"] == 1
    assert bool(human.loc["t5", "empty"])


def test_it_scores_a_judge_source_per_judge_with_labels(seeded):
    add_judge_labels(seeded, "strict", {"t2": ["invalid", "valid"], "t4": ["valid", "valid"]})
    add_judge_labels(seeded, "partial", {"t4": ["valid"]})  # t4 has 2 steps: incomplete
    from judges.models import JudgeConfig

    JudgeConfig.objects.create(study=seeded, name="idle", provider="fake")  # no labels: no source
    result = score_jobs.recompute(seeded, warm=False)
    assert result["sources"] == ["final", "human", "judge:partial", "judge:strict"]
    assert sorted(stored(seeded, "judge:strict").index) == ["t2", "t4", "t5"]
    assert sorted(stored(seeded, "judge:partial").index) == ["t5"]
    assert not ScoreSet.objects.filter(source="judge:idle").exists()


def test_final_prefers_adjudication_then_human_consensus_then_the_primary_judge(seeded, owner):
    judge = add_judge_labels(seeded, "j", {"t1": ["invalid", "valid", "valid"], "t2": ["valid", "invalid"],
                                           "t4": ["valid", "neutral"]})
    seeded.primary_judge = judge
    seeded.save()
    adjudicate(seeded, owner, "t3", 1, "valid")  # overrides the human "invalid"
    score_jobs.recompute(seeded, warm=False)
    final = stored(seeded, "final")
    assert sorted(final.index) == ["t1", "t2", "t3", "t4", "t5"]
    assert final.loc["t1", "first_error"] == 2  # human consensus (ties -> invalid) beats the judge's step 1
    assert final.loc["t2", "first_error"] == 2  # no complete human review: the judge
    assert pd.isna(final.loc["t3", "first_error"])  # the adjudication
    assert pd.isna(final.loc["t4", "first_error"])


def test_without_a_primary_judge_final_uses_no_judge(seeded):
    add_judge_labels(seeded, "j", {"t4": ["valid", "valid"]})
    score_jobs.recompute(seeded, warm=False)
    assert "t4" not in stored(seeded, "final").index
    assert "t4" in stored(seeded, "judge:j").index


def test_stored_scores_equal_scoring_core_on_the_same_inputs(seeded):
    score_jobs.recompute(seeded, warm=False)
    ids = pks(seeded)
    # The inputs written out by hand from tests/scoring/conftest.py.
    traces = pd.DataFrame({
        "trace_id": [ids[t] for t in ("t1", "t2", "t3", "t4", "t5")],
        "n_steps": [3, 2, 2, 2, 0], "l_gold": [2, 0, 2, 0, 0],
        "answer_correct": [True, False, True, True, True],
    })
    raw = pd.DataFrame([
        (ids["t1"], 1, "ann1", "valid", [1]), (ids["t1"], 2, "ann1", "valid", [2]), (ids["t1"], 3, "ann1", "valid", []),
        (ids["t1"], 1, "ann2", "valid", [1]), (ids["t1"], 2, "ann2", "invalid", []), (ids["t1"], 3, "ann2", "valid", []),
        (ids["t3"], 1, "ann1", "invalid", []), (ids["t3"], 2, "ann1", "valid", []),
    ], columns=["trace_id", "step", "annotator", "verdict", "skeleton_refs"])
    steps = human_consensus(raw)
    for name in ("default", "no-format", "no-hazard", "no-penalties"):
        profile = Profile.from_dict(seeded.profiles.get(name=name, is_current=True).params)
        expected = score_traces(traces, steps, profile).set_index("trace_id")
        expected = expected.loc[expected["complete"]]
        got = stored(seeded, "human", name).set_index("trace")
        assert sorted(got.index) == sorted(expected.index)
        for col in [c for c in storage.VALUE_COLUMNS if c not in storage.RECOVERY_VALUE_COLUMNS]:
            for tid in expected.index:
                e, g = expected.loc[tid, col], got.loc[tid, col]
                if pd.isna(e):
                    assert pd.isna(g), (name, col, tid)
                elif isinstance(e, float):
                    assert math.isclose(e, g, rel_tol=1e-12, abs_tol=1e-12), (name, col, tid, e, g)
                else:
                    assert e == g, (name, col, tid, e, g)
    # The ablations really differ where they should.
    assert stored(seeded, "human", "no-hazard")["p_haz"].eq(0).all()
    assert stored(seeded, "human", "default")["p_haz"].gt(0).any()
