"""Named judge operations shared by the web views, the API, the CLI and the
Celery tasks (docs/judges.md).

``check_*`` authorise and return objects or raise; ``do_*`` change data in a
transaction and queue work only after commit.

A run is a Job of kind "judge" with a JudgeRun and its chunks. Chunks are
processed one after the other (each task queues the next), so one run keeps
exactly the judge's ``concurrency`` requests in flight. A chunk is claimed
with a conditional UPDATE and committed in one transaction with its labels,
so a re-delivered task finds it done and does nothing; a chunk whose worker
died is taken over when its lease expires or when a worker with the same
node name starts again.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from annotation import access, jobs
from annotation.importing.pipeline import label_snapshot
from annotation.models import Job, LabelHistory, Membership, SkeletonStep, Step, StepLabel, Study, Trace
from judges import protocol
from judges.models import (
    MECHANISTIC,
    JudgeCall,
    JudgeConfig,
    JudgeRun,
    JudgeRunChunk,
    JudgeTraceResult,
    PromptVersion,
    ResponseCache,
)
from judges.providers import CachedAnswer, FatalJudgeError, TraceInput, TraceOutcome, get_provider, provider_class

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]  # (traces done, total)

ACTIVE = (Job.Status.QUEUED, Job.Status.RUNNING)
# Changing one of these can change a judge's answers: a new version, and a cold cache.
VERSIONED_FIELDS = ("provider", "model", "base_url", "temperature", "max_tokens", "mode", "output_mode")
FILTER_KEYS = ("model", "domain", "answer_correct", "trace_ids")
MAX_CHUNK_ATTEMPTS = 3


class RunConflict(Exception):
    """The judge already has a run in progress."""


def lease_seconds() -> float:
    """How long a chunk stays with a worker that stops renewing it."""
    return float(getattr(settings, "JUDGE_CHUNK_LEASE_SECONDS", 300))


def _lease() -> timedelta:
    return timedelta(seconds=lease_seconds())


# --------------------------------------------------------------------------
# Judges


def ensure_mechanistic(study: Study) -> JudgeConfig:
    """The built-in judge of a study; it becomes the primary judge when the study has none."""
    judge, _ = JudgeConfig.objects.get_or_create(
        study=study, name=MECHANISTIC,
        defaults={"provider": JudgeConfig.Provider.MECHANISTIC, "mode": JudgeConfig.Mode.SKELETON,
                  "prompt_version": "", "concurrency": 1},
    )
    if study.primary_judge_id is None:
        Study.objects.filter(pk=study.pk, primary_judge__isnull=True).update(primary_judge=judge)
        study.primary_judge = judge
    return judge


def check_judge(user, judge_id: int) -> tuple[JudgeConfig, Membership]:
    """The judge and the user's membership in its study (annotation.access decides)."""
    return access.check_object(user, JudgeConfig.objects.select_related("study"), judge_id, study_path="study_id",
                               what="judge")


def check_owner(membership: Membership) -> None:
    access.check_owner(membership, "managing the study's judges")


def next_prompt_label(judge: JudgeConfig) -> str:
    numbers = [int(v) for v in judge.prompts.values_list("version", flat=True) if v.isdigit()]
    return str(max(numbers, default=0) + 1)


@transaction.atomic
def do_save_judge(study: Study, fields: dict[str, Any], *, judge: JudgeConfig | None = None, user=None,
                  prompt_version: str | None = None) -> tuple[JudgeConfig, bool]:
    """Create or update an LLM judge. ``prompt_template`` in ``fields`` makes a
    new prompt version when it differs; ``prompt_version`` names it (or picks an
    existing version when no template is given)."""
    fields = dict(fields)
    template = fields.pop("prompt_template", None)
    created = judge is None
    if judge is None:
        judge = JudgeConfig(study=study, provider=JudgeConfig.Provider.LLM, prompt_version="")
    elif judge.builtin:
        raise ValueError("the built-in mechanistic judge has no settings to change")
    # Compare with the stored row: a ModelForm has already copied its values onto the instance.
    stored = JudgeConfig.objects.get(pk=judge.pk) if not created else judge
    changed = {key for key in VERSIONED_FIELDS if key in fields and getattr(stored, key) != fields[key]}
    if not created and changed:
        judge.version = stored.version + 1
        if changed & {"base_url", "output_mode", "model"}:
            judge.output_mode_resolved = ""  # another server or model may accept other formats
    for key, value in fields.items():
        setattr(judge, key, value)
    judge.save()
    if created:
        first = template if template is not None else protocol.DEFAULT_TEMPLATE
        _new_prompt(judge, first, prompt_version or "1", user=user, note="initial")
    elif template is not None or prompt_version:
        do_save_prompt(judge, template, user=user, version=prompt_version)
    return judge, created


