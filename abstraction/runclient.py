"""Benchmark runs as a client of the run engine (runs.engine, docs/runs.md), kind "abstraction".

An item is an abstraction Item pk; its requests are its prompting modes (dp, cot), sent as the chat
of §5 to the subject model through the engine's ModelPool (retries, cache, budget, progress, cancel,
resume), asked by the shared pool loop (runs.pooled.PooledWork). With an LLM checker configured (a judge
configuration of the study), each answer is then checked by that model with the published checker prompt,
through a second pool in the same chunk (the loop's next round).
A chunk's answers become Traces through the import pipeline (one problem per item) and Result rows
with every verdict."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.db.models import F

from abstraction.core import checker
from abstraction.models import ITEM_DOMAIN, AbstractionRun, Item, Result
from abstraction.prompting import instance_of, render
from annotation.bulk import pk_map
from annotation.importing.pipeline import write_records
from annotation.importing.records import ProblemIn, TraceIn
from annotation.importing.regime import host_of, messages_hash, regime
from annotation.models import Problem, Trace
from judges.models import JudgeConfig
from judges.providers.openai_compat import endpoint as judge_endpoint
from runs import cache as run_cache
from runs.clients import ItemOutcome, RunClient, Sizing
from runs.models import Run
from runs.pooled import PooledWork
from runs.thinking import ThinkingSettings, thinking_request, with_extra_body
from runs.transport import Control, Endpoint, FatalRunError, ModelPool, ModelRequest, RequestOutcome
from runs.version import code_version
from subjects.calls import Completion, cache_scope, endpoint_of, parse_completion, thinking_regime
from subjects.models import SubjectModel

KIND = "abstraction"
JOB_KIND = "abstraction"
ITEMS_PER_CHUNK = 24


@dataclass
class ModeResult:
    mode: str
    digest: str
    completion: Completion
    cached: bool
    judge_text: str | None = None


@dataclass
class AbstractionOutcome(ItemOutcome):
    """An item's answered modes; ``waiting``: its modes not answered yet."""

    modes: list[ModeResult] = field(default_factory=list)
    waiting: int = 0


def subject_endpoint(subject: SubjectModel) -> Endpoint:
    # The subject's own endpoint, always through the chat API: the prompts are chat turns (§5).
    return replace(endpoint_of(subject), api="chat")


def judge_scope(judge: JudgeConfig) -> str:
    return f"abstraction-checker:{judge.pk}:v{judge.version}:{checker.CHECKER_VERSION}"


