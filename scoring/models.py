"""Stored scoring profiles and per-(trace, source, profile) scores.

The arithmetic lives in ``scoring.core`` (pure); these models only persist
its inputs (profiles) and outputs (scores) so pages read, never recompute.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ScoringProfile(models.Model):
    """A named, versioned parameter set. Editing creates a new version row."""

    study = models.ForeignKey("annotation.Study", on_delete=models.CASCADE, related_name="profiles")
    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField(default=1)
    params = models.JSONField(default=dict)
    is_current = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["study", "name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name", "version"], name="profile_unique_version"),
            models.UniqueConstraint(
                fields=["study", "name"], condition=models.Q(is_current=True), name="profile_one_current_version"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"
