"""Fidelity suites (seeded variants of a study's problems), runs of a subject model over a
suite, and their outputs (docs/fidelity.md).

A variant is a Problem of its own (so a trace on it is an ordinary trace, reviewable on the
review page); ``Variant`` links it to its original with the strategy, magnitude, the exact
edits and the counterfactual gold's status. Problem has no field for that link, and
annotation must not know this app, so the link lives here.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from annotation.models import Job, Problem, StudyScopedQuerySet, Trace
from runs.models import Run, RunRecord
from subjects.models import SubjectModel


class Suite(models.Model):
    """A named, seeded set of variants of a study's problems."""

    study = models.ForeignKey("annotation.Study", on_delete=models.CASCADE, related_name="fidelity_suites")
    name = models.CharField(max_length=100)
    seed = models.IntegerField(default=0)
    strategies = models.JSONField(default=list)
    per_problem = models.PositiveSmallIntegerField(default=1)
    problems_filter = models.CharField(max_length=200, default="all")
    generator_version = models.CharField(max_length=50)
    originals = models.PositiveIntegerField(default=0)
    skipped = models.JSONField(default=dict, blank=True)  # {"strategy: reason": count}
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = StudyScopedQuerySet.as_manager()

    class Meta:
        ordering = ["study", "name"]
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="fidelity_suite_unique_name")]

    def __str__(self) -> str:
        return self.name


class VariantQuerySet(StudyScopedQuerySet):
    study_path = "suite__study"


class Variant(models.Model):
    class Axis(models.TextChoices):
        PERTURBATION = "perturbation"
        COUNTERFACTUAL = "counterfactual"
        IMPORTED = "imported"  # a published perturbation set (GSM-Plus)

    class Gold(models.TextChoices):
        SAME = "same", "unchanged (a perturbation keeps the answer)"
        DERIVED = "derived", "derived through the calculator chain"
        UNKNOWN = "unknown", "gold unknown (lenient AA only)"
        GIVEN = "given", "given by the dataset"

    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="variants")
    original = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="fidelity_variants")
    problem = models.OneToOneField(Problem, on_delete=models.CASCADE, related_name="fidelity_variant")
    axis = models.CharField(max_length=20, choices=Axis.choices)
    strategy = models.CharField(max_length=50)
    magnitude = models.CharField(max_length=100, blank=True)
    index = models.PositiveSmallIntegerField(default=0)
    changes = models.JSONField(default=list, blank=True)  # [{start, end, old, new}] in the original's text
    gold = models.CharField(max_length=20, choices=Gold.choices)
    gold_reason = models.CharField(max_length=300, blank=True)

    objects = VariantQuerySet.as_manager()

    class Meta:
        ordering = ["suite", "original", "strategy", "index"]
        constraints = [models.UniqueConstraint(fields=["suite", "original", "strategy", "index"],
                                               name="fidelity_variant_unique")]

    def __str__(self) -> str:
        return f"{self.strategy} {self.magnitude} of {self.original_id}"


class FidelityRunQuerySet(StudyScopedQuerySet):
    study_path = "suite__study"


class FidelityRun(RunRecord):
    """A subject model over a suite: forward traces of the originals and variants, and backward
    reconstructions of the originals. The engine's side is ``run`` (runs.Run of kind "fidelity")."""

    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="runs")
    subject = models.ForeignKey(SubjectModel, on_delete=models.CASCADE, related_name="fidelity_runs")
    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="fidelity_run")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="fidelity_run")
    axes = models.JSONField(default=list)
    config_version = models.PositiveIntegerField()

    objects = FidelityRunQuerySet.as_manager()

    def __str__(self) -> str:
        return f"fidelity run {self.pk} of {self.subject} on {self.suite}"

    def get_absolute_url(self) -> str:
        return reverse("fidelity-report", args=[self.pk])


class Output(models.Model):
    """One answer of a run: the forward trace of a problem (original or variant) or the backward
    reconstruction of an original."""

    class Role(models.TextChoices):
        FORWARD = "forward"
        BACKWARD = "backward"

    fid_run = models.ForeignKey(FidelityRun, on_delete=models.CASCADE, related_name="outputs")
    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="+")
    role = models.CharField(max_length=10, choices=Role.choices)
    trace = models.ForeignKey(Trace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    text = models.TextField(blank=True)
    finish_reason = models.CharField(max_length=30, blank=True)
    cached = models.BooleanField(default=False)
    # Logical forms of the steps by the optional LLM extractor (fidelity.extractor); empty: the heuristic's.
    forms = models.JSONField(null=True, blank=True)
    forms_source = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["fid_run", "problem", "role"]
        constraints = [models.UniqueConstraint(fields=["fid_run", "problem", "role"], name="fidelity_output_unique")]