class AbstractionWork(PooledWork):
    """An item's requests are its modes, asked of the subject; with an LLM checker, each answer leads to the
    checker's request (asked in the next round, through the checker's own pool)."""

    def __init__(self, record: AbstractionRun) -> None:
        self.record = record
        self.subject = record.subject
        self.config: dict[str, Any] = record.run.config
        self.items: dict[int, Item] = {}
        self.meta: dict[int, tuple[str, str]] = {}  # id(subject request) -> (mode, messages hash)
        self.checks: dict[int, ModeResult] = {}  # id(checker request) -> the answer it checks
        self.checker: ModelPool | None = None

    def load(self, items: Sequence[int]) -> list[Item]:
        found = {i.pk: i for i in Item.objects.filter(pk__in=items, benchmark=self.record.benchmark)}
        self.items = found
        return [found[pk] for pk in items if pk in found]

    def open_pool(self) -> ModelPool:
        force = self.record.run.force
        pool = ModelPool(subject_endpoint(self.subject), cache_scope(self.subject),
                         run_cache.DbStore(cache_scope(self.subject), force=force), force=force)
        if self.record.judge_id:
            judge = self.record.judge
            self.checker = ModelPool(judge_endpoint(judge), judge_scope(judge),
                                     run_cache.DbStore(judge_scope(judge), force=force), force=force)
        return pool

    def pool_of(self, request: ModelRequest) -> ModelPool:
        return self.checker if id(request) in self.checks and self.checker is not None else super().pool_of(request)

    def _request(self, item: Item, mode: str) -> ModelRequest:
        cfg = self.config
        inst = instance_of(item)
        if cfg.get("max_examples") is not None:
            # A cheap probe on a slow server: the first N worked examples only (recorded in the regime).
            inst = replace(inst, examples=inst.examples[:cfg["max_examples"]])
        # The subject model's thinking settings, as in every call of it (runs.thinking): the snapshot's, or
        # for a run started before they were snapshotted, none.
        think = thinking_request(ThinkingSettings.of(cfg), render(inst, mode, cfg["prompts"]))
        msgs = think.messages
        body: dict[str, Any] = {"messages": msgs, "temperature": cfg["temperature"], "max_tokens": cfg["max_tokens"]}
        with_extra_body(body, think.extra_body)
        for key in ("seed", "top_p"):
            if cfg.get(key) is not None:
                body[key] = cfg[key]
        if cfg.get("stop"):
            body["stop"] = cfg["stop"]
        request = ModelRequest(item=item.pk, build=lambda _mode, body=body: dict(body), parse_choice=parse_completion,
                               api="chat")
        self.meta[id(request)] = (mode, messages_hash(msgs))
        return request

    def _check(self, item: int, mr: ModeResult) -> ModelRequest:
        """The published LLM checker's request on one answer (spec §7)."""
        judge = self.record.judge
        body = {"messages": checker.judge_messages(mr.completion.text, self.items[item].answer),
                "temperature": judge.temperature, "max_tokens": min(judge.max_tokens or 256, 256)}
        request = ModelRequest(item=item, build=lambda _m, body=body: dict(body), parse_choice=parse_completion,
                               api="chat")
        self.checks[id(request)] = mr
        return request

    def outcome(self, item: Item) -> AbstractionOutcome:
        return AbstractionOutcome(item=item.pk, status="ok", cached=True, waiting=len(self.config["modes"]))

    def requests(self, item: Item) -> list[ModelRequest]:
        return [self._request(item, mode) for mode in self.config["modes"]]

    def take(self, out: AbstractionOutcome, done: RequestOutcome) -> list[ModelRequest]:
        out.calls.extend(done.calls)
        mr = self.checks.get(id(done.request))
        if mr is not None:
            if done.status == "ok" and done.answer is not None:
                mr.judge_text = done.answer.value.text
            # A checker that failed counts as "incorrect", as the repository's does; the verdict stays null.
            return []
        out.waiting -= 1
        mode, digest = self.meta[id(done.request)]
        if done.status == "ok" and done.answer is not None:
            mr = ModeResult(mode, digest, done.answer.value, done.answer.cached)
            out.modes.append(mr)
            out.cached = out.cached and done.answer.cached
            return [self._check(out.item, mr)] if self.checker is not None else []
        self.unanswered(out, done, mode)
        return []

    def interrupted(self, out: AbstractionOutcome) -> None:
        # An item that waits only for its checks keeps its status: its answers are stored unchecked.
        if out.waiting:
            out.status = "skipped"

    def execute(self, inputs: Sequence[Item], control: Control) -> Iterator[AbstractionOutcome]:
        # A chunk's items are yielded once every check of the chunk is done, and a fatal error while
        # checking yields none: an answer is never stored as unchecked because the checker's server failed (a
        # resumed run asks again, the answers from the cache). One while asking the subject keeps what finished.
        held: list[AbstractionOutcome] = []
        try:
            for out in super().execute(inputs, control):
                held.append(out)
        except FatalRunError:
            if self.round == 0:
                yield from held
            raise
        yield from held

    def commit(self, outcomes: Sequence[AbstractionOutcome]) -> None:
        write_results(self.record, outcomes, self.items)

    def close(self) -> None:
        super().close()
        if self.checker is not None:
            self.checker.close()


def trace_regime(cfg: dict[str, Any], mr: ModeResult) -> dict[str, Any]:
    return regime(
        model=mr.completion.model or cfg["model"], base_url_host=host_of(cfg["base_url"]), api="chat",
        prompt_template=f"abstraction-{mr.mode}", prompt_template_version=cfg["prompts"]["templates"].get(
            "abstraction-cot" if mr.mode == "cot" else "abstraction-dp"),
        messages_hash=mr.digest, temperature=cfg["temperature"], top_p=cfg.get("top_p"), seed=cfg.get("seed"),
        max_tokens=cfg["max_tokens"], stop=cfg.get("stop") or None, k=1, tool_access="none", continuation="none",
        code_version=code_version(), subject_model=cfg["name"], subject_model_version=cfg["version"],
        configured_model=cfg["model"], prompting=mr.mode, benchmark=cfg["benchmark"],
        generator_version=cfg["generator_version"], seed_benchmark=cfg["benchmark_seed"],
        remap_mode=cfg["remap_mode"], checker=cfg["checker"], max_examples=cfg.get("max_examples"),
        **thinking_regime(cfg, mr.completion),
    )