def _new_prompt(judge: JudgeConfig, template: str, label: str, *, user=None, note: str = "") -> PromptVersion:
    prompt = PromptVersion.objects.create(judge=judge, version=label, template=template, note=note, created_by=user)
    judge.prompt_template, judge.prompt_version = template, label
    judge.save(update_fields=["prompt_template", "prompt_version", "updated_at"])
    return prompt


@transaction.atomic
def do_save_prompt(judge: JudgeConfig, template: str | None, *, user=None, note: str = "",
                   version: str | None = None) -> PromptVersion | None:
    """Make ``template`` the judge's prompt as a new version (or switch to the
    existing ``version`` when no template is given). None when nothing changed."""
    if not judge.uses_prompt:
        raise ValueError("the mechanistic judge has no prompt")
    if template is not None:
        error = protocol.template_error(template)
        if error:
            raise ValueError(f"the prompt template does not compile: {error}")
    existing = judge.prompts.filter(version=version).first() if version else None
    if existing is not None:
        if template is not None and template != existing.template:
            raise ValueError(f"prompt version {version} exists with another template; choose a new version name")
        if judge.prompt_version == existing.version:
            return None
        judge.prompt_template, judge.prompt_version = existing.template, existing.version
        judge.save(update_fields=["prompt_template", "prompt_version", "updated_at"])
        return existing
    if template is None:
        raise ValueError(f"judge {judge.name} has no prompt version {version!r}; give a template to create it")
    if template == judge.prompt_template and not version:
        return None
    return _new_prompt(judge, template, version or next_prompt_label(judge), user=user, note=note)


def preview_prompt(judge: JudgeConfig, template: str, trace: Trace) -> list[dict[str, str]]:
    """The messages the judge would send for ``trace`` with ``template``."""
    output_mode = judge.output_mode
    if output_mode == JudgeConfig.OutputMode.AUTO:
        output_mode = judge.output_mode_resolved or JudgeConfig.OutputMode.JSON_SCHEMA
    inputs, _ = load_inputs([trace.pk])
    return protocol.messages(template, inputs[0], judge.mode, output_mode)


# --------------------------------------------------------------------------
# Starting runs


def traces_in_scope(judge: JudgeConfig, scope: str = "all", filters: dict | None = None) -> QuerySet[Trace]:
    qs = Trace.objects.filter(study_id=judge.study_id)
    results = JudgeTraceResult.objects.filter(judge=judge, trace=OuterRef("pk"))
    if scope == JudgeRun.Scope.UNLABELLED:
        qs = qs.filter(~Exists(results.filter(status=JudgeTraceResult.Status.OK)))
    elif scope == JudgeRun.Scope.FAILED:
        qs = qs.filter(Exists(results.filter(status=JudgeTraceResult.Status.FAILED)))
    elif scope != JudgeRun.Scope.ALL:
        raise ValueError(f"unknown trace selection {scope!r}; choose one of {', '.join(JudgeRun.Scope.values)}")
    filters = filters or {}
    unknown = set(filters) - set(FILTER_KEYS)
    if unknown:
        raise ValueError(f"unknown filter {sorted(unknown)[0]!r}; choose from {', '.join(FILTER_KEYS)}")
    if filters.get("model"):
        qs = qs.filter(model=filters["model"])
    if filters.get("domain"):
        qs = qs.filter(problem__domain=filters["domain"])
    if filters.get("answer_correct") is not None:
        qs = qs.filter(answer_correct=filters["answer_correct"])
    if filters.get("trace_ids"):
        qs = qs.filter(trace_id__in=list(filters["trace_ids"]))
    return qs.order_by("pk")


