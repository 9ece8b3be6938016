"""Runs: every batch of model calls (judge runs now; generation, continuation
and diagnostics runs next) is a Run of work items split into chunks.

A Run belongs to a Job (progress, cancel, status) and to the app that started
it, which keeps its own row pointing here (e.g. judges.JudgeRun) and
registers a client for the run's ``kind`` (runs.clients). This app knows
nothing of judges: an item is a number in the client's namespace (a trace pk
for judges, a problem pk for generation).
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from annotation.models import Job

# Filled by runs.clients.register from each client's ``listed``: the clients import these models, so the
# declaration reaches the queryset this way round and the dependency stays one way.
UNLISTED_KINDS: set[str] = set()


class RunQuerySet(models.QuerySet):
    def listed(self) -> RunQuerySet:
        """The runs the runs page and the runs API list: runs of model calls (runs.clients.RunClient.listed)."""
        return self.exclude(kind__in=sorted(UNLISTED_KINDS))


class Run(models.Model):
    """The engine's side of a run: what it cost and why it stopped.

    The counters are sums over committed chunks (updated with F() in each
    chunk's transaction), so a chunk that died before committing counts nothing.
    Token counts are what servers reported; calls whose usage is not known
    (a timeout, a dropped connection, an answer without ``usage``) are counted
    in ``unknown_token_calls`` instead of as zero, so a cost is a lower bound
    whenever that count is not zero.
    """

    objects = RunQuerySet.as_manager()

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="run")
    kind = models.CharField(max_length=30)  # the registered client: "judge", later "generation", ...
    force = models.BooleanField(default=False)  # ignore cached responses
    budget_usd = models.FloatField(null=True, blank=True)
    config = models.JSONField(default=dict, blank=True)  # the model configuration the run started with
    # Chains of chunks worked on at once (runs.engine: each with its share of the concurrency).
    lanes = models.PositiveSmallIntegerField(default=1)
    # The structured-output form the server accepted in this run (part of the inference regime).
    output_mode = models.CharField(max_length=20, blank=True)
    requests = models.PositiveIntegerField(default=0)
    cache_hits = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    unknown_token_calls = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    warnings = models.PositiveIntegerField(default=0)
    # Run-level warnings: {message: number of items that raised it}.
    notes = models.JSONField(default=dict, blank=True)
    stop_reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.kind} run {self.pk}"

    def summary(self) -> dict:
        return {
            "requests": self.requests,
            "cache_hits": self.cache_hits,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "unknown_token_calls": self.unknown_token_calls,
            "cost_usd": round(self.cost_usd, 6),
            "warnings": self.warnings,
            "notes": self.notes,
        }


#: How many item failures a run record keeps (the first ones): enough for the status line and the run page.
MAX_FAILURES_KEPT = 50


class RunRecord(models.Model):
    """The kind's row of a run, beside the engine's ``run``: every kind's model (judges.JudgeRun,
    subjects.GenerationRun, ...) inherits it. Both belong to the same Job.

    A kind whose code and templates read ``job.<name>`` / ``run.<name>`` redeclares ``job`` and ``run``
    with that related name (a reverse accessor must be unique per model); the default is
    ``<app>_<model>``. The engine's figures are read through, so pages, the API and the CLI show a
    record's requests, tokens and cost without knowing where they live."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="%(app_label)s_%(class)s")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="%(app_label)s_%(class)s")
    # {item key: reason} for the first MAX_FAILURES_KEPT items that failed, in the kind's own keys (problem ids, ...).
    failures = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-pk"]

    # The engine's figures, read through (templates, the API and the CLI show them).
    force = property(lambda self: self.run.force)
    budget_usd = property(lambda self: self.run.budget_usd)
    config = property(lambda self: self.run.config)
    requests = property(lambda self: self.run.requests)
    cache_hits = property(lambda self: self.run.cache_hits)
    prompt_tokens = property(lambda self: self.run.prompt_tokens)
    completion_tokens = property(lambda self: self.run.completion_tokens)
    unknown_token_calls = property(lambda self: self.run.unknown_token_calls)
    cost_usd = property(lambda self: self.run.cost_usd)
    warnings = property(lambda self: self.run.warnings)
    notes = property(lambda self: self.run.notes)
    stop_reason = property(lambda self: self.run.stop_reason)
    output_mode = property(lambda self: self.run.output_mode)
    chunks = property(lambda self: self.run.chunks)
    calls = property(lambda self: self.run.calls)

    def counters(self) -> dict:
        """The kind's own part of the job's result: what the run is of and what it made (a hook)."""
        return {}

    def changed_data(self) -> bool:
        """Whether the run changed what scoring reads (labels, traces, results): then scoring is told
        when it ends (RunClient.finished). A hook; the counters are final when it is asked."""
        return False

    def summary(self) -> dict:
        """The job's result when the run ends: the record, the engine's figures and the kind's counters."""
        return {"run": self.pk, **self.run.summary(), **self.counters()}

    def add_failures(self, reasons: dict[str, str]) -> None:
        """Keep the first failures of a chunk, up to MAX_FAILURES_KEPT in all. Call inside the chunk's
        transaction: the row is locked for the read-modify-write, so two lanes committing at once keep both."""
        if not reasons:
            return
        rows = type(self)._base_manager.filter(pk=self.pk)
        current = rows.select_for_update().values_list("failures", flat=True).get() or {}
        for key, reason in reasons.items():
            if len(current) >= MAX_FAILURES_KEPT:
                break
            current[str(key)] = reason[:1000]
        rows.update(failures=current)
        self.failures = current


