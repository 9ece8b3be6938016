"""Subject models (the models under test), their prompt templates, generation
runs and the per-trace generation records (docs/generation.md).

A subject model is configuration only: the API key is named by environment
variable and never stored. Its ``version`` goes up whenever a field that can
change its completions changes, and is part of every generated trace's id and
of the response cache scope, so two configurations never share traces."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from annotation.models import Job, Problem, Study, StudyScopedQuerySet, Trace, not_suite
from runs import params
from runs.continuation import ModelServer
from runs.models import Run, RunRecord
from runs.outbound import OutboundRefused, check_endpoint
from runs.thinking import TEMPLATE as TEMPLATE_SWITCH
from runs.thinking import ThinkingSettings

validate_name = RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", "use letters, digits, '_', '.' and '-' only")


def validate_base_url(value: str) -> None:
    # Not Django's URLValidator: model servers live at "http://ollama:11434/v1" and "http://gpu-box:8000/v1".
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or " " in value:
        raise ValidationError("enter an http:// or https:// URL, e.g. http://127.0.0.1:8080/v1")


def validate_stop(value) -> None:
    if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value) or len(value) > 4:
        raise ValidationError("give up to 4 non-empty stop strings")


validate_env_name = RegexValidator(r"^[A-Za-z_][A-Za-z0-9_]*$", "not an environment variable name")


class PromptTemplate(models.Model):
    """One version of a named prompt template of a study. Never edited: a
    change is a new row with the next version, so a trace's regime names a
    template that still exists as it was."""

    class Kind(models.TextChoices):
        ZERO_SHOT = "zero-shot"
        K_SHOT = "k-shot"
        # A system prompt of a diagnostic (abstraction's DP/CoT prompts): the item goes in its own user
        # turn, so the template need not name {{ problem }}.
        SYSTEM = "system"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="prompt_templates")
    name = models.CharField(max_length=100, validators=[validate_name])
    version = models.PositiveIntegerField(default=1)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.ZERO_SHOT)
    template = models.TextField()
    exemplars = models.JSONField(default=list, blank=True)  # [{"question", "answer"}] for k-shot
    created_at = models.DateTimeField(default=timezone.now)

    objects = StudyScopedQuerySet.as_manager()

    class Meta:
        ordering = ["study", "name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name", "version"], name="prompttemplate_unique_version"),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    def get_absolute_url(self) -> str:
        return reverse("prompt-template", args=[self.pk])


#: The model id of the demo's deterministic stand-in server (demo/standin): not a language model, and every page
#: that shows its numbers says so.
STAND_IN_MODEL = "deterministic-stand-in"


class SubjectModel(models.Model):
    """A model under test, reachable at an OpenAI-compatible endpoint."""

    class Api(models.TextChoices):
        CHAT = "chat"
        COMPLETIONS = "completions"

    class Thinking(models.TextChoices):
        DEFAULT = "", "server default"
        ON = "on", "on"
        OFF = "off", "off"

    class ThinkingSwitch(models.TextChoices):
        TEMPLATE = "template", "chat template argument (chat_template_kwargs.enable_thinking)"
        PROMPT = "prompt", "in the prompt (/think or /no_think)"
        BOTH = "both", "both"

    class ReasoningEffort(models.TextChoices):
        DEFAULT = "", "server default"
        LOW = "low", "low"
        MEDIUM = "medium", "medium"
        HIGH = "high", "high"

    class Continuation(models.TextChoices):
        UNKNOWN = "", "not probed"
        COMPLETIONS = "completions"
        PREFILL = "prefill"
        INSTRUCTED = "instructed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="subject_models")
    name = models.CharField(max_length=100, validators=[validate_name])
    base_url = models.CharField(max_length=500, validators=[validate_base_url])
    model = models.CharField(max_length=200)
    api_key_env = models.CharField(max_length=100, blank=True, validators=[validate_env_name],
                                   help_text="name of the environment variable with the API key (never the key)")
    api = models.CharField(max_length=20, choices=Api.choices, default=Api.CHAT)
    system_prompt = models.TextField(blank=True)
    prompt_template = models.ForeignKey(PromptTemplate, on_delete=models.PROTECT, related_name="subject_models")
    temperature = models.FloatField(default=0.0, validators=[MinValueValidator(0.0), MaxValueValidator(2.0)])
    top_p = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    seed = models.BigIntegerField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(default=512, validators=params.validators("max_tokens"))
    stop = models.JSONField(default=list, blank=True, validators=[validate_stop])  # list of stop strings
    # Reasoning models (subjects/thinking.py says what each setting sends).
    thinking = models.CharField("Thinking", max_length=8, choices=Thinking.choices, blank=True, default="")
    thinking_switch = models.CharField("How thinking is switched", max_length=10, choices=ThinkingSwitch.choices,
                                       default=ThinkingSwitch.TEMPLATE)
    reasoning_effort = models.CharField("Reasoning effort", max_length=8, choices=ReasoningEffort.choices,
                                        blank=True, default="")
    thinking_budget = models.PositiveIntegerField("Thinking budget (tokens)", null=True, blank=True,
                                                  help_text="sent as thinking_budget where the server supports one")
    n_samples = models.PositiveSmallIntegerField(default=1, validators=params.validators("samples"))
    concurrency = models.PositiveSmallIntegerField(default=4, validators=params.validators("concurrency"))
    rate_limit_per_minute = models.PositiveIntegerField(null=True, blank=True,
                                                        validators=params.validators("rate_limit_per_minute"))
    timeout_seconds = models.FloatField(default=120.0, validators=params.validators("timeout_seconds"))
    max_retries = models.PositiveSmallIntegerField(default=4, validators=params.validators("max_retries"))
    price_input_per_mtok = models.FloatField(default=0.0, validators=[MinValueValidator(0.0)])
    price_output_per_mtok = models.FloatField(default=0.0, validators=[MinValueValidator(0.0)])
    continuation = models.CharField(max_length=20, choices=Continuation.choices, blank=True)
    # The model's own Jinja chat template (from its tokenizer_config.json): the completions continuation mode
    # renders the chat with it, so the model decodes from exactly the tokens it would have produced itself.
    chat_template = models.TextField(blank=True)
    eos_token = models.CharField(max_length=100, blank=True,
                                 help_text="the template's end-of-turn token (read from a tokenizer_config.json)")
    # The last probe (runs.continuation.ProbeResult.to_dict() plus probed_at and config_version); {} = never probed.
    probe_result = models.JSONField(default=dict, blank=True)
    # Bumped on every change that can change the completions (subjects.services.VERSIONED_FIELDS).
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    objects = StudyScopedQuerySet.as_manager()

    class Meta:
        ordering = ["study", "name"]
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="subjectmodel_unique_name_per_study")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("subject-model", args=[self.pk])

    def clean(self) -> None:
        # The operator's policy (runs.outbound): a key name on REASONAUDIT_MODEL_KEYS for this host, an
        # address REASONAUDIT_MODEL_NETWORKS allows, no credentials in the URL.
        super().clean()
        try:
            check_endpoint(self.base_url, self.api_key_env)
        except OutboundRefused as exc:
            raise ValidationError({exc.field: exc.message}) from None

    @property
    def is_stand_in(self) -> bool:
        return self.model == STAND_IN_MODEL

    def server(self) -> ModelServer:
        """The plain server configuration the continuation service and the probe take."""
        return ModelServer(
            base_url=self.base_url, model=self.model, api_key_env=self.api_key_env, chat_template=self.chat_template,
            eos_token=self.eos_token, timeout_seconds=self.timeout_seconds,
            # A probe asks for 8 tokens: a server that needs longer than this for them is not one to wait on.
            probe_timeout_seconds=min(self.timeout_seconds, 30.0), max_retries=self.max_retries,
            concurrency=self.concurrency, rate_limit_per_minute=self.rate_limit_per_minute,
            price_input_per_mtok=self.price_input_per_mtok, price_output_per_mtok=self.price_output_per_mtok,
            thinking=ThinkingSettings(self.thinking, self.thinking_switch or TEMPLATE_SWITCH, self.reasoning_effort,
                                      self.thinking_budget),
        )


class GenerationRunQuerySet(StudyScopedQuerySet):
    study_path = "subject__study"


class GenerationRun(RunRecord):
    """One generation run: K completions for each selected problem. The
    engine's side (chunks, leases, calls, tokens, cost, stop reason) is the
    ``run`` (runs.Run of kind "generation"); both belong to the same Job."""

    class Scope(models.TextChoices):
        ALL = "all"
        MISSING = "missing"

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="generation_run")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="generation_run")
    subject = models.ForeignKey(SubjectModel, on_delete=models.CASCADE, related_name="runs")
    scope = models.CharField(max_length=20, choices=Scope.choices, default=Scope.ALL)
    # A problem filter (reasonlib.selection: first:N, ids:, pid:, sample:N@SEED) applied within the scope.
    problem_filter = models.CharField(max_length=2000, blank=True, default="")
    samples = models.PositiveSmallIntegerField(default=1)
    config_version = models.PositiveIntegerField()
    traces_created = models.PositiveIntegerField(default=0)
    traces_unchanged = models.PositiveIntegerField(default=0)
    samples_failed = models.PositiveIntegerField(default=0)

    objects = GenerationRunQuerySet.as_manager()

    def __str__(self) -> str:
        return f"generation run {self.pk} of {self.subject}"

    def get_absolute_url(self) -> str:
        return reverse("generation-run", args=[self.pk])

    def changed_data(self) -> bool:
        return self.traces_created > 0

    def counters(self) -> dict:
        return {
            "subject_model": self.subject.name,
            "config_version": self.config_version,
            "samples": self.samples,
            "traces_created": self.traces_created,
            "traces_unchanged": self.traces_unchanged,
            "samples_failed": self.samples_failed,
        }


class GenerationQuerySet(StudyScopedQuerySet):
    study_path = "subject__study"

    def of_study(self, study: Study | int) -> GenerationQuerySet:
        """The study's generations of its own problems (a suite's or a benchmark's are reported on their pages):
        the suite rule tested on each generation's own problem, not a semi-join with every own trace of the study
        (half a second a request at 1M traces; a generation's trace is of its problem)."""
        return self.filter(subject__study=study).filter(*not_suite("problem__"))


class Generation(models.Model):
    """What one completion cost and how it ended, beside its Trace: one row per
    (subject model, config version, problem, sample). ``truncated``: the server
    stopped at max_tokens (finish_reason "length"); the trace is kept."""

    subject = models.ForeignKey(SubjectModel, on_delete=models.CASCADE, related_name="generations")
    config_version = models.PositiveIntegerField()
    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="+")
    sample = models.PositiveSmallIntegerField()  # 0-based
    trace = models.OneToOneField(Trace, on_delete=models.CASCADE, related_name="generation")
    run = models.ForeignKey(GenerationRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    finish_reason = models.CharField(max_length=30, blank=True)
    truncated = models.BooleanField(default=False)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)  # null: the server never said
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)  # of the call that gave the answer (0 when cached)
    cost_usd = models.FloatField(default=0.0)  # every attempt of this sample in the run that made it
    cached = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    objects = GenerationQuerySet.as_manager()

    class Meta:
        ordering = ["subject", "config_version", "problem", "sample"]
        constraints = [
            models.UniqueConstraint(fields=["subject", "config_version", "problem", "sample"],
                                    name="generation_unique_sample"),
        ]
        indexes = [
            # The aggregates of one configuration, and "which samples are missing" for a run.
            models.Index(fields=["subject", "config_version", "problem"], name="generation_subject_version_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} v{self.config_version} {self.problem_id}#{self.sample}"