def chunk_size(judge: JudgeConfig) -> int:
    return provider_class(judge).chunk_traces(judge)


def _config_snapshot(judge: JudgeConfig) -> dict[str, Any]:
    keys = ("name", "provider", "model", "base_url", "api_key_env", "temperature", "max_tokens", "mode", "output_mode",
            "output_mode_resolved", "prompt_version", "concurrency", "rate_limit_per_minute", "max_retries",
            "timeout_seconds", "price_input_per_mtok", "price_output_per_mtok", "version")
    return {key: getattr(judge, key) for key in keys}


def do_start_run(judge: JudgeConfig, *, scope: str = "all", filters: dict | None = None, force: bool = False,
                 budget_usd: float | None = None, user=None, queue: bool = True) -> JudgeRun:
    """Create the job, the run and its chunks; queue the first chunk after commit
    (``queue=False`` leaves it to run_inline)."""
    from kombu.exceptions import OperationalError as BrokerError

    if budget_usd is not None and budget_usd < 0:
        raise ValueError("the budget must not be negative")
    filters = {k: v for k, v in (filters or {}).items() if v not in (None, "", [])}
    run = None
    try:
        with transaction.atomic():
            active = JudgeRun.objects.filter(judge=judge, job__status__in=ACTIVE).first()
            if active is not None:
                raise RunConflict(f"judge {judge.name} already has run {active.pk} in progress (job {active.job_id}); "
                                  "wait for it or cancel it")
            ids = list(traces_in_scope(judge, scope, filters).values_list("pk", flat=True))
            job = Job.objects.create(
                study_id=judge.study_id, kind=Job.Kind.JUDGE, created_by=user, total=len(ids),
                params={"judge": judge.name, "judge_id": judge.pk, "traces": scope, "filters": filters, "force": force,
                        "budget_usd": budget_usd},
            )
            run = JudgeRun.objects.create(
                job=job, judge=judge, scope=scope, filters=filters, force=force, budget_usd=budget_usd,
                judge_version=judge.version, prompt_version=judge.prompt_version if judge.uses_prompt else "",
                config=_config_snapshot(judge),
            )
            job.params["run"] = run.pk
            job.save(update_fields=["params"])
            size = chunk_size(judge)
            chunks = JudgeRunChunk.objects.bulk_create(
                [JudgeRunChunk(run=run, index=i, trace_ids=ids[start:start + size])
                 for i, start in enumerate(range(0, len(ids), size))]
            )
            if not chunks:
                jobs.finish(job.pk, status=Job.Status.SUCCEEDED, result=run.summary(), error="")
            elif queue:
                first = chunks[0].pk
                transaction.on_commit(lambda: queue_chunk(first))
    except BrokerError:
        if run is not None:
            jobs.finish(run.job_id, status=Job.Status.FAILED, error="the task queue is not reachable")
        raise
    run.job.refresh_from_db()
    return run


def queue_chunk(chunk_id: int) -> None:
    from judges.tasks import judge_chunk

    judge_chunk.delay(chunk_id)


def run_inline(run: JudgeRun, *, progress: Progress | None = None) -> Job:
    """Process every chunk of ``run`` in this process (CLI, demo, eager mode)."""
    holder = f"inline:{socket.gethostname()}:{os.getpid()}"
    chunk = run.chunks.filter(status=JudgeRunChunk.Status.PENDING).order_by("index").values_list("pk", flat=True).first()
    while chunk is not None:
        chunk = process_chunk(chunk, holder, progress=progress)
    return Job.objects.get(pk=run.job_id)


# --------------------------------------------------------------------------
# Processing a chunk


