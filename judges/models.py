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
from judges.protocol import template_error
from runs import params
from runs.models import Run, RunRecord
from runs.outbound import OutboundRefused, check_endpoint

MECHANISTIC = "mechanistic"  # the built-in judge every study has


def validate_template(source: str) -> None:
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

    # Labels as people write them (the generated ones read "Json Schema" and "Reference Free").
    class Mode(models.TextChoices):
        SKELETON = "skeleton", "skeleton (checks steps against the problem's skeleton)"
        REFERENCE_FREE = "reference-free", "reference-free (no skeleton)"

    class OutputMode(models.TextChoices):
        AUTO = "auto", "auto (the best the server supports)"
        JSON_SCHEMA = "json_schema", "JSON schema"
        JSON_OBJECT = "json_object", "JSON object"
        PROMPT = "prompt", "JSON asked for in the prompt"

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
    # None: derived per trace from its number of steps (judges.protocol.derived_max_tokens), so a
    # grammar-constrained server is never asked for far more than an answer can take.
    max_tokens = models.PositiveIntegerField(
        null=True, blank=True, default=None, validators=params.validators("max_tokens"),
        help_text="leave empty to derive it from each trace's number of steps (256 + 128 per step, at most 4,096)",
    )
    # None: every trace in one request. Else the judge's context window in tokens: a trace whose
    # prompt would not fit is judged in overlapping windows of steps (judges.windowing).
    context_tokens = models.PositiveIntegerField(
        null=True, blank=True, default=None, validators=[MinValueValidator(1024)],
        help_text="the judge model's context window in tokens; longer traces are judged in overlapping windows",
    )
    mode = models.CharField(max_length=20, choices=Mode.choices, default=Mode.SKELETON)
    output_mode = models.CharField(max_length=20, choices=OutputMode.choices, default=OutputMode.AUTO)
    # What "auto" found the server accepts; the next run starts there.
    output_mode_resolved = models.CharField(max_length=20, choices=OutputMode.choices, blank=True)
    # The current prompt; every version is kept as a PromptVersion row.
    prompt_template = models.TextField(blank=True, validators=[validate_template])
    prompt_version = models.CharField(max_length=50, default="1")
    concurrency = models.PositiveSmallIntegerField(default=4, validators=params.validators("concurrency"))
    rate_limit_per_minute = models.PositiveIntegerField(null=True, blank=True,
                                                        validators=params.validators("rate_limit_per_minute"))
    max_retries = models.PositiveSmallIntegerField(default=4, validators=params.validators("max_retries"))
    timeout_seconds = models.FloatField(default=120.0, validators=params.validators("timeout_seconds"))
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

    def clean(self) -> None:
        # The operator's policy (runs.outbound): a key name on REASONAUDIT_MODEL_KEYS for this host, an
        # address REASONAUDIT_MODEL_NETWORKS allows, no credentials in the URL.
        super().clean()
        try:
            check_endpoint(self.base_url, self.api_key_env)
        except OutboundRefused as exc:
            raise ValidationError({exc.field: exc.message}) from None

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
        """USD: (prompt tokens x input price + completion tokens x output price) / 1,000,000."""
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


class JudgeRun(RunRecord):
    """One judge run: which judge, over which traces, and what it did to the
    labels. The engine's side -- chunks, leases, calls, tokens, cost, the stop
    reason -- is the ``run`` (runs.Run of kind "judge"); both belong to the same
    Job. The counters are sums over committed chunks."""

    class Scope(models.TextChoices):
        ALL = "all"
        UNLABELLED = "unlabelled"
        FAILED = "failed"

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="judge_run")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="judge_run")
    judge = models.ForeignKey(JudgeConfig, on_delete=models.CASCADE, related_name="runs")
    scope = models.CharField(max_length=20, choices=Scope.choices, default=Scope.ALL)
    filters = models.JSONField(default=dict, blank=True)  # model, domain, answer_correct, trace_ids
    judge_version = models.PositiveIntegerField()
    prompt_version = models.CharField(max_length=50, blank=True)
    labels_created = models.PositiveIntegerField(default=0)
    labels_changed = models.PositiveIntegerField(default=0)
    labels_unchanged = models.PositiveIntegerField(default=0)
    labels_removed = models.PositiveIntegerField(default=0)

    objects = JudgeRunQuerySet.as_manager()

    def __str__(self) -> str:
        return f"run {self.pk} of {self.judge}"

    def get_absolute_url(self) -> str:
        return reverse("judge-run", args=[self.pk])

    def changed_data(self) -> bool:
        return bool(self.labels_created or self.labels_changed or self.labels_removed)

    def counters(self) -> dict:
        return {
            "judge": self.judge.name if self.judge_id else None,
            "labels_created": self.labels_created,
            "labels_changed": self.labels_changed,
            "labels_unchanged": self.labels_unchanged,
            "labels_removed": self.labels_removed,
        }


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
    prompt_tokens = models.PositiveIntegerField(default=0)  # known tokens; see unknown_token_calls
    completion_tokens = models.PositiveIntegerField(default=0)
    unknown_token_calls = models.PositiveSmallIntegerField(default=0)  # calls whose usage the server never told
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


class TagRunQuerySet(StudyScopedQuerySet):
    study_path = "judge__study"


class TagRun(RunRecord):
    """One run of an LLM judge tagging the functions of steps (judges.tagging; annotation.StepTag of kind
    judge): the runs client of kind "step-tags". Its failures (``failures``) name the traces and why;
    the counters are sums over committed chunks."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="tag_run")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="tag_run")
    judge = models.ForeignKey(JudgeConfig, on_delete=models.CASCADE, related_name="tag_runs")
    judge_version = models.PositiveIntegerField()
    traces_tagged = models.PositiveIntegerField(default=0)
    tags_created = models.PositiveIntegerField(default=0)
    tags_removed = models.PositiveIntegerField(default=0)

    objects = TagRunQuerySet.as_manager()

    def __str__(self) -> str:
        return f"tag run {self.pk} of {self.judge}"

    def changed_data(self) -> bool:
        return bool(self.tags_created or self.tags_removed)

    def counters(self) -> dict:
        return {"judge": self.judge.name if self.judge_id else None, "traces_tagged": self.traces_tagged,
                "tags_created": self.tags_created, "tags_removed": self.tags_removed}
