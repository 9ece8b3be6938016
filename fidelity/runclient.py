"""Fidelity runs as a client of the run engine (kind "fidelity", docs/runs.md).

An item is a problem of the suite (an original or a variant). Its forward request is the
subject model's own generation request (same template, decoding, cache scope and whole-choice parsing
as a generation run: subjects.calls), so a variant is asked exactly as its original. For an
original, when the run's axes include ``backward``, a second request follows once the forward
answer is known: the backward reconstruction prompt of spec §6 with the same decoding.
Forward completions become Traces through the import pipeline (trace id
``fid/<subject>/v<version>/<problem_id>``); every answer is also an ``Output`` row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from annotation.bulk import pk_map
from annotation.importing.pipeline import write_records
from annotation.importing.records import TraceIn
from annotation.models import Problem, Trace
from fidelity.models import FidelityRun, Output
from reasonlib.answers import extract_answer
from reasonlib.thinking import split_thinking
from runs import cache as run_cache
from runs.clients import ItemOutcome, RunClient, Sizing
from runs.models import Run
from runs.pooled import PooledWork
from runs.transport import ModelPool, ModelRequest, RequestOutcome
from subjects import prompts
from subjects.calls import (
    Completion,
    SampleResult,
    cache_scope,
    endpoint_of,
    parse_completion,
    prompt_opens_thought,
    request_body,
    trace_regime,
)
from subjects.models import SubjectModel

KIND = "fidelity"
JOB_KIND = "fidelity"
TARGET_REQUESTS_PER_CHUNK = 40
BACKWARD_PROMPT_VERSION = 1
# Spec §6 [I]: the paper gives no prompt.
BACKWARD_PROMPT = ("Answer: {answer}\nStarting from this answer, reconstruct step by step the reasoning that leads "
                   "back to the question it answers. Write one step per line as 'Step k: ...'. Finish with "
                   "'Question: ...'.")


def trace_id(subject_name: str, version: int, problem_id: str) -> str:
    return f"fid/{subject_name}/v{version}/{problem_id}"


@dataclass(frozen=True)
class ItemInput:
    pk: int
    problem_id: str
    statement: str
    backward: bool  # an original of a run with the backward axis


@dataclass
class FidelityOutcome(ItemOutcome):
    """An item's forward answer and, for an original of a run with the backward axis, its backward one."""

    forward: SampleResult | None = None
    backward: SampleResult | None = None


class FidelityWork(PooledWork):
    """An item's forward request; an original of a run with the backward axis asks its backward
    reconstruction once its forward answer is known (the next round)."""

    def __init__(self, record: FidelityRun) -> None:
        self.record = record
        self.subject: SubjectModel = record.subject
        self.config: dict[str, Any] = record.run.config
        self.ids: dict[int, str] = {}
        self.meta: dict[int, tuple[str, str, ItemInput]] = {}  # id(request) -> (slot, messages hash, item)

    def load(self, items: Sequence[int]) -> list[ItemInput]:
        rows = {pk: (pid, st) for pk, pid, st in Problem.objects.filter(
            pk__in=items, study_id=self.subject.study_id).values_list("pk", "problem_id", "statement")}
        originals = set(self.config.get("originals", [])) if "backward" in self.record.axes else set()
        out = []
        for pk in items:
            if pk in rows:
                self.ids[pk] = rows[pk][0]
                out.append(ItemInput(pk, rows[pk][0], rows[pk][1], pk in originals))
        return out

    def open_pool(self) -> ModelPool:
        scope = cache_scope(self.subject)
        force = self.record.run.force
        return ModelPool(endpoint_of(self.subject), scope, run_cache.DbStore(scope, force=force), force=force)

    def _request(self, item: ItemInput, text: str, slot: str) -> ModelRequest:
        # The generation run's body (subjects.calls.request_body: thinking settings included), so the
        # original's cached answer is shared.
        body, digest = request_body(self.config, text, self.config["seed"])
        # Sample 0 of the generation run's cache key: a cached answer of the original is shared.
        req = ModelRequest(item=item.pk, build=lambda _mode, body=body: dict(body), parse_choice=parse_completion,
                           api=self.config["api"], key_extra={"sample": 0})
        self.meta[id(req)] = (slot, digest, item)
        return req

    def outcome(self, item: ItemInput) -> FidelityOutcome:
        return FidelityOutcome(item=item.pk, status="ok", cached=True)

    def requests(self, item: ItemInput) -> list[ModelRequest]:
        cfg = self.config
        return [self._request(item, prompts.render(cfg["template"], problem=item.statement,
                                                   problem_id=item.problem_id, exemplars=cfg["exemplars"]), "forward")]

    def take(self, out: FidelityOutcome, done: RequestOutcome) -> list[ModelRequest]:
        slot, digest, item = self.meta[id(done.request)]
        out.calls.extend(done.calls)
        if done.status != "ok" or done.answer is None:
            self.unanswered(out, done, slot)
            return []
        ok_calls = [c for c in done.calls if c.outcome == "ok"]
        setattr(out, slot, SampleResult(
            0, self.config["seed"], digest, done.answer.value, done.answer.prompt_tokens,
            done.answer.completion_tokens, ok_calls[-1].latency_ms if ok_calls else 0,
            sum(c.cost_usd for c in done.calls), done.answer.cached))
        out.cached = out.cached and done.answer.cached
        if slot != "forward" or not item.backward:
            return []
        # The backward reconstruction starts from the forward answer, so it waits for it. The answer channel
        # only: an inline thought's numbers are not the answer.
        text = answer_text(done.answer.value, opened=prompt_opens_thought(self.config))
        answer = extract_answer(text) or text.strip()[-200:]
        return [self._request(item, BACKWARD_PROMPT.format(answer=answer), "backward")]

    def interrupted(self, out: FidelityOutcome) -> None:
        # An original whose forward answer came keeps it (written as an output) though its backward did not.
        if out.forward is None and out.status == "ok":
            out.status = "skipped"

    def commit(self, outcomes: Sequence[FidelityOutcome]) -> None:
        write_outputs(self.record, outcomes, self.ids)