def load_inputs(trace_ids: Sequence[int]) -> tuple[list[TraceInput], dict[int, list[int]]]:
    """What judges see of these traces (in the given order), and each trace's step pks by index."""
    traces = {
        t.pk: t
        for t in Trace.objects.filter(pk__in=trace_ids).select_related("problem").only(
            "pk", "trace_id", "model", "answer", "problem__statement", "problem__gold_answer",
            "problem__approved_skeleton_id",
        )
    }
    steps: dict[int, list[str]] = {pk: [] for pk in traces}
    step_pks: dict[int, list[int]] = {pk: [] for pk in traces}
    for trace_pk, pk, text in (
        Step.objects.filter(trace_id__in=list(traces)).order_by("trace_id", "index").values_list("trace_id", "pk", "text")
    ):
        steps[trace_pk].append(text)
        step_pks[trace_pk].append(pk)
    skeleton_ids = {t.problem.approved_skeleton_id for t in traces.values()} - {None}
    skeletons: dict[int, list[tuple[str, str]]] = {}
    for skeleton_id, text, check in (
        SkeletonStep.objects.filter(skeleton_id__in=skeleton_ids).order_by("skeleton_id", "position")
        .values_list("skeleton_id", "text", "check_expr")
    ):
        skeletons.setdefault(skeleton_id, []).append((text, check))
    inputs = []
    for pk in trace_ids:
        t = traces.get(pk)
        if t is None:
            continue  # deleted since the run started
        inputs.append(TraceInput(
            trace_pk=t.pk, trace_id=t.trace_id, model=t.model, problem=t.problem.statement,
            gold_answer=t.problem.gold_answer, answer=t.answer, steps=tuple(steps[pk]),
            skeleton=tuple(skeletons.get(t.problem.approved_skeleton_id, ())),
        ))
    return inputs, step_pks


class DbStore:
    """The response cache and the remembered output mode, in the database."""

    def __init__(self, judge: JudgeConfig, *, force: bool = False) -> None:
        self.judge = judge
        self.force = force

    def lookup(self, keys: Sequence[str]) -> dict[str, CachedAnswer]:
        if self.force or not keys:
            return {}
        return {
            key: CachedAnswer(content, mode, pt, ct)
            for key, content, mode, pt, ct in ResponseCache.objects.filter(key__in=keys).values_list(
                "key", "content", "output_mode", "prompt_tokens", "completion_tokens"
            )
        }

    def save(self, answers: dict[str, CachedAnswer]) -> None:
        # Written at once, outside the chunk's transaction: a worker killed
        # mid-chunk does not pay for these answers again.
        ResponseCache.objects.bulk_create(
            [ResponseCache(key=key, judge=self.judge, content=a.content, output_mode=a.output_mode,
                           prompt_tokens=a.prompt_tokens, completion_tokens=a.completion_tokens)
             for key, a in answers.items()],
            update_conflicts=True, unique_fields=["key"],
            update_fields=["content", "output_mode", "prompt_tokens", "completion_tokens"],
        )

    def remember_output_mode(self, output_mode: str) -> None:
        JudgeConfig.objects.filter(pk=self.judge.pk).update(output_mode_resolved=output_mode)


class RunControl:
    """What a provider asks between traces: cancel requested? budget spent?
    Also keeps the chunk's lease alive. Reads the database at most every
    ``interval`` seconds."""

    def __init__(self, run: JudgeRun, chunk_id: int, holder: str) -> None:
        self.run = run
        self.chunk_id = chunk_id
        self.holder = holder
        self.interval = float(getattr(settings, "JUDGE_CANCEL_CHECK_SECONDS", 0.5))
        self.spent = run.cost_usd
        self.cancelled = False
        self.lost = False
        self.checked = float("-inf")
        self.renewed = time.monotonic()

    def charge(self, cost_usd: float) -> None:
        self.spent += cost_usd

    def stop_reason(self) -> str | None:
        if self.lost:
            return "lost"
        if self.cancelled:
            return "cancelled"
        budget = self.run.budget_usd
        if budget is not None and self.spent >= budget:
            return "budget"
        now = time.monotonic()
        if now - self.checked >= self.interval:
            self.checked = now
            self.cancelled = Job.objects.filter(pk=self.run.job_id).filter(
                Q(cancel_requested=True) | ~Q(status__in=ACTIVE)
            ).exists()
            if now - self.renewed >= _lease().total_seconds() / 4:
                self.renewed = now
                self.lost = not JudgeRunChunk.objects.filter(
                    pk=self.chunk_id, holder=self.holder, status=JudgeRunChunk.Status.RUNNING
                ).update(lease_until=timezone.now() + _lease())
            if self.lost:
                return "lost"
            if self.cancelled:
                return "cancelled"
        return None


