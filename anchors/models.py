"""Step importance (docs/step-importance.md): runs that resample a thought from its prefixes, the rollouts
they sampled (kept so every number can be recomputed and audited), and the measured values per thought step
and source (a run, or a published analysis brought in by an import)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from annotation.models import Step, StudyScopedQuerySet, Trace
from runs.models import Run, RunRecord
from subjects.models import SubjectModel


class RunQuerySet(StudyScopedQuerySet):
    study_path = "subject__study"


class ImportanceRun(RunRecord):
    """One run of kind ``step_importance``: its items are the Rollout rows it planned."""

    job = models.OneToOneField("annotation.Job", on_delete=models.CASCADE, related_name="importance_run")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="importance_run")
    subject = models.ForeignKey(SubjectModel, on_delete=models.CASCADE, related_name="importance_runs")
    config_version = models.PositiveIntegerField()
    mode = models.CharField(max_length=20)  # the continuation mode used (runs.continuation.MODES)
    # samples, temperature, seed, stride, steps, trace_ids, cohort, limit, forced, decoding, threshold,
    # similarity method, bootstrap resamples, code_version
    params = models.JSONField(default=dict, blank=True)
    traces = models.PositiveIntegerField(default=0)
    skipped = models.JSONField(default=dict, blank=True)  # {trace_id: reason}

    objects = RunQuerySet.as_manager()

    def __str__(self) -> str:
        return f"step importance run {self.pk} of {self.subject}"

    def get_absolute_url(self) -> str:
        return reverse("anchors-run", args=[self.pk])

    def counters(self) -> dict:
        return {"kind": "step_importance", "subject_model": self.subject.name, "mode": self.mode,
                "samples": self.params.get("samples"), "traces": self.traces, "skipped": len(self.skipped)}


class ItemQuerySet(StudyScopedQuerySet):
    study_path = "irun__subject__study"


class Status(models.TextChoices):
    PENDING = "pending"
    OK = "ok"
    FAILED = "failed"


class Rollout(models.Model):
    """One continuation of a thought cut after ``position`` steps. ``kind`` resample: the model goes on
    thinking (sample ``sample`` of N, its own seed) and its answer is read after the thought, or forced
    when it gave none (``answer_forced``); ``kind`` forced: the thought is closed at once and the answer
    forced (early answering's rule)."""

    class Kind(models.TextChoices):
        RESAMPLE = "resample"
        FORCED = "forced"

    irun = models.ForeignKey(ImportanceRun, on_delete=models.CASCADE, related_name="rollouts")
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()  # thought steps kept before the continuation (0..n)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.RESAMPLE)
    sample = models.PositiveSmallIntegerField(default=0)
    seed = models.BigIntegerField(null=True, blank=True)
    prefix_chars = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    reason = models.TextField(blank=True)
    continuation = models.TextField(blank=True)
    first_sentence = models.TextField(blank=True)  # the first new sentence (what the counterfactual test compares)
    answer = models.CharField(max_length=200, blank=True)  # as read ("" none)
    correct = models.BooleanField(null=True)
    answer_forced = models.BooleanField(default=False)  # the continuation gave no answer: it was forced
    result = models.JSONField(default=dict, blank=True)  # runs.continuation.ContinuationResult.to_dict()

    objects = ItemQuerySet.as_manager()

    class Meta:
        ordering = ["irun", "trace", "position", "kind", "sample"]
        constraints = [models.UniqueConstraint(fields=["irun", "trace", "position", "kind", "sample"],
                                               name="rollout_unique_per_run")]

    def __str__(self) -> str:
        return f"{self.kind} {self.sample} after {self.position} steps of {self.trace_id}"


class ImportanceQuerySet(StudyScopedQuerySet):
    study_path = "trace__study"


class StepImportance(models.Model):
    """The measured values of one thought step from one source: a step-importance run (``irun``) or an
    imported published analysis (``origin``, e.g. "thought-anchors"). None: not measurable from that source."""

    class Source(models.TextChoices):
        RUN = "run"
        IMPORTED = "imported"

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="importance")
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="step_importance")
    source = models.CharField(max_length=10, choices=Source.choices)
    irun = models.ForeignKey(ImportanceRun, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="importance")
    origin = models.CharField(max_length=100, blank=True)
    accuracy = models.FloatField(null=True, blank=True)
    resampling_importance_accuracy = models.FloatField(null=True, blank=True)
    resampling_importance_kl = models.FloatField(null=True, blank=True)
    counterfactual_importance_accuracy = models.FloatField(null=True, blank=True)
    counterfactual_importance_kl = models.FloatField(null=True, blank=True)
    forced_importance_accuracy = models.FloatField(null=True, blank=True)
    forced_importance_kl = models.FloatField(null=True, blank=True)
    different_trajectories_fraction = models.FloatField(null=True, blank=True)
    overdeterminedness = models.FloatField(null=True, blank=True)
    n = models.PositiveIntegerField(default=0)  # resampled rollouts behind the values (before + after the step)
    intervals = models.JSONField(default=dict, blank=True)  # {measure: [low, high]}, bootstrap over rollouts
    depends_on = models.JSONField(default=list, blank=True)  # thought step indexes this step depends on
    computed_at = models.DateTimeField(default=timezone.now)

    objects = ImportanceQuerySet.as_manager()

    class Meta:
        ordering = ["trace", "step__index"]
        constraints = [
            models.CheckConstraint(condition=Q(source="run", irun__isnull=False, origin="")
                                   | Q(source="imported", irun__isnull=True) & ~Q(origin=""),
                                   name="stepimportance_source_matches"),
            models.UniqueConstraint(fields=["step", "irun"], condition=Q(source="run"),
                                    name="stepimportance_one_per_run"),
            models.UniqueConstraint(fields=["step", "origin"], condition=Q(source="imported"),
                                    name="stepimportance_one_per_origin"),
        ]

    def __str__(self) -> str:
        return f"importance of {self.step} ({self.source_name})"

    @property
    def source_name(self) -> str:
        """The source as exports and pages name it: "run:<id>" or "imported:<origin>"."""
        return f"run:{self.irun_id}" if self.source == self.Source.RUN else f"imported:{self.origin}"