class RunChunk(models.Model):
    """A slice of a run's items: the unit of work of one task.

    A worker takes a chunk with a conditional UPDATE (pending, or running with
    an expired lease), renews the lease from a heartbeat while it works, and
    writes its results in one transaction with the status change -- only if it
    still holds the chunk -- so a chunk is committed exactly once however
    often its task is delivered."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        SKIPPED = "skipped"  # the run stopped first

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    lane = models.PositiveSmallIntegerField(default=0)  # index % run.lanes: the chain that does it
    items = models.JSONField(default=list)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    holder = models.CharField(max_length=200, blank=True)  # "nodename/boot/process" of the worker on it
    lease_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="runchunk_unique_index")]
        indexes = [
            # The next pending chunk of a run; stalled chunks when a worker starts.
            models.Index(fields=["run", "status", "index"], name="runchunk_run_status_idx"),
        ]

    def __str__(self) -> str:
        return f"chunk {self.index} of run {self.run_id} ({self.status})"


class ModelCall(models.Model):
    """One HTTP request of a run (every attempt, including retries).

    Token counts are null when unknown (see Run)."""

    class Outcome(models.TextChoices):
        OK = "ok"
        MALFORMED = "malformed"  # an answer, but not valid output of the expected shape
        ERROR = "error"  # transport error, timeout, HTTP error
        REJECTED_FORMAT = "rejected_format"  # the server refused the response_format

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="calls")
    item = models.PositiveBigIntegerField()  # in the run client's namespace (a trace pk for judges)
    attempt = models.PositiveSmallIntegerField()
    output_mode = models.CharField(max_length=20)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.FloatField(default=0.0)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "at", "pk"]
        indexes = [models.Index(fields=["run", "item"], name="modelcall_run_item_idx")]


class ResponseCache(models.Model):
    """A valid answer to one exact request. The key hashes the caller's scope
    (e.g. judge, its version and prompt version), the model and the rendered
    request, so a re-run costs no request unless forced. ``scope`` lets the
    owner drop its entries (a deleted judge)."""

    key = models.CharField(max_length=64, unique=True)
    scope = models.CharField(max_length=100, db_index=True)
    content = models.TextField()
    output_mode = models.CharField(max_length=20)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    # The rest of the answer (runs.transport.Choice), so a hit replays it exactly:
    # the model the server named, why decoding stopped, the reasoning channel.
    model = models.CharField(max_length=200, blank=True, default="")
    finish_reason = models.CharField(max_length=40, blank=True, default="")
    reasoning = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.key[:12]
