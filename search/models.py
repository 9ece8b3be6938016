"""Cohorts: a named query with a frozen snapshot of the traces it matched (docs/search.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from annotation.models import StudyScopedQuerySet


class Cohort(models.Model):
    study = models.ForeignKey("annotation.Study", on_delete=models.CASCADE, related_name="cohorts")
    name = models.CharField(max_length=200)
    # The search parameters as given (q, filters), so the cohort can be re-run or shown as a link.
    query = models.JSONField(default=dict, blank=True)
    n_traces = models.PositiveIntegerField(default=0)
    note = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = StudyScopedQuerySet.as_manager()

    class Meta:
        ordering = ["study", "-created_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="cohort_unique_name_per_study")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("search-cohort", args=[self.pk])


class CohortTrace(models.Model):
    """One trace of a cohort's snapshot. Rows are written by one INSERT ... SELECT of the search's
    query, so a 50,000-trace cohort never travels through Python."""

    cohort = models.ForeignKey(Cohort, on_delete=models.CASCADE, related_name="members", db_index=False)
    trace = models.ForeignKey("annotation.Trace", on_delete=models.CASCADE, related_name="cohort_memberships")

    class Meta:
        constraints = [
            # Also the index of "the traces of cohort c" (cohort scope, compare, filter).
            models.UniqueConstraint(fields=["cohort", "trace"], name="cohorttrace_unique"),
        ]
