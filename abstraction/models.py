"""Benchmark versions, their items and the checked outputs of each model (docs/abstraction.md).

A Benchmark is one generated (seed, generator version, remap mode, SMA mode) version or one imported
set of published outputs. An Item is one instance of one sub-dataset; its raw and remapped variants
share ``instance``. A Result is one model's answer to one item in one prompting mode, with every
verdict kept (deterministic, LLM checker, imported) and ``correct`` the one used, named by ``checker``."""

from __future__ import annotations

from django.db import models
from django.urls import reverse
from django.utils import timezone

from annotation.models import Job, Problem, Study, StudyScopedQuerySet, Trace
from runs.models import Run, RunRecord

#: The domain of the problem each item is written as (the study's own problems and traces leave them out).
ITEM_DOMAIN = "abstraction"


class Benchmark(models.Model):
    class Source(models.TextChoices):
        GENERATED = "generated"
        IMPORTED = "imported"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="abstraction_benchmarks")
    name = models.CharField(max_length=100)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.GENERATED)
    seed = models.BigIntegerField(null=True, blank=True)
    generator_version = models.CharField(max_length=50, blank=True)
    remap_mode = models.CharField(max_length=10, blank=True)  # repo | clean ("" when imported: the file's own)
    sma_mode = models.CharField(max_length=10, blank=True)
    categories = models.JSONField(default=list)
    per_sub_dataset = models.PositiveIntegerField(null=True, blank=True)
    counts = models.JSONField(default=dict)  # {category: items}
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = StudyScopedQuerySet.as_manager()

    class Meta:
        ordering = ["study", "name"]
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="abstraction_benchmark_unique_name")]

    def __str__(self) -> str:
        return self.name

    def describe(self) -> dict:
        return {"benchmark": self.name, "source": self.source, "seed": self.seed,
                "generator_version": self.generator_version, "remap_mode": self.remap_mode or "as published",
                "sma_mode": self.sma_mode or "as published", "per_sub_dataset": self.per_sub_dataset}


class ItemQuerySet(StudyScopedQuerySet):
    study_path = "benchmark__study"


class Item(models.Model):
    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="items")
    category = models.CharField(max_length=5)
    sub_dataset = models.CharField(max_length=100)
    task = models.CharField(max_length=100)
    variant = models.CharField(max_length=5)  # raw | all | num | op
    instance = models.PositiveIntegerField()  # 0-based, shared by the raw item and its remapped variants
    question = models.TextField()
    answer = models.TextField()  # the gold (remapped for SR)
    hint = models.CharField(max_length=100, blank=True)
    operator = models.CharField(max_length=100, blank=True)
    examples = models.JSONField(default=list)  # [[question, answer], ...]; [] when imported (cut prompts)
    remap = models.JSONField(default=dict, blank=True)
    # The prompts of both modes are functions of the item (abstraction.core.prompts): their hashes
    # are stored so a trace's regime can be matched to the prompt it came from.
    dp_hash = models.CharField(max_length=64, blank=True)
    cot_hash = models.CharField(max_length=64, blank=True)
    problem = models.ForeignKey(Problem, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    meta = models.JSONField(default=dict, blank=True)

    objects = ItemQuerySet.as_manager()

    class Meta:
        ordering = ["benchmark", "category", "sub_dataset", "instance"]
        constraints = [models.UniqueConstraint(fields=["benchmark", "sub_dataset", "instance"],
                                               name="abstraction_item_unique")]
        indexes = [models.Index(fields=["benchmark", "task", "instance"], name="abstraction_item_pair_idx")]

    def __str__(self) -> str:
        return f"{self.sub_dataset}[{self.instance}]"

    def problem_id(self) -> str:
        return f"abs/{self.benchmark.name}/{self.sub_dataset}/{self.instance}"


class ResultQuerySet(StudyScopedQuerySet):
    study_path = "item__benchmark__study"


class Result(models.Model):
    class Mode(models.TextChoices):
        DP = "dp", "direct"
        COT = "cot", "CoT"

    class Checker(models.TextChoices):
        DETERMINISTIC = "deterministic"
        LLM = "llm"
        IMPORTED = "imported"

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="results")
    model = models.CharField(max_length=200)
    mode = models.CharField(max_length=5, choices=Mode.choices)
    trace = models.ForeignKey(Trace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    output = models.TextField(blank=True)
    extracted = models.TextField(blank=True)
    det_correct = models.BooleanField(null=True)
    llm_correct = models.BooleanField(null=True)
    llm_output = models.TextField(blank=True)
    imported_correct = models.BooleanField(null=True)
    correct = models.BooleanField()
    checker = models.CharField(max_length=20, choices=Checker.choices)
    regime = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ResultQuerySet.as_manager()

    class Meta:
        ordering = ["item", "model", "mode"]
        constraints = [models.UniqueConstraint(fields=["item", "model", "mode"], name="abstraction_result_unique")]
        indexes = [models.Index(fields=["model", "mode"], name="abstraction_result_model_idx")]

    def __str__(self) -> str:
        return f"{self.model}/{self.mode} {self.item}"


class AbstractionRunQuerySet(StudyScopedQuerySet):
    study_path = "benchmark__study"


class AbstractionRun(RunRecord):
    """One run of a subject model over (a subsample of) a benchmark in one or two prompting modes; the
    engine's side is ``run`` (runs.Run of kind "abstraction")."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="abstraction_run")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="abstraction_run")
    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="runs")
    subject = models.ForeignKey("subjects.SubjectModel", on_delete=models.CASCADE, related_name="abstraction_runs")
    modes = models.JSONField(default=list)
    checker = models.CharField(max_length=20, default=Result.Checker.DETERMINISTIC)
    judge = models.ForeignKey("judges.JudgeConfig", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    results_created = models.PositiveIntegerField(default=0)

    objects = AbstractionRunQuerySet.as_manager()

    def __str__(self) -> str:
        return f"abstraction run {self.pk} of {self.subject}"

    def get_absolute_url(self) -> str:
        return reverse("abstraction-table", args=[self.benchmark.study_id])

    def changed_data(self) -> bool:
        return self.results_created > 0

    def counters(self) -> dict:
        return {"subject_model": self.subject.name, "benchmark": self.benchmark.name, "modes": self.modes,
                "checker": self.checker, "results": self.results_created}