def claim_chunk(chunk_id: int, holder: str) -> bool:
    now = timezone.now()
    return bool(
        JudgeRunChunk.objects.filter(pk=chunk_id)
        .filter(Q(status=JudgeRunChunk.Status.PENDING) | Q(status=JudgeRunChunk.Status.RUNNING, lease_until__lt=now))
        .update(status=JudgeRunChunk.Status.RUNNING, holder=holder, lease_until=now + _lease(),
                attempts=F("attempts") + 1)
    )


@dataclass
class _Tally:
    done: int = 0
    failed: int = 0


def process_chunk(chunk_id: int, holder: str, *, progress: Progress | None = None) -> int | None:
    """Judge one chunk and commit its results. Returns the next chunk to queue,
    or None (run over, or the chunk was not ours to do). Safe to call twice."""
    if not claim_chunk(chunk_id, holder):
        return None
    chunk = JudgeRunChunk.objects.select_related("run__judge__study", "run__job").get(pk=chunk_id)
    run, job = chunk.run, chunk.run.job
    if job.cancel_requested or job.finished:
        _release(chunk, holder, JudgeRunChunk.Status.SKIPPED)
        finalize(run)
        return None
    Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(status=Job.Status.RUNNING, started_at=timezone.now())
    judge = run.judge
    control = RunControl(run, chunk.pk, holder)
    tally = _Tally()
    outcomes: list[TraceOutcome] = []
    fatal = ""
    last_report = 0.0

    def report(force: bool = False) -> None:
        nonlocal last_report
        now = time.monotonic()
        if force or now - last_report >= 0.25:
            last_report = now
            done, failed = job.done + tally.done, job.failed + tally.failed
            jobs.report_progress(job.pk, done, job.total, failed)
            if progress:
                progress(done, job.total)

    inputs, step_pks = load_inputs(chunk.trace_ids)
    provider = None
    try:
        provider = get_provider(judge, DbStore(judge, force=run.force))
        for outcome in provider.judge(inputs, control):
            outcomes.append(outcome)  # a skipped trace (stopped mid-retry) still had calls that cost
            if outcome.status == "skipped":
                continue
            tally.done += 1
            tally.failed += outcome.status == "failed"
            report()
    except FatalJudgeError as exc:
        fatal = str(exc)
    finally:
        if provider is not None:
            provider.close()
    stop = control.stop_reason()
    if stop == "lost":
        log.warning("judge chunk %s was taken over by another worker; dropping %d outcomes", chunk.pk, tally.done)
        return None
    # Only traces with an outcome are done (a stop leaves the rest for another run);
    # traces deleted since the run started count as done.
    missing = len(chunk.trace_ids) - len(inputs)
    with transaction.atomic():
        if not _release(chunk, holder, JudgeRunChunk.Status.DONE):
            transaction.set_rollback(True)
            return None
        write_outcomes(run, judge, outcomes, step_pks, actor=job.created_by)
        Job.objects.filter(pk=job.pk).update(done=F("done") + tally.done + missing, failed=F("failed") + tally.failed)
    job.done += tally.done + missing
    job.failed += tally.failed
    report(force=True)
    nxt = run.chunks.filter(status=JudgeRunChunk.Status.PENDING).order_by("index").values_list("pk", flat=True).first()
    if fatal:
        return finalize(run, status=Job.Status.FAILED, error=fatal)
    if stop == "cancelled":
        return finalize(run)
    if stop == "budget" and (tally.done < len(inputs) or nxt is not None):
        run.refresh_from_db(fields=["cost_usd"])
        return finalize(run, status=Job.Status.FAILED,
                        error=f"stopped: the budget of ${run.budget_usd:g} is spent (${run.cost_usd:.4f})")
    if nxt is None:
        return finalize(run)
    return nxt


