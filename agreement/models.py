"""Calibration studies: a saved sample of traces on which judges are
measured against a reference label source (docs/agreement.md).

These models lived in ``scoring`` until agreement became an app of its own;
the migrations ``scoring.0004`` (tables renamed), ``agreement.0001`` and
``scoring.0005`` (the models' state moved) carried every row across.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone


class CalibrationStudy(models.Model):
    """A saved judge-calibration experiment: a reference label source, the
    candidates measured against it and a fixed, stratified sample of traces
    (``CalibrationTrace``). The sample never changes once drawn, so the
    numbers of a calibration study move only when its labels do."""

    class Allocation(models.TextChoices):
        EQUAL = "equal", "equal per stratum"
        PROPORTIONAL = "proportional", "proportional to stratum size"

    study = models.ForeignKey("annotation.Study", on_delete=models.CASCADE, related_name="calibrations")
    name = models.CharField(max_length=200)
    reference = models.CharField(max_length=200, default="human")  # a label source (agreement.data)
    candidates = models.JSONField(default=list)  # label sources, in display order
    # By name: the page uses (and states) the profile's current version.
    profile_name = models.CharField(max_length=100, blank=True)
    seed = models.PositiveIntegerField(default=0)
    sample_size = models.PositiveIntegerField()
    allocation = models.CharField(max_length=20, choices=Allocation.choices, default=Allocation.EQUAL)
    filters = models.JSONField(default=dict, blank=True)  # {"models": [...], "domain": "..."} the sample was drawn from
    validation_fraction = models.FloatField(default=0.5)  # the omega tuning split
    note = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["study", "-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="calibration_unique_name_per_study"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("scoring-calibration", args=[self.study_id, self.pk])


class CalibrationTrace(models.Model):
    """One trace of a calibration sample, with its stratum (model / answer
    correctness) and its place in the sample's order (strata interleaved)."""

    calibration = models.ForeignKey(CalibrationStudy, on_delete=models.CASCADE, related_name="items")
    trace = models.ForeignKey("annotation.Trace", on_delete=models.CASCADE, related_name="+")
    stratum = models.CharField(max_length=300)
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["calibration", "position"]
        constraints = [
            # Also the index of every read: WHERE calibration_id = ... (sample order).
            models.UniqueConstraint(fields=["calibration", "trace"], name="calibrationtrace_one_per_trace"),
        ]

    def __str__(self) -> str:
        return f"{self.trace_id} in calibration {self.calibration_id}"


class StoredReport(models.Model):
    """An agreement report the score job wrote (agreement.stored): the *Judge vs reference* report of the
    page's default selection, or the Annotators report, of the whole study. Read by the pages and the API
    instead of computing it on the request (seconds at 100,000 traces).

    A change of the study's data (annotation.signals.data_changed: label saves, imports, judge runs,
    adjudications, primary-judge changes) does not delete it but marks it ``stale``: the pages then show
    its figures with the time they describe and say that the score job, which the same change queued, is
    recomputing them; the job writes a fresh row."""

    class Kind(models.TextChoices):
        PAIR = "pair", "judge vs reference"
        ANNOTATORS = "annotators", "annotators"

    study = models.ForeignKey("annotation.Study", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    # What the report is of (agreement.stored.selection_key): the sources, the profile and its version, the seed.
    key = models.CharField(max_length=500)
    data = models.JSONField()
    # How many disagreements the pair report has ([trace pk, step, reference verdict, candidate verdict,
    # confidence]); they are stored apart from ``data``, in chunks (StoredDisagreementChunk): a page shows fifty
    # of them, and at 100,000 traces there are 150,000 (7 MB of JSON to parse on every request if read whole).
    n_disagreements = models.PositiveIntegerField(default=0)
    computed_at = models.DateTimeField(default=timezone.now)
    # The data changed after the report was read (or while it was being read): a recompute is queued.
    stale = models.BooleanField(default=False)
    marked_at = models.DateTimeField(null=True, blank=True)  # when a change of the data marked it stale

    class Meta:
        constraints = [
            # Also the index of every read: WHERE study_id = ... AND kind = ... AND key = ...
            models.UniqueConstraint(fields=["study", "kind", "key"], name="agreement_stored_report_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.study_id} / {self.kind} / {self.key}"


class StoredDisagreementChunk(models.Model):
    """``CHUNK_ROWS`` consecutive disagreements of a StoredReport (agreement.stored.write_chunks): a page of
    fifty reads one or two of these, where a slice of one JSON list of them all detoasts the whole list first
    (50 ms at 300,000 traces, growing with the study)."""

    CHUNK_ROWS = 500

    report = models.ForeignKey(StoredReport, on_delete=models.CASCADE, related_name="chunks")
    number = models.PositiveIntegerField()  # rows number * CHUNK_ROWS .. (number + 1) * CHUNK_ROWS - 1
    rows = models.JSONField()

    class Meta:
        constraints = [
            # Also the index of every read: WHERE report_id = ... AND number BETWEEN ...
            models.UniqueConstraint(fields=["report", "number"], name="agreement_disagreement_chunk_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.report_id} / chunk {self.number}"
