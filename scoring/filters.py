"""Trace conditions that scoring contributes to annotation's trace filters
(registered from ``ScoringConfig.ready``; annotation never imports scoring)."""

from __future__ import annotations

from django.db.models import Exists, OuterRef

from annotation.models import Study
from scoring.models import TraceScore


def lucky_guess(study: Study, prefix: str) -> Exists:
    """Lucky guesses by the "final" label source under the study's default
    profile (the scores every page shows by default)."""
    qs = TraceScore.objects.filter(trace=OuterRef(f"{prefix}pk"), lucky_guess=True, score_set__source="final")
    if study.default_profile_id:
        qs = qs.filter(score_set__profile_id=study.default_profile_id)
    return Exists(qs)