def answer_text(completion: Completion, *, opened: bool) -> str:
    """The answer channel of a completion, as the one parser (reasonlib.thinking) reads it."""
    return split_thinking(completion.text, reasoning_field=completion.reasoning or None, opened=opened,
                          cut=completion.finish_reason == "length").answer


def write_outputs(record: FidelityRun, outcomes: Sequence[FidelityOutcome], ids: dict[int, str]) -> None:
    """Forward completions as traces (the import pipeline) and every answer as an Output row."""
    subject, cfg, version = record.subject, record.run.config, record.config_version
    records, rows = [], []
    # As in generation (subjects.runclient.write_generations): a chat template that opens <think> makes the
    # completion start mid-thought, and the import must know it to split thought from answer.
    opened = prompt_opens_thought(cfg)
    for out in outcomes:
        if out.forward is not None:
            c: Completion = out.forward.completion
            tid = trace_id(subject.name, version, ids[out.item])
            meta: dict[str, Any] = {"finish_reason": c.finish_reason, "fidelity_run": record.pk}
            if c.finish_reason == "length":
                meta["truncated"] = True
            if opened:
                meta["prompt_opened_thought"] = True
            records.append(TraceIn.model_validate({
                "kind": "trace", "problem_id": ids[out.item], "model": subject.name, "trace_id": tid, "raw": c.text,
                "thought": c.reasoning or None, "meta": meta, "prompt_opens_thought": opened,
                "regime": trace_regime(cfg, out.forward, 1),
            }))
            rows.append((out.item, Output.Role.FORWARD, out.forward, tid))
        if out.backward is not None:
            rows.append((out.item, Output.Role.BACKWARD, out.backward, None))
    traces: dict[str, int] = {}
    if records:
        write_records(subject.study, records, actor=record.job.created_by)
        traces = pk_map(Trace, "trace_id",
                        [r[3] for r in rows if r[3]], study=subject.study_id)
    Output.objects.bulk_create(
        [Output(fid_run=record, problem_id=pk, role=role, trace_id=traces.get(tid) if tid else None,
                text=r.completion.text, finish_reason=r.completion.finish_reason, cached=r.cached)
         for pk, role, r, tid in rows],
        ignore_conflicts=True,
    )
    record.add_failures({ids.get(o.item, str(o.item)): o.reason for o in outcomes if o.status == "failed"})


class FidelityClient(RunClient):
    kind = KIND
    noun = "problem"
    label = "Fidelity"
    url_name = "fidelity-report"
    record_model = FidelityRun
    record_related = ("subject__study", "suite")

    def __init__(self, planner: Callable[[FidelityRun], list[int]] | None = None) -> None:
        # The planning of a queued run (fidelity.running.plan_run_items), given by the app's ready():
        # it makes variants through the services, which import this module.
        self.planner = planner

    def plan(self, run: Run) -> list[int]:
        if self.planner is None:
            return super().plan(run)
        return self.planner(self.record(run))

    def sizing(self, run: Run) -> Sizing:
        # An original with the backward axis asks twice.
        record = self.record(run)
        return Sizing(concurrency=record.subject.concurrency, target_requests=TARGET_REQUESTS_PER_CHUNK,
                      requests_per_item=2 if "backward" in record.axes else 1)

    def open(self, run: Run) -> FidelityWork:
        return FidelityWork(self.record(run))

