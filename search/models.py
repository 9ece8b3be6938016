"""Cohorts: a named query with a frozen snapshot of the traces it matched (docs/search.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from annotation.models import StudyScopedQuerySet
from runs.models import RunRecord


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


class Scanner(models.Model):
    """A question in plain language that an LLM judge configuration answers per trace (docs/search.md)."""

    study = models.ForeignKey("annotation.Study", on_delete=models.CASCADE, related_name="scanners")
    name = models.CharField(max_length=200)
    question = models.TextField()
    # The model, endpoint, concurrency, rate limit, prices and temperature are the judge configuration's.
    judge = models.ForeignKey("judges.JudgeConfig", on_delete=models.PROTECT, related_name="scanners")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = StudyScopedQuerySet.as_manager()

    class Meta:
        ordering = ["study", "name"]
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="scanner_unique_name_per_study")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("search-scanner", args=[self.pk])


class ScannerRun(RunRecord):
    """One run of a scanner over a cohort (or the whole study): the runs client of kind "scanner"."""

    scanner = models.ForeignKey(Scanner, on_delete=models.CASCADE, related_name="runs")
    cohort = models.ForeignKey(Cohort, null=True, blank=True, on_delete=models.SET_NULL, related_name="scanner_runs")
    job = models.OneToOneField("annotation.Job", on_delete=models.CASCADE, related_name="scanner_run")
    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="scanner_run")

    def counters(self) -> dict:
        return {"yes": self.results.filter(answer=True).count(), "no": self.results.filter(answer=False).count(),
                "scan_failed": self.results.filter(status=ScanResult.Status.FAILED).count()}


class ScanResult(models.Model):
    """A scanner's latest answer on one trace."""

    class Status(models.TextChoices):
        OK = "ok"
        FAILED = "failed"

    scanner = models.ForeignKey(Scanner, on_delete=models.CASCADE, related_name="results")
    trace = models.ForeignKey("annotation.Trace", on_delete=models.CASCADE, related_name="scan_results")
    scanner_run = models.ForeignKey(ScannerRun, null=True, on_delete=models.SET_NULL, related_name="results")
    status = models.CharField(max_length=10, choices=Status.choices)
    answer = models.BooleanField(null=True)  # yes / no; null when failed
    cited = models.JSONField(default=list, blank=True)  # step numbers (Step.index) that exist
    # Step numbers the model cited that the trace does not have: dropped from ``cited``, kept here.
    bad_citations = models.JSONField(default=list, blank=True)
    explanation = models.TextField(blank=True)
    reason = models.TextField(blank=True)  # why it failed
    cached = models.BooleanField(default=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            # Also the index of the "scanner X said yes" filter: WHERE scanner_id = ... AND trace_id = ...
            models.UniqueConstraint(fields=["scanner", "trace"], name="scanresult_one_per_trace"),
        ]

    @property
    def uncited(self) -> bool:
        """An answer that names no step (marked on the page; a filter value)."""
        return self.status == self.Status.OK and not self.cited


class ScanLabel(models.Model):
    """One trace of a scanner's validation sample, with its split; people's answers are ``ScanAnswer`` rows."""

    class Split(models.TextChoices):
        DEV = "dev"
        TEST = "test"

    scanner = models.ForeignKey(Scanner, on_delete=models.CASCADE, related_name="labels")
    trace = models.ForeignKey("annotation.Trace", on_delete=models.CASCADE, related_name="scan_labels")
    split = models.CharField(max_length=4, choices=Split.choices)

    class Meta:
        ordering = ["scanner", "split", "trace"]
        constraints = [models.UniqueConstraint(fields=["scanner", "trace"], name="scanlabel_one_per_trace")]


class ScanAnswer(models.Model):
    """One person's answer to a scanner's question on a sampled trace. Each person answers for themselves
    (issue 29, L1): nobody overwrites or withdraws another's answer. ``annotator`` null: the command line's
    (``scan --answer-from``), one per trace."""

    label = models.ForeignKey(ScanLabel, on_delete=models.CASCADE, related_name="answers")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                                  related_name="+")
    answer = models.BooleanField()
    answered_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["label", "annotator"], name="scananswer_one_per_person"),
            models.UniqueConstraint(fields=["label"], condition=models.Q(annotator__isnull=True),
                                    name="scananswer_one_by_the_command_line"),
        ]
