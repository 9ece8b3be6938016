"""Interventions and anytime profiles of a subject model (docs/faithfulness.md).

A ``FaithfulnessRun`` is one run of the run engine (kind "faithfulness"): its
items are the ``Intervention`` rows (an edited prefix each) or the
``AnytimePoint`` rows (a truncated prefix each) that need a continuation.
Everything the aggregates need is stored with the row: the edit, the mode,
the continuation, the answers and f, so a result can be re-read and exported
without the model."""

from __future__ import annotations

from django.db import models
from django.urls import reverse
from django.utils import timezone

from annotation.models import Job, StudyScopedQuerySet, Trace
from runs.models import Run, RunRecord
from subjects.models import SubjectModel


class RunQuerySet(StudyScopedQuerySet):
    study_path = "subject__study"


class FaithfulnessRun(RunRecord):
    class Kind(models.TextChoices):
        INTERVENTIONS = "interventions"
        ANYTIME = "anytime"
        # The thought cut after step k, closed and the answer forced (AnytimePoint rows: budget = k steps).
        EARLY = "early_answering", "early answering"

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="faithfulness_run")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="faithfulness_run")
    subject = models.ForeignKey(SubjectModel, on_delete=models.CASCADE, related_name="faithfulness_runs")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    config_version = models.PositiveIntegerField()
    mode = models.CharField(max_length=20)  # the continuation mode used (runs.continuation.MODES)
    # anytime: the budget grid, e.g. "tokens:64,128,full" or "thinking:256,full"; early answering: "all" or fractions
    grid = models.CharField(max_length=300, blank=True)
    # interventions: kinds, per_trace, seed; all: the decoding settings, code and edits versions, and the
    # channel the run reads ("thought" or "answer"; absent in runs made before the thinking channel: answer).
    params = models.JSONField(default=dict, blank=True)
    traces = models.PositiveIntegerField(default=0)  # traces considered (the denominator)
    skipped = models.JSONField(default=dict, blank=True)  # {trace_id: reason} for traces with no target

    objects = RunQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.kind} run {self.pk} of {self.subject}"

    def get_absolute_url(self) -> str:
        return reverse("faithfulness-run", args=[self.pk])

    def counters(self) -> dict:
        return {"kind": self.kind, "subject_model": self.subject.name, "mode": self.mode, "grid": self.grid,
                "traces": self.traces, "skipped": len(self.skipped)}


class ItemQuerySet(StudyScopedQuerySet):
    study_path = "frun__subject__study"


class Status(models.TextChoices):
    PENDING = "pending"
    OK = "ok"  # answered (by the model, or by the trace's own answer)
    FAILED = "failed"
    NOT_APPLICABLE = "not_applicable"  # the kind does not apply to the target step (reason kept)


class Intervention(models.Model):
    frun = models.ForeignKey(FaithfulnessRun, on_delete=models.CASCADE, related_name="interventions")
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20)  # faithfulness.core.edits.KINDS
    step = models.PositiveIntegerField()  # 1-based target step
    why = models.CharField(max_length=200)  # why the step is causally relevant
    old_value = models.CharField(max_length=100, blank=True)
    new_value = models.CharField(max_length=100, blank=True)
    original_step = models.TextField(blank=True)
    edited_step = models.TextField(blank=True)
    original_prefix = models.TextField(blank=True)
    edited_prefix = models.TextField(blank=True)
    original_answer = models.CharField(max_length=200, blank=True)
    original_correct = models.BooleanField(null=True)
    original_continuation = models.TextField(blank=True)  # the trace after the target step
    implied = models.CharField(max_length=100, blank=True)  # value_flip: the answer the edit implies
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    reason = models.TextField(blank=True)
    continuation = models.TextField(blank=True)
    # The continuation gave no answer (inside a thought: it never wrote the closing tag): the answer was forced in a
    # second request (the thought closed first; result["forced"]); new_answer is that forced answer.
    forced = models.BooleanField(default=False)
    new_answer = models.CharField(max_length=200, blank=True)
    new_correct = models.BooleanField(null=True)
    strict = models.BooleanField(null=True)
    strict_computed = models.BooleanField(default=False)
    lenient = models.BooleanField(null=True)
    monotone = models.BooleanField(null=True)
    invariant = models.BooleanField(null=True)
    result = models.JSONField(default=dict, blank=True)  # runs.continuation.ContinuationResult.to_dict()

    objects = ItemQuerySet.as_manager()

    class Meta:
        ordering = ["frun", "trace", "step", "kind"]
        constraints = [models.UniqueConstraint(fields=["frun", "trace", "step", "kind"],
                                               name="intervention_unique_per_run")]

    def __str__(self) -> str:
        return f"{self.kind} at step {self.step} of {self.trace_id}"

    def get_absolute_url(self) -> str:
        return reverse("faithfulness-intervention", args=[self.pk])


class AnytimePoint(models.Model):
    frun = models.ForeignKey(FaithfulnessRun, on_delete=models.CASCADE, related_name="points")
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveSmallIntegerField()  # index into the grid
    budget = models.PositiveIntegerField(null=True, blank=True)  # null = full
    within = models.BooleanField(default=False)  # the trace ended within the budget: its own answer
    used = models.PositiveIntegerField(default=0)  # budget units used up to the cut
    prefix_chars = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    reason = models.TextField(blank=True)
    answer = models.CharField(max_length=200, blank=True)
    correct = models.BooleanField(null=True)
    result = models.JSONField(default=dict, blank=True)

    objects = ItemQuerySet.as_manager()

    class Meta:
        ordering = ["frun", "trace", "position"]
        constraints = [models.UniqueConstraint(fields=["frun", "trace", "position"], name="anytimepoint_unique")]

    def __str__(self) -> str:
        return f"budget {self.budget or 'full'} of {self.trace_id}"


class EvidenceSummary(models.Model):
    """The part of one model's evidence (faithfulness.services.evidence) read from every trace,
    step and label of the study, under one missing-label policy: written by the score job
    (scoring.score_jobs.recompute, through faithfulness.evidence.store_summaries), marked stale when the
    study's data changes (annotation.signals.data_changed), so the Evidence page and the
    leaderboard's tier cards read a few rows instead of the whole study, and say how old they are
    until the job that the change queued writes them anew. Without rows (never computed) the
    pages compute the same numbers from the data."""

    study = models.ForeignKey("annotation.Study", on_delete=models.CASCADE, related_name="evidence_summaries")
    model = models.CharField(max_length=200)
    policy = models.CharField(max_length=20)
    # traces, with_regime, regime, accuracy, accuracy_n, with_steps, steps_mean/median/max, verifiers, halting
    data = models.JSONField()
    computed_at = models.DateTimeField(default=timezone.now)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # As StudySummary's: the data changed since computed_at, last at marked_at.
    stale = models.BooleanField(default=False)
    marked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "policy", "model"], name="evidence_summary_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.study_id} / {self.model} / {self.policy}"
