"""Judges: label sources that are not people, their prompts, runs and results.

A judge labels steps exactly as an annotator does; its labels live in
``annotation.StepLabel`` (kind "judge") under the label source ``judge:NAME``.
Everything else a run produces -- per-trace status, the judge's opinion on
the final answer, token usage, cost, the calls it made -- lives here.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from annotation.models import Job, Study, StudyScopedQuerySet, Trace

MECHANISTIC = "mechanistic"  # the built-in judge every study has


def validate_template(source: str) -> None:
    from judges.protocol import template_error

    error = template_error(source)
    if error:
        raise ValidationError(f"the template does not compile: {error}")


def validate_base_url(value: str) -> None:
    # Not Django's URLValidator: model servers live at "http://ollama:11434/v1" and "http://gpu-box:8000/v1".
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or " " in value:
        raise ValidationError("enter an http:// or https:// URL, e.g. http://127.0.0.1:8080/v1")


# Names appear in label sources ("judge:NAME"), exports and the command line.
validate_judge_name = RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", "use letters, digits, '_', '.' and '-' only")


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
    name = models.CharField(max_length=100, validators=[validate_judge_name])
    provider = models.CharField(max_length=20, choices=Provider.choices, default=Provider.LLM)
    model = models.CharField(max_length=200, blank=True)
    base_url = models.CharField(max_length=500, blank=True, validators=[validate_base_url])
    api_key_env = models.CharField(
        max_length=100, blank=True, validators=[RegexValidator(r"^[A-Za-z_][A-Za-z0-9_]*$", "not an environment variable name")],
        help_text="name of the environment variable that holds the API key (the key itself is never stored)",
    )
    temperature = models.FloatField(default=0.0, validators=[MinValueValidator(0.0), MaxValueValidator(2.0)])
    max_tokens = models.PositiveIntegerField(default=2048, validators=[MinValueValidator(1)])
    mode = models.CharField(max_length=20, choices=Mode.choices, default=Mode.SKELETON)
    output_mode = models.CharField(max_length=20, choices=OutputMode.choices, default=OutputMode.AUTO)
    # What "auto" found the server accepts; the next run starts there.
    output_mode_resolved = models.CharField(max_length=20, choices=OutputMode.choices, blank=True)
    # The current prompt; every version is kept as a PromptVersion row.
    prompt_template = models.TextField(blank=True, validators=[validate_template])
    prompt_version = models.CharField(max_length=50, default="1")
    concurrency = models.PositiveSmallIntegerField(default=4, validators=[MinValueValidator(1), MaxValueValidator(64)])
    rate_limit_per_minute = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    max_retries = models.PositiveSmallIntegerField(default=4, validators=[MaxValueValidator(20)])
    timeout_seconds = models.FloatField(default=120.0, validators=[MinValueValidator(0.1)])
    # Estimated cost in USD per million tokens; 0 for local servers.
    price_input_per_mtok = models.FloatField(default=0.0, validators=[MinValueValidator(0.0)])
    price_output_per_mtok = models.FloatField(default=0.0, validators=[MinValueValidator(0.0)])
    # Bumped on every change that can change the judge's answers; part of the
    # response cache key.
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

    def get_absolute_url(self) -> str:
        return reverse("judge", args=[self.pk])

    @property
    def source(self) -> str:
        return f"judge:{self.name}"

    @property
    def builtin(self) -> bool:
        return self.provider == self.Provider.MECHANISTIC

    @property
    def uses_prompt(self) -> bool:
        return self.provider != self.Provider.MECHANISTIC

    def price(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.price_input_per_mtok + completion_tokens * self.price_output_per_mtok) / 1e6


class PromptVersion(models.Model):
    """One version of a judge's prompt template. Never edited: a change is a new row."""

    judge = models.ForeignKey(JudgeConfig, on_delete=models.CASCADE, related_name="prompts")
    version = models.CharField(max_length=50)
    template = models.TextField(validators=[validate_template])
    note = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["judge", "-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["judge", "version"], name="prompt_unique_version_per_judge"),
        ]

    def __str__(self) -> str:
        return f"{self.judge} prompt v{self.version}"


class JudgeRunQuerySet(StudyScopedQuerySet):
    study_path = "judge__study"