def _release(chunk: JudgeRunChunk, holder: str, status: str) -> bool:
    return bool(
        JudgeRunChunk.objects.filter(pk=chunk.pk, holder=holder, status=JudgeRunChunk.Status.RUNNING)
        .update(status=status, lease_until=None)
    )


def release_failed_chunk(chunk_id: int, holder: str, error: str) -> int | None:
    """After an unexpected error: give the chunk back to be tried again, or
    fail the run after MAX_CHUNK_ATTEMPTS. Returns the chunk to re-queue."""
    chunk = JudgeRunChunk.objects.select_related("run").filter(pk=chunk_id, holder=holder).first()
    if chunk is None:
        return None
    if chunk.attempts >= MAX_CHUNK_ATTEMPTS:
        _release(chunk, holder, JudgeRunChunk.Status.SKIPPED)
        finalize(chunk.run, status=Job.Status.FAILED, error=f"chunk {chunk.index} failed {chunk.attempts} times: {error}")
        return None
    JudgeRunChunk.objects.filter(pk=chunk.pk, holder=holder).update(
        status=JudgeRunChunk.Status.PENDING, holder="", lease_until=None
    )
    return chunk.pk


def write_outcomes(run: JudgeRun, judge: JudgeConfig, outcomes: Sequence[TraceOutcome],
                   step_pks: dict[int, list[int]], *, actor=None) -> None:
    """Upsert the labels (one per step and judge: the unique constraint is the
    last guard against duplicates), record what changed in LabelHistory, and
    store per-trace results, calls and the run's counters. Call inside a transaction."""
    now = timezone.now()
    ok = [o for o in outcomes if o.status == "ok"]
    existing = {
        label.step_id: label
        for label in StepLabel.objects.filter(
            kind=StepLabel.Kind.JUDGE, judge=judge, step__trace_id__in=[o.trace_pk for o in ok]
        )
    }
    created: list[StepLabel] = []
    changed: list[StepLabel] = []
    removed: list[StepLabel] = []
    history: list[LabelHistory] = []
    unchanged = 0

    def record(step_id: int, label: StepLabel | None, before, after) -> None:
        history.append(LabelHistory(step_id=step_id, label=label, kind=StepLabel.Kind.JUDGE, source_name=judge.name,
                                    actor=actor, at=now, before=before, after=after, via="judge run"))

    for outcome in ok:
        pks = step_pks.get(outcome.trace_pk, [])
        given = set()
        for lab in outcome.labels:
            step_id = pks[lab.step - 1]
            given.add(step_id)
            after = {"verdict": lab.verdict, "skeleton_refs": list(lab.skeleton_refs), "confidence": lab.confidence,
                     "reason": lab.reason}
            old = existing.get(step_id)
            if old is None:
                label = StepLabel(step_id=step_id, kind=StepLabel.Kind.JUDGE, judge=judge, verdict=lab.verdict,
                                  skeleton_refs=after["skeleton_refs"], confidence=lab.confidence, reason=lab.reason,
                                  created_at=now, updated_at=now)
                created.append(label)
                record(step_id, label, None, after)
                continue
            before = label_snapshot(old)
            if before == after:
                unchanged += 1
                continue
            old.verdict, old.skeleton_refs, old.confidence, old.reason = (
                lab.verdict, after["skeleton_refs"], lab.confidence, lab.reason
            )
            old.version += 1
            old.updated_at = now
            changed.append(old)
            record(step_id, old, before, after)
        # A step the judge left out this time keeps no stale verdict.
        for step_id in pks:
            old = existing.get(step_id)
            if step_id not in given and old is not None:
                removed.append(old)
                record(step_id, None, label_snapshot(old), None)

    StepLabel.objects.bulk_create(created, batch_size=1000)
    StepLabel.objects.bulk_update(changed, ["verdict", "skeleton_refs", "confidence", "reason", "version", "updated_at"],
                                  batch_size=500)
    if removed:
        StepLabel.objects.filter(pk__in=[label.pk for label in removed]).delete()
    LabelHistory.objects.bulk_create(history, batch_size=1000)

    results = [
        JudgeTraceResult(
            judge=judge, trace_id=o.trace_pk, run=run, status=JudgeTraceResult.Status.OK if o.status == "ok" else
            JudgeTraceResult.Status.FAILED, reason=o.reason[:5000], warnings=o.warnings,
            answer_correct=o.answer_correct, n_labels=len(o.labels), attempts=len(o.calls), cached=o.cached,
            prompt_tokens=o.prompt_tokens, completion_tokens=o.completion_tokens, cost_usd=o.cost_usd,
            judge_version=run.judge_version, prompt_version=run.prompt_version, updated_at=now,
        )
        for o in outcomes if o.status != "skipped"
    ]
    JudgeTraceResult.objects.bulk_create(
        results, batch_size=1000, update_conflicts=True, unique_fields=["judge", "trace"],
        update_fields=["run", "status", "reason", "warnings", "answer_correct", "n_labels", "attempts", "cached",
                       "prompt_tokens", "completion_tokens", "cost_usd", "judge_version", "prompt_version",
                       "updated_at"],
    )
    JudgeCall.objects.bulk_create(
        [JudgeCall(run=run, trace_id=o.trace_pk, attempt=c.attempt, output_mode=c.output_mode, outcome=c.outcome,
                   http_status=c.http_status, error=c.error[:2000], latency_ms=c.latency_ms,
                   prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens, cost_usd=c.cost_usd, at=now)
         for o in outcomes for c in o.calls],
        batch_size=1000,
    )
    JudgeRun.objects.filter(pk=run.pk).update(
        requests=F("requests") + sum(len(o.calls) for o in outcomes),
        cache_hits=F("cache_hits") + sum(o.cached for o in outcomes),
        prompt_tokens=F("prompt_tokens") + sum(o.prompt_tokens for o in outcomes),
        completion_tokens=F("completion_tokens") + sum(o.completion_tokens for o in outcomes),
        cost_usd=F("cost_usd") + sum(o.cost_usd for o in outcomes),
        warnings=F("warnings") + sum(len(o.warnings) for o in outcomes),
        labels_created=F("labels_created") + len(created),
        labels_changed=F("labels_changed") + len(changed),
        labels_unchanged=F("labels_unchanged") + unchanged,
        labels_removed=F("labels_removed") + len(removed),
    )


