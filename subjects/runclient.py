"""Generation runs as a client of the run engine (runs.engine, docs/runs.md):
an item is a problem pk; its requests are the K samples (or, for
``--problems missing``, the samples it lacks). A chunk's completions become
Traces through the import pipeline (annotation.importing.pipeline.write_records),
so they are segmented, answer-extracted and checked exactly as imported
traces, with a Generation row each for tokens, latency, cost and truncation.

A completion is more than its text: the reasoning channel
(``reasoning_content`` / ``reasoning``), the finish reason (truncation) and
the model id the server reports. The transport hands the parser the whole
choice (runs.transport.Choice), and the response cache keeps all of it, so a
cache hit replays the completion exactly. The sample index goes into the cache
key (``key_extra``), never to the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import F

from annotation.bulk import pk_map
from annotation.importing.pipeline import write_records
from annotation.importing.records import TraceIn
from annotation.models import Problem, Trace
from runs import cache as run_cache
from runs.clients import ItemOutcome, RunClient, Sizing
from runs.models import Run
from runs.pooled import PooledWork
from runs.transport import ModelPool, ModelRequest, RequestOutcome
from subjects import core, prompts
from subjects.calls import (
    SampleResult,
    cache_scope,
    endpoint_of,
    parse_completion,
    prompt_opens_thought,
    request_body,
    trace_regime,
)
from subjects.models import Generation, GenerationRun, SubjectModel

KIND = "generation"
JOB_KIND = "generation"  # Job.kind (annotation.Job.Kind lists the kinds annotation itself starts)
TARGET_REQUESTS_PER_CHUNK = 50
MIN_ROUNDS_PER_CHUNK = 8


# --------------------------------------------------------------------------
# Items


@dataclass(frozen=True)
class ProblemInput:
    pk: int
    problem_id: str
    statement: str
    samples: tuple[int, ...]  # the sample indices to generate


@dataclass
class ProblemOutcome(ItemOutcome):
    """A problem's outcome: its answered samples, and how many failed."""

    samples: list[SampleResult] = field(default_factory=list)
    failed_samples: int = 0


class GenerationWork(PooledWork):
    """A problem's requests are its samples: the outcome keeps each answered sample and fails (naming the first
    failed sample) when one failed."""

    def __init__(self, record: GenerationRun) -> None:
        self.record = record
        self.subject = record.subject
        self.config: dict[str, Any] = record.run.config
        self.problem_ids: dict[int, str] = {}
        self.meta: dict[int, tuple[int, int | None, str]] = {}  # id(request) -> (sample, seed, messages hash)

    # -- loading ---------------------------------------------------------------

    def load(self, items: Sequence[int]) -> list[ProblemInput]:
        problems = {pk: (pid, statement) for pk, pid, statement in
                    Problem.objects.filter(pk__in=items, study_id=self.subject.study_id)
                    .values_list("pk", "problem_id", "statement")}
        k = self.record.samples
        forced = self.record.run.force
        have: dict[int, set[int]] = {}
        if self.record.scope == GenerationRun.Scope.MISSING or forced:
            for problem, sample in Generation.objects.filter(
                subject=self.subject, config_version=self.record.config_version, problem_id__in=list(problems)
            ).values_list("problem_id", "sample"):
                have.setdefault(problem, set()).add(sample)
        inputs = []
        for pk in items:
            if pk not in problems:
                continue  # deleted since the run started
            pid, statement = problems[pk]
            self.problem_ids[pk] = pid
            if forced:
                # Force means new samples: K more after the highest index this configuration has, so each
                # gets a new seed (seed + index) and a new trace id -- under the same ids every answer would
                # be dropped for the trace already kept ("sent 8, kept none"). A chunk commits whole, so a
                # re-delivered one finds none of its own samples and asks for the same indices again.
                start = max(have.get(pk, set()), default=-1) + 1
                wanted = tuple(range(start, start + k))
            else:
                wanted = tuple(s for s in range(k) if s not in have.get(pk, set()))
            inputs.append(ProblemInput(pk, pid, statement, wanted))
        return inputs

    # -- requests --------------------------------------------------------------

    def open_pool(self) -> ModelPool:
        store = run_cache.DbStore(cache_scope(self.subject), force=self.record.run.force)
        return ModelPool(endpoint_of(self.subject), cache_scope(self.subject), store, force=self.record.run.force)

    def outcome(self, problem: ProblemInput) -> ProblemOutcome:
        return ProblemOutcome(item=problem.pk, status="ok", cached=bool(problem.samples))

    def requests(self, problem: ProblemInput) -> list[ModelRequest]:
        cfg = self.config
        text = prompts.render(cfg["template"], problem=problem.statement, problem_id=problem.problem_id,
                              exemplars=cfg["exemplars"])
        asked = []
        for sample in problem.samples:
            seed = core.sample_seed(cfg["seed"], sample)
            body, digest = request_body(cfg, text, seed)
            request = ModelRequest(item=problem.pk, build=lambda _mode, body=body: dict(body),
                                   parse_choice=parse_completion, api=cfg["api"], key_extra={"sample": sample})
            self.meta[id(request)] = (sample, seed, digest)
            asked.append(request)
        return asked

    def take(self, out: ProblemOutcome, done: RequestOutcome) -> None:
        out.calls.extend(done.calls)
        sample, seed, digest = self.meta[id(done.request)]
        if done.status == "ok" and done.answer is not None:
            ok_calls = [c for c in done.calls if c.outcome == "ok"]
            out.samples.append(SampleResult(
                sample, seed, digest, done.answer.value, done.answer.prompt_tokens,
                done.answer.completion_tokens, ok_calls[-1].latency_ms if ok_calls else 0,
                sum(c.cost_usd for c in done.calls), done.answer.cached,
            ))
            out.cached = out.cached and done.answer.cached
            return
        if done.status == "failed":
            out.failed_samples += 1
        self.unanswered(out, done, f"sample {sample}")

    # -- writing ---------------------------------------------------------------

    def commit(self, outcomes: Sequence[ProblemOutcome]) -> None:
        write_generations(self.record, self.subject, outcomes, self.problem_ids)