class JudgeRun(models.Model):
    """One judge run: a Job of kind "judge", split into chunks of traces.

    The counters are sums over committed chunks (updated with F() in each
    chunk's transaction), so a chunk that died before committing counts nothing.
    """

    class Scope(models.TextChoices):
        ALL = "all"
        UNLABELLED = "unlabelled"
        FAILED = "failed"

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="judge_run")
    judge = models.ForeignKey(JudgeConfig, on_delete=models.CASCADE, related_name="runs")
    scope = models.CharField(max_length=20, choices=Scope.choices, default=Scope.ALL)
    filters = models.JSONField(default=dict, blank=True)  # model, domain, answer_correct, trace_ids
    force = models.BooleanField(default=False)  # ignore cached responses
    budget_usd = models.FloatField(null=True, blank=True)
    judge_version = models.PositiveIntegerField()
    prompt_version = models.CharField(max_length=50, blank=True)
    config = models.JSONField(default=dict, blank=True)  # the configuration the run started with
    requests = models.PositiveIntegerField(default=0)
    cache_hits = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    warnings = models.PositiveIntegerField(default=0)
    labels_created = models.PositiveIntegerField(default=0)
    labels_changed = models.PositiveIntegerField(default=0)
    labels_unchanged = models.PositiveIntegerField(default=0)
    labels_removed = models.PositiveIntegerField(default=0)
    stop_reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = JudgeRunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.judge}"

    def get_absolute_url(self) -> str:
        return reverse("judge-run", args=[self.pk])

    def summary(self) -> dict:
        return {
            "run": self.pk,
            "judge": self.judge.name if self.judge_id else None,
            "requests": self.requests,
            "cache_hits": self.cache_hits,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "warnings": self.warnings,
            "labels_created": self.labels_created,
            "labels_changed": self.labels_changed,
            "labels_unchanged": self.labels_unchanged,
            "labels_removed": self.labels_removed,
        }


class JudgeRunChunk(models.Model):
    """A slice of a run's traces: the unit of work of one task.

    A worker takes a chunk with a conditional UPDATE (pending, or running with
    an expired lease) and writes its results in one transaction with the
    status change, so a chunk is committed exactly once however often its
    task is delivered."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        SKIPPED = "skipped"  # the run stopped first

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    trace_ids = models.JSONField(default=list)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    holder = models.CharField(max_length=200, blank=True)  # "nodename/boot id" of the worker on it
    lease_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="judgechunk_unique_index")]
        indexes = [
            # The next pending chunk of a run; stalled chunks when a worker starts.
            models.Index(fields=["run", "status", "index"], name="judgechunk_run_status_idx"),
        ]

    def __str__(self) -> str:
        return f"chunk {self.index} of run {self.run_id} ({self.status})"


class JudgeTraceResultQuerySet(StudyScopedQuerySet):
    study_path = "judge__study"


class JudgeTraceResult(models.Model):
    """The newest outcome of one judge on one trace: ok or failed (with the
    reason), warnings, the judge's opinion on the final answer (kept beside
    the automatic check on Trace), and what the call cost."""

    class Status(models.TextChoices):
        OK = "ok"
        FAILED = "failed"

    judge = models.ForeignKey(JudgeConfig, on_delete=models.CASCADE, related_name="results")
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="judge_results")
    run = models.ForeignKey(JudgeRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="results")
    status = models.CharField(max_length=10, choices=Status.choices)
    reason = models.TextField(blank=True)
    warnings = models.JSONField(default=list, blank=True)
    answer_correct = models.BooleanField(null=True)
    n_labels = models.PositiveIntegerField(default=0)
    attempts = models.PositiveSmallIntegerField(default=0)
    cached = models.BooleanField(default=False)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    judge_version = models.PositiveIntegerField(default=1)
    prompt_version = models.CharField(max_length=50, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = JudgeTraceResultQuerySet.as_manager()

    class Meta:
        ordering = ["judge", "trace"]
        constraints = [
            models.UniqueConstraint(fields=["judge", "trace"], name="judgeresult_one_per_trace"),
        ]
        indexes = [
            # Runs over "failed" / "unlabelled" traces, and the failed list on the judge page.
            models.Index(fields=["judge", "status"], name="judgeresult_judge_status_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.judge} on {self.trace_id}: {self.status}"


class JudgeCall(models.Model):
    """One HTTP request of a run (every attempt, including retries)."""

    class Outcome(models.TextChoices):
        OK = "ok"
        MALFORMED = "malformed"  # an answer, but not valid JSON of the judge output shape
        ERROR = "error"  # transport error, timeout, HTTP error
        REJECTED_FORMAT = "rejected_format"  # the server refused the response_format

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="calls")
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="+")
    attempt = models.PositiveSmallIntegerField()
    output_mode = models.CharField(max_length=20)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "at", "pk"]


class ResponseCache(models.Model):
    """A judge's valid answer to one exact request. The key hashes the judge,
    its version, the prompt version, the model and the rendered request, so a
    re-run costs no request unless forced."""

    key = models.CharField(max_length=64, unique=True)
    judge = models.ForeignKey(JudgeConfig, on_delete=models.CASCADE, related_name="+")
    content = models.TextField()
    output_mode = models.CharField(max_length=20)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.key[:12]