def finalize(run: JudgeRun, *, status: str | None = None, error: str = "") -> None:
    """End the run's job once (later calls do nothing) and tell scoring when labels changed."""
    run.refresh_from_db()
    job = Job.objects.get(pk=run.job_id)
    if job.status not in ACTIVE:
        return None
    if job.cancel_requested and status is None:
        status = Job.Status.CANCELLED
    if status is None:
        if job.done and job.failed == job.done:
            first = run.results.filter(status=JudgeTraceResult.Status.FAILED).values_list("reason", flat=True).first()
            status, error = Job.Status.FAILED, f"every trace failed; for example: {first or 'unknown reason'}"
        else:
            status = Job.Status.SUCCEEDED
    run.chunks.filter(status=JudgeRunChunk.Status.PENDING).update(status=JudgeRunChunk.Status.SKIPPED)
    if error:
        JudgeRun.objects.filter(pk=run.pk).update(stop_reason=error[:500])
    jobs.finish(job.pk, status=status, result=run.summary(), error=error)
    if run.labels_created or run.labels_changed or run.labels_removed:
        from annotation import signals

        study = run.judge.study
        transaction.on_commit(lambda: signals.data_changed.send(sender=Study, study=study, reason="judge"))
    return None


def resume_stalled(nodename: str | None = None, boot: str | None = None) -> list[int]:
    """Re-queue the work of unfinished runs whose worker is gone: chunks with
    an expired lease, and (when a worker starts) chunks held by an earlier
    process with this worker's node name. Returns the chunks queued."""
    now = timezone.now()
    queued = []
    dead = Q(status=JudgeRunChunk.Status.RUNNING, lease_until__lt=now)
    if nodename:
        dead |= Q(status=JudgeRunChunk.Status.RUNNING, holder__startswith=f"{nodename}/") & ~Q(
            holder=f"{nodename}/{boot}"
        )
    for run in JudgeRun.objects.filter(job__status__in=ACTIVE).select_related("job"):
        run.chunks.filter(dead).update(status=JudgeRunChunk.Status.PENDING, holder="", lease_until=None)
        if run.chunks.filter(status=JudgeRunChunk.Status.RUNNING).exists():
            continue  # a live worker is on it
        if run.job.cancel_requested:
            finalize(run)
            continue
        nxt = run.chunks.filter(status=JudgeRunChunk.Status.PENDING).order_by("index").values_list("pk", flat=True).first()
        if nxt is None:
            finalize(run)
        else:
            queue_chunk(nxt)
            queued.append(nxt)
    return queued