def write_generations(record: GenerationRun, subject: SubjectModel, outcomes: Sequence[ProblemOutcome],
                      problem_ids: dict[int, str]) -> None:
    """The chunk's completions as traces (through the import pipeline) and
    their Generation rows, plus the run's counters. Inside the engine's transaction."""
    cfg = record.run.config
    version = record.config_version
    records: list[TraceIn] = []
    rows: list[tuple[int, SampleResult, str]] = []  # (problem pk, result, trace id)
    opened = prompt_opens_thought(cfg)
    for out in outcomes:
        for result in out.samples:
            c = result.completion
            tid = core.generated_trace_id(subject.name, version, problem_ids[out.item], result.sample)
            truncated = c.finish_reason == "length"
            meta: dict[str, Any] = {"finish_reason": c.finish_reason}
            if truncated:
                meta["truncated"] = True
            if opened:
                meta["prompt_opened_thought"] = True
            records.append(TraceIn.model_validate({
                "kind": "trace", "problem_id": problem_ids[out.item], "model": subject.name, "trace_id": tid,
                "raw": c.text, "thought": c.reasoning or None, "meta": meta,
                # The prompt's template opened the thought: the completion starts inside it, so a thought cut by
                # max_tokens (no tag at all) is read as an unclosed thought, not as an answer. A model that
                # returns no thought while the regime says thinking is on is flagged by the import.
                "prompt_opens_thought": opened,
                "regime": trace_regime(cfg, result, record.samples),
            }))
            rows.append((out.item, result, tid))
    created = unchanged = 0
    notes: list[str] = []
    if records:
        report = write_records(subject.study, records, actor=record.job.created_by)
        created, unchanged = report.traces_created, report.unchanged
        # Only a forced re-run can give another text for an existing id: the first trace is kept.
        if report.rejected:
            notes.append(f"{len(report.rejected)} completion(s) differ from the trace kept under the same id")
        trace_pks = pk_map(Trace, "trace_id", [tid for _p, _r, tid in rows], study=subject.study_id)
        Generation.objects.bulk_create(
            [Generation(subject=subject, config_version=version, problem_id=problem, sample=r.sample,
                        trace_id=trace_pks[tid], run=record, finish_reason=r.completion.finish_reason,
                        truncated=r.completion.finish_reason == "length", prompt_tokens=r.prompt_tokens,
                        completion_tokens=r.completion_tokens, latency_ms=r.latency_ms, cost_usd=r.cost_usd,
                        cached=r.cached)
             for problem, r, tid in rows if tid in trace_pks],
            ignore_conflicts=True,  # the first record of a sample stays, as its trace does
        )
    for note in notes:
        for out in outcomes:
            out.notes.append(note)
            break
    GenerationRun.objects.filter(pk=record.pk).update(
        traces_created=F("traces_created") + created, traces_unchanged=F("traces_unchanged") + unchanged,
        samples_failed=F("samples_failed") + sum(o.failed_samples for o in outcomes),
    )
    record.add_failures({problem_ids.get(o.item, str(o.item)): o.reason for o in outcomes if o.status == "failed"})


class GenerationClient(RunClient):
    kind = KIND
    noun = "problem"
    label = "Generation"
    url_name = "generation-run"

    record_model = GenerationRun
    record_related = ("subject__study",)

    def sizing(self, run: Run) -> Sizing:
        record = self.record(run)
        return Sizing(concurrency=record.subject.concurrency, requests_per_item=record.samples,
                      target_requests=TARGET_REQUESTS_PER_CHUNK, min_rounds=MIN_ROUNDS_PER_CHUNK)

    def open(self, run: Run) -> GenerationWork:
        return GenerationWork(self.record(run))
