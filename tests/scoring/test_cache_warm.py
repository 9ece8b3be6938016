"""The score job's last step (scoring.analytics.warm) fills what the leaderboard, the hazard page and the
Ablations page read on their first visit, and what it stores equals a fresh computation."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from scoring import analytics, score_jobs, services, sources
from scoring.models import ScoreSet

pytestmark = pytest.mark.django_db


def test_the_score_job_warms_the_leaderboard_of_every_ablation_profile(seeded):
    cache.clear()
    score_jobs.recompute(seeded)
    sets = list(ScoreSet.objects.filter(study=seeded, source=sources.FINAL, profile__is_current=True)
                .select_related("profile"))
    names = {s.profile.name for s in sets}
    assert set(services.ABLATION_NAMES) <= names
    for score_set in sets:
        key = analytics._key("leaderboard-v2", score_set, "model", "", "")
        warmed = cache.get(key)
        assert warmed, score_set.profile.name
        cache.delete(key)
        assert analytics.scored_leaderboard(score_set, "model") == warmed


def test_without_the_warm_step_nothing_is_cached(seeded):
    cache.clear()
    score_jobs.recompute(seeded, warm=False)
    for score_set in ScoreSet.objects.filter(study=seeded, source=sources.FINAL):
        assert cache.get(analytics._key("leaderboard-v2", score_set, "model", "", "")) is None