# --------------------------------------------------------------------------
# Reading


def disagreements(study: Study, judge: JudgeConfig) -> QuerySet[Step]:
    """Steps of ``study`` where ``judge`` gave a verdict that differs from at
    least one annotator's, annotated with ``judge_verdict``; for the
    adjudication queue (``.count()`` for the number)."""
    judge_labels = StepLabel.objects.filter(step=OuterRef("pk"), kind=StepLabel.Kind.JUDGE, judge=judge)
    return (
        Step.objects.filter(trace__study=study)
        .annotate(judge_verdict=Subquery(judge_labels.values("verdict")[:1]))
        .filter(judge_verdict__isnull=False)
        .filter(Exists(StepLabel.objects.filter(step=OuterRef("pk"), kind=StepLabel.Kind.HUMAN)
                       .exclude(verdict=OuterRef("judge_verdict"))))
        .order_by("trace_id", "index")
    )


def disagreement_counts(study: Study) -> dict[int, int]:
    """{judge id: steps where it disagrees with an annotator} in one query."""
    human_differs = StepLabel.objects.filter(step=OuterRef("step"), kind=StepLabel.Kind.HUMAN).exclude(
        verdict=OuterRef("verdict")
    )
    rows = (
        StepLabel.objects.filter(kind=StepLabel.Kind.JUDGE, judge__study=study)
        .filter(Exists(human_differs))
        .values("judge")
        .annotate(n=Count("pk"))
        .values_list("judge", "n")
    )
    return dict(rows)


def judge_list(study: Study) -> list[JudgeConfig]:
    """The study's judges with label and failure counts and their newest run, in a fixed number of queries."""
    newest = JudgeRun.objects.filter(judge=OuterRef("pk")).order_by("-created_at", "-pk")
    judges = list(
        JudgeConfig.objects.filter(study=study)
        .annotate(
            n_labels=Subquery(StepLabel.objects.filter(kind=StepLabel.Kind.JUDGE, judge=OuterRef("pk")).order_by()
                              .values("judge").annotate(n=Count("pk")).values("n")[:1]),
            n_failed=Subquery(JudgeTraceResult.objects.filter(judge=OuterRef("pk"), status="failed").order_by()
                              .values("judge").annotate(n=Count("pk")).values("n")[:1]),
            last_run_id=Subquery(newest.values("pk")[:1]),
        )
        .order_by("name")
    )
    runs = {r.pk: r for r in JudgeRun.objects.filter(pk__in=[j.last_run_id for j in judges if j.last_run_id])
            .select_related("job")}
    counts = disagreement_counts(study)
    for judge in judges:
        judge.last_run = runs.get(judge.last_run_id)
        judge.n_disagreements = counts.get(judge.pk, 0)
        judge.n_labels = judge.n_labels or 0
        judge.n_failed = judge.n_failed or 0
    return judges


def active_runs(judges: Iterable[JudgeConfig]) -> QuerySet[JudgeRun]:
    return JudgeRun.objects.filter(judge__in=list(judges), job__status__in=ACTIVE).select_related("job", "judge")
