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

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import F

from annotation.bulk import pk_map
from annotation.importing.pipeline import write_records
from annotation.importing.records import TraceIn
from annotation.importing.regime import host_of, messages_hash, regime
from annotation.models import Problem, Trace
from reasonlib.thinking import split_thinking
from runs import cache as run_cache
from runs.chat_template import ChatTemplateError, render_chat
from runs.clients import Accounting, ChunkWork, RunClient, Sizing
from runs.models import Run
from runs.thinking import ThinkingSettings, thinking_request, with_extra_body
from runs.transport import (
    PROMPT,
    CallRecord,
    Choice,
    Control,
    Endpoint,
    FatalRunError,
    Malformed,
    ModelPool,
    ModelRequest,
)
from runs.version import code_version
from subjects import core, prompts, thinking
from subjects.models import Generation, GenerationRun, SubjectModel

KIND = "generation"
JOB_KIND = "generation"  # Job.kind (annotation.Job.Kind lists the kinds annotation itself starts)
TARGET_REQUESTS_PER_CHUNK = 50
MIN_ROUNDS_PER_CHUNK = 8


# --------------------------------------------------------------------------
# Completions


@dataclass(frozen=True)
class Completion:
    text: str
    reasoning: str
    finish_reason: str
    model: str


def parse_completion(choice: Choice) -> Completion:
    """The completion of a choice; one with neither text nor reasoning is malformed (tried again)."""
    completion = Completion(choice.text, choice.reasoning, choice.finish_reason, choice.model)
    if not completion.text.strip() and not completion.reasoning.strip():
        raise Malformed("empty completion")
    return completion


# --------------------------------------------------------------------------
# Items


@dataclass(frozen=True)
class ProblemInput:
    pk: int
    problem_id: str
    statement: str
    samples: tuple[int, ...]  # the sample indices to generate


@dataclass
class SampleResult:
    sample: int
    seed: int | None
    messages_hash: str
    completion: Completion
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: int
    cost_usd: float
    cached: bool


@dataclass
class ProblemOutcome(Accounting):
    item: int
    status: str  # ok | failed | skipped
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    cached: bool = False
    output_mode: str = ""
    samples: list[SampleResult] = field(default_factory=list)
    failed_samples: int = 0


def endpoint_of(subject: SubjectModel) -> Endpoint:
    return Endpoint(
        base_url=subject.base_url, model=subject.model, api_key_env=subject.api_key_env, api=subject.api,
        output_mode=PROMPT,  # plain text: no response_format is ever sent
        concurrency=subject.concurrency, rate_limit_per_minute=subject.rate_limit_per_minute,
        max_retries=subject.max_retries, timeout_seconds=subject.timeout_seconds,
        price_input_per_mtok=subject.price_input_per_mtok, price_output_per_mtok=subject.price_output_per_mtok,
    )


def cache_scope(subject: SubjectModel) -> str:
    return f"subject:{subject.pk}:v{subject.version}"


class GenerationWork(ChunkWork):
    def __init__(self, record: GenerationRun) -> None:
        self.record = record
        self.subject = record.subject
        self.config: dict[str, Any] = record.run.config
        self.pool: ModelPool | None = None
        self.problem_ids: dict[int, str] = {}

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

    def _request(self, problem: ProblemInput, sample: int) -> tuple[ModelRequest, str]:
        cfg = self.config
        text = prompts.render(cfg["template"], problem=problem.statement, problem_id=problem.problem_id,
                              exemplars=cfg["exemplars"])
        body, digest = request_body(cfg, text, core.sample_seed(cfg["seed"], sample))
        request = ModelRequest(item=problem.pk, build=lambda _mode, body=body: dict(body),
                               parse_choice=parse_completion, api=cfg["api"], key_extra={"sample": sample})
        return request, digest

    def execute(self, inputs: Sequence[ProblemInput], control: Control) -> Iterator[ProblemOutcome]:
        store = run_cache.DbStore(cache_scope(self.subject), force=self.record.run.force)
        self.pool = ModelPool(endpoint_of(self.subject), cache_scope(self.subject), store, force=self.record.run.force)
        requests: list[ModelRequest] = []
        meta: dict[int, tuple[int, int | None, str]] = {}  # id(request) -> (sample, seed, messages hash)
        pending: dict[int, int] = {}
        outcomes: dict[int, ProblemOutcome] = {}
        for problem in inputs:
            outcomes[problem.pk] = ProblemOutcome(item=problem.pk, status="ok", cached=bool(problem.samples))
            pending[problem.pk] = len(problem.samples)
            for sample in problem.samples:
                request, digest = self._request(problem, sample)
                requests.append(request)
                meta[id(request)] = (sample, core.sample_seed(self.config["seed"], sample), digest)
        # Problems with nothing left to generate are done at once.
        for pk, n in pending.items():
            if n == 0:
                yield outcomes[pk]
        try:
            for result in self.pool.run(requests, control):
                out = outcomes[result.request.item]
                out.calls.extend(result.calls)
                sample, seed, digest = meta[id(result.request)]
                if result.status == "ok" and result.answer is not None:
                    ok_calls = [c for c in result.calls if c.outcome == "ok"]
                    out.samples.append(SampleResult(
                        sample, seed, digest, result.answer.value, result.answer.prompt_tokens,
                        result.answer.completion_tokens, ok_calls[-1].latency_ms if ok_calls else 0,
                        sum(c.cost_usd for c in result.calls), result.answer.cached,
                    ))
                    out.cached = out.cached and result.answer.cached
                else:
                    out.cached = False
                    if result.status == "failed":
                        out.failed_samples += 1
                        if out.status != "failed":
                            out.status, out.reason = "failed", f"sample {sample}: {result.reason}"
                    elif out.status == "ok":
                        out.status = "skipped"
                pending[result.request.item] -= 1
                if pending[result.request.item] == 0:
                    yield out
        except FatalRunError:
            # What finished of the unfinished problems is kept (committed as skipped items).
            for pk, n in pending.items():
                if n > 0:
                    outcomes[pk].status = "skipped"
                    yield outcomes[pk]
            raise

    # -- writing ---------------------------------------------------------------

    def commit(self, outcomes: Sequence[ProblemOutcome]) -> None:
        write_generations(self.record, self.subject, outcomes, self.problem_ids)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def trace_regime(subject_cfg: dict[str, Any], result: SampleResult, k: int) -> dict[str, Any]:
    """Every key of the inference regime (generation.md), then what ties the trace to its configuration."""
    return regime(
        model=result.completion.model or subject_cfg["model"],
        base_url_host=host_of(subject_cfg["base_url"]),
        api=subject_cfg["api"],
        prompt_template=subject_cfg["template_name"],
        prompt_template_version=subject_cfg["template_version"],
        messages_hash=result.messages_hash,
        temperature=subject_cfg["temperature"],
        top_p=subject_cfg["top_p"],
        seed=result.seed,
        max_tokens=subject_cfg["max_tokens"],
        stop=subject_cfg["stop"] or None,
        k=k,
        tool_access="none",
        continuation="none",  # a fresh completion, not the continuation of a prefix
        code_version=code_version(),
        subject_model=subject_cfg["name"],
        subject_model_version=subject_cfg["version"],
        configured_model=subject_cfg["model"],
        sample=result.sample,
        **thinking_regime(subject_cfg, result.completion, opened=prompt_opens_thought(subject_cfg)),
    )


