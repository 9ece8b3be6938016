"""An LLM judge tags the functions of steps (docs/judges.md, "Step-function tags"): the runs client of kind
"step-tags". One request per trace through the engine's ModelPool (retries, the response cache, the budget,
concurrency, cancel and resume are the engine's); this module starts the run, renders the prompt
(judges.tag_protocol), and replaces the judge's tags of each trace it answered (annotation.StepTag of kind
judge) in the chunk's transaction.

Only an LLM judge tags: the mechanistic verifier checks arithmetic and says nothing of what a step is for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import F
from django.utils import timezone

from annotation import scopes
from annotation.models import Step, StepTag, Study, Trace
from judges import tag_protocol
from judges.models import JudgeConfig, TagRun
from judges.providers.openai_compat import cache_scope as judge_cache_scope
from judges.providers.openai_compat import endpoint
from runs import cache, engine
from runs.clients import ItemOutcome, RunClient, Sizing
from runs.models import Run
from runs.params import ParamError
from runs.pooled import PooledWork, Unaskable
from runs.transport import ModelPool, ModelRequest

KIND = "step-tags"
CHUNK = 50


def cache_scope(judge: JudgeConfig) -> str:
    """The judge's own scope (its version and prompt version) and the tagging protocol's name: a verdict
    answer is never replayed as a tagging one."""
    return f"{judge_cache_scope(judge)}:{tag_protocol.SCHEMA_NAME}"


def check_judge(judge: JudgeConfig) -> None:
    if judge.provider != JudgeConfig.Provider.LLM:
        raise ParamError("judge", f"{judge.name} is a {judge.provider} judge; only an LLM judge tags the "
                                  "functions of steps")


def do_start_tagging(judge: JudgeConfig, *, trace_pks: Sequence[int] | None = None, user=None, force: bool = False,
                     budget_usd: float | None = None, queue: bool = True) -> TagRun:
    """Start a tagging run of ``judge`` over ``trace_pks`` (the study's traces when None) (runs.engine.start)."""
    check_judge(judge)
    traces = Trace.objects.of_study(judge.study_id)
    if trace_pks is not None:
        traces = traces.filter(pk__in=list(trace_pks))

    def busy() -> str | None:
        active = TagRun.objects.filter(judge=judge, job__status__in=engine.ACTIVE).first()
        return active and (f"judge {judge.name} already has tagging run {active.pk} in progress (job "
                           f"{active.job_id}); wait for it or cancel it")

    return engine.start(
        KIND, study_id=judge.study_id, job_kind=KIND, user=user, busy=busy, force=force, budget_usd=budget_usd,
        queue=queue, params={"judge": judge.name, "judge_id": judge.pk, "force": force, "budget_usd": budget_usd},
        config={"judge": judge.name, "judge_version": judge.version, "model": judge.model,
                "temperature": judge.temperature, "protocol": tag_protocol.SCHEMA_NAME,
                "max_steps": tag_protocol.MAX_STEPS, "cache_scope": cache_scope(judge)},
        record=lambda job, run: TagRun.objects.create(job=job, run=run, judge=judge, judge_version=judge.version),
        items=lambda _row: list(traces.order_by("pk").values_list("pk", flat=True)))


def start_for_study(study: Study, judge: JudgeConfig, *, cohort: str | None, trace_ids: Sequence[str] | None,
                    **kw) -> TagRun:
    """The traces a door names: a cohort, trace ids (their ``trace_id``), both (the traces in both), or the
    whole study."""
    pks: set[int] | None = None
    if cohort:
        pks = set(Trace.objects.filter(pk__in=scopes.cohort_traces(study, cohort)).values_list("pk", flat=True))
    if trace_ids:
        named = set(Trace.objects.of_study(study).filter(trace_id__in=list(trace_ids)).values_list("pk", flat=True))
        pks = named if pks is None else pks & named
    if pks is not None and not pks:
        raise ParamError("trace_ids" if trace_ids else "cohort", "names none of the study's traces")
    return do_start_tagging(judge, trace_pks=sorted(pks) if pks is not None else None, **kw)


@dataclass
class TraceIn:
    pk: int
    problem: str
    steps: list[str]


def load_inputs(trace_pks: Sequence[int]) -> list[TraceIn]:
    traces = dict(Trace.objects.filter(pk__in=list(trace_pks)).values_list("pk", "problem__statement"))
    steps: dict[int, list[str]] = {pk: [] for pk in traces}
    for trace_pk, text in Step.objects.filter(trace_id__in=list(traces)).order_by("trace_id", "index").values_list(
            "trace_id", "text"):
        steps[trace_pk].append(text)
    return [TraceIn(pk, traces[pk], steps[pk]) for pk in trace_pks if pk in traces]


def write_tags(record: TagRun, answers: dict[int, dict[int, list[str]]]) -> None:
    """Replace the judge's tags of each answered trace (trace pk -> step number -> tags) and count the
    change. Call inside the chunk's transaction."""
    judge = record.judge
    step_pks = {(t, i): pk for pk, t, i in Step.objects.filter(trace_id__in=list(answers)).values_list(
        "pk", "trace_id", "index")}
    have = set(StepTag.objects.filter(kind=StepTag.Kind.JUDGE, judge=judge, step__trace_id__in=list(answers))
               .values_list("step_id", "tag"))
    want = {(step_pks[(t, i)], tag) for t, steps in answers.items() for i, tags in steps.items() for tag in tags
            if (t, i) in step_pks}
    gone = have - want
    now = timezone.now()
    for step_id, tag in gone:
        StepTag.objects.filter(kind=StepTag.Kind.JUDGE, judge=judge, step_id=step_id, tag=tag).delete()
    StepTag.objects.bulk_create([StepTag(step_id=step_id, kind=StepTag.Kind.JUDGE, judge=judge, tag=tag, created_at=now)
                                 for step_id, tag in sorted(want - have)])
    TagRun.objects.filter(pk=record.pk).update(traces_tagged=F("traces_tagged") + len(answers),
                                               tags_created=F("tags_created") + len(want - have),
                                               tags_removed=F("tags_removed") + len(gone))


class TagWork(PooledWork):
    def __init__(self, record: TagRun) -> None:
        self.record = record
        self.judge = record.judge

    def load(self, items: Sequence[int]) -> list[TraceIn]:
        return load_inputs(items)

    def open_pool(self) -> ModelPool:
        force = self.record.run.force
        return ModelPool(endpoint(self.judge), cache_scope(self.judge),
                         cache.DbStore(f"tags:{self.judge.pk}", force=force), force=force)

    def request(self, trace: TraceIn) -> ModelRequest:
        n = len(trace.steps)
        if not n:
            raise Unaskable("the trace has no steps; nothing to tag")
        if n > tag_protocol.MAX_STEPS:
            raise Unaskable(f"the trace has {n} steps; one tagging request covers at most {tag_protocol.MAX_STEPS}")
        judge = self.judge
        msgs = tag_protocol.messages(trace.problem, trace.steps)
        tokens = tag_protocol.max_tokens(n, judge.max_tokens)

        def build(output_mode: str) -> dict:
            return {"messages": msgs, "temperature": judge.temperature, "max_tokens": tokens}

        return ModelRequest(item=trace.pk, build=build, parse=lambda content: tag_protocol.parse(content, n),
                            schema=tag_protocol.schema(n), schema_name=tag_protocol.SCHEMA_NAME)

    def warnings(self, result: tag_protocol.TagAnswer) -> list[str]:
        return list(result.warnings)

    def commit(self, outcomes: Sequence[ItemOutcome]) -> None:
        write_tags(self.record, {o.item: o.result.tags for o in outcomes if o.status == "ok"})
        failed = {str(o.item): o.reason for o in outcomes if o.status == "failed"}
        if failed:
            self.record.add_failures(failed)


class TagClient(RunClient):
    kind = KIND
    label = "Step-function tags"
    noun = "trace"
    record_model = TagRun
    record_related = ("judge__study",)

    def sizing(self, run: Run) -> Sizing:
        # Whole rounds of `concurrency` requests, as the LLM judge's runs.
        return Sizing(concurrency=max(1, self.record(run).judge.concurrency), target_requests=CHUNK)

    def open(self, run: Run) -> TagWork:
        return TagWork(self.record(run))