def write_results(record: AbstractionRun, outcomes: Sequence[AbstractionOutcome], items: dict[int, Item]) -> None:
    cfg = record.run.config
    study = record.benchmark.study
    bench = record.benchmark.name
    records: list[ProblemIn | TraceIn] = []
    needs_problem = [items[o.item] for o in outcomes if o.modes and items[o.item].problem_id is None]
    for item in needs_problem:
        records.append(ProblemIn(kind="problem", problem_id=f"abs/{bench}/{item.sub_dataset}/{item.instance}",
                                 statement=f"{item.hint}Question: {item.question}".strip(), gold_answer=item.answer,
                                 domain=ITEM_DOMAIN, tags=[item.category, item.variant]))
    rows = []
    for out in outcomes:
        item = items[out.item]
        for mr in out.modes:
            tid = f"abs/{bench}/{cfg['label']}/v{cfg['version']}/{mr.mode}/{item.sub_dataset}/{item.instance}"
            det = checker.check(mr.completion.text, item.answer, numeric=checker.is_numeric(item.sub_dataset,
                                                                                            item.category))
            records.append(TraceIn(kind="trace", problem_id=f"abs/{bench}/{item.sub_dataset}/{item.instance}",
                                   model=cfg["label"], trace_id=tid, raw=mr.completion.text,
                                   thought=mr.completion.reasoning or None, answer=det.extracted,
                                   answer_correct=det.correct,
                                   meta={"finish_reason": mr.completion.finish_reason,
                                         "abstraction": {"sub_dataset": item.sub_dataset, "instance": item.instance,
                                                         "mode": mr.mode}},
                                   regime=trace_regime(cfg, mr)))
            rows.append((item, mr, tid, det))
    record.add_failures({str(items[o.item]): o.reason for o in outcomes if o.status == "failed"})
    if not records:
        return
    write_records(study, records, actor=record.job.created_by)
    if needs_problem:
        pks = pk_map(Problem, "problem_id", [f"abs/{bench}/{i.sub_dataset}/{i.instance}" for i in needs_problem],
                     study=study.pk)
        for item in needs_problem:
            item.problem_id = pks.get(f"abs/{bench}/{item.sub_dataset}/{item.instance}")
        Item.objects.bulk_update(needs_problem, ["problem"])
    traces = pk_map(Trace, "trace_id", [tid for _i, _m, tid, _d in rows], study=study.pk)
    use_llm = cfg["checker"] == Result.Checker.LLM
    results = []
    for item, mr, tid, det in rows:
        llm = checker.judge_verdict(mr.judge_text) if mr.judge_text is not None else None
        correct = (llm if llm is not None else False) if use_llm else det.correct
        results.append(Result(item=item, model=cfg["label"], mode=mr.mode, trace_id=traces.get(tid),
                              output=mr.completion.text, extracted=det.extracted or "", det_correct=det.correct,
                              llm_correct=llm, llm_output=mr.judge_text or "", correct=correct,
                              checker=cfg["checker"], regime=trace_regime(cfg, mr)))
    # A re-run (forced) replaces the verdicts of the same (item, model, mode).
    Result.objects.bulk_create(results, update_conflicts=True, unique_fields=["item", "model", "mode"],
                               update_fields=["trace", "output", "extracted", "det_correct", "llm_correct",
                                              "llm_output", "correct", "checker", "regime"])
    AbstractionRun.objects.filter(pk=record.pk).update(results_created=F("results_created") + len(results))


class AbstractionClient(RunClient):
    kind = KIND
    noun = "item"
    label = "Abstraction"

    def page(self, run: Run) -> str | None:
        from django.urls import reverse

        return reverse("abstraction-table", args=[run.job.study_id])

    record_model = AbstractionRun
    record_related = ("subject", "benchmark__study", "judge")

    def sizing(self, run: Run) -> Sizing:
        # Both modes of an item are its requests, yet a chunk holds ITEMS_PER_CHUNK items whatever the modes.
        return Sizing(concurrency=self.record(run).subject.concurrency, target_requests=ITEMS_PER_CHUNK)

    def open(self, run: Run) -> AbstractionWork:
        return AbstractionWork(self.record(run))