def request_body(cfg: dict[str, Any], text: str, seed: int | None) -> tuple[dict[str, Any], str]:
    """The body of one completion request of a subject model's configuration snapshot for the rendered
    prompt ``text``, and the regime's messages hash of what is sent: decoding settings, the thinking
    settings (runs.thinking.thinking_request, as every call of a subject model), and the prompt as chat
    messages, a raw prompt, or -- for a completions-API model with a chat template -- the template's rendering."""
    think = thinking_request(ThinkingSettings.of(cfg), prompts.messages(cfg["system_prompt"], text))
    text = think.messages[-1]["content"]  # the user message, with the soft switch when the settings say so
    body: dict[str, Any] = {"temperature": cfg["temperature"], "max_tokens": cfg["max_tokens"]}
    for key, value in (("seed", seed), ("top_p", cfg["top_p"]), ("stop", cfg["stop"] or None)):
        if value is not None:
            body[key] = value
    with_extra_body(body, think.extra_body)  # fields outside the openai client's signature go through as they are
    if cfg["api"] == SubjectModel.Api.COMPLETIONS and (cfg.get("chat_template") or "").strip():
        body["prompt"] = render_template(cfg, think.messages, think.template_variables)
        return body, messages_hash(body["prompt"])
    if cfg["api"] == SubjectModel.Api.COMPLETIONS:
        body["prompt"] = prompts.completion_prompt(cfg["system_prompt"], text)
    else:
        body["messages"] = think.messages
    return body, prompts.prompt_hash(cfg["api"], cfg["system_prompt"], text)


def render_template(cfg: dict[str, Any], messages: list[dict[str, Any]], variables: dict[str, Any]) -> str:
    """The raw prompt of a completions-API model with a chat template: the chat rendered by the
    model's own template with the generation prompt, and ``enable_thinking`` when thinking is set
    (Qwen3's templates read it; a template that opens ``<think>`` makes the model start mid-thought)."""
    try:
        return render_chat(cfg["chat_template"], messages, add_generation_prompt=True,
                           eos_token=cfg.get("eos_token") or "", **variables)
    except ChatTemplateError as exc:
        raise FatalRunError(f"the subject model's chat template: {exc}") from None


def templated_prompt(cfg: dict[str, Any], text: str) -> str:
    """The chat template's rendering of the user ``text`` under the configuration's thinking settings."""
    think = thinking_request(ThinkingSettings.of(cfg), prompts.messages(cfg["system_prompt"], text))
    return render_template(cfg, think.messages, think.template_variables)


def prompt_opens_thought(cfg: dict[str, Any]) -> bool:
    """The completions prompt ends inside an opened thought (R1's and Qwen3's templates, a thinking
    template for SmolLM2): the generation prompt ends with ``<think>``."""
    if cfg.get("api") != SubjectModel.Api.COMPLETIONS or not (cfg.get("chat_template") or "").strip():
        return False
    try:
        return templated_prompt(cfg, "?").rstrip().endswith("<think>")
    except FatalRunError:
        return False


def thinking_regime(subject_cfg: dict[str, Any], completion: Completion, *, opened: bool = False) -> dict[str, Any]:
    """The thinking settings and, for a model that thinks, the thought's approximate token count (word
    pieces of the thought as the one parser, reasonlib.thinking, reads it from the completion)."""
    out = thinking.regime_fields(subject_cfg)
    split = split_thinking(completion.text, reasoning_field=completion.reasoning or None, opened=opened,
                           cut=completion.finish_reason == "length")
    if out or split.thought:
        out["thought_tokens"] = thinking.approx_tokens(split.thought)
    return out


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
