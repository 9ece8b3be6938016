"""Judge configurations: label sources that are not people."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from annotation.models import StudyScopedQuerySet, Study


class JudgeConfig(models.Model):
    """A label source that is not a person. Configuration only: API keys are
    named by environment variable and never stored."""

    class Provider(models.TextChoices):
        MECHANISTIC = "mechanistic"
        LLM = "llm"
        FAKE = "fake"

    class Mode(models.TextChoices):
        SKELETON = "skeleton"
        REFERENCE_FREE = "reference-free"

    class OutputMode(models.TextChoices):
        AUTO = "auto"
        JSON_SCHEMA = "json_schema"
        JSON_OBJECT = "json_object"
        PROMPT = "prompt"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judges")
    name = models.CharField(max_length=100)
    provider = models.CharField(max_length=20, choices=Provider.choices, default=Provider.LLM)
    model = models.CharField(max_length=200, blank=True)
    base_url = models.CharField(max_length=500, blank=True)
    api_key_env = models.CharField(max_length=100, blank=True)
    temperature = models.FloatField(default=0.0)
    max_tokens = models.PositiveIntegerField(default=2048)
    mode = models.CharField(max_length=20, choices=Mode.choices, default=Mode.SKELETON)
    output_mode = models.CharField(max_length=20, choices=OutputMode.choices, default=OutputMode.AUTO)
    prompt_template = models.TextField(blank=True)
    prompt_version = models.CharField(max_length=50, default="1")
    concurrency = models.PositiveSmallIntegerField(default=4)
    rate_limit_per_minute = models.PositiveIntegerField(null=True, blank=True)
    max_retries = models.PositiveSmallIntegerField(default=4)
    # Bumped on every configuration change; part of the response cache key.
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    objects = StudyScopedQuerySet.as_manager()

    class Meta:
        ordering = ["study", "name"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="judge_unique_name_per_study"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def source(self) -> str:
        return f"judge:{self.name}"
