"""An LLM judge on any OpenAI-compatible chat completions endpoint: one
request per trace (or per window of a long one) through the run engine's ModelPool (runs.transport), which
owns retries, backoff, the rate limit, the response cache, the structured
output fallback and the accounting, asked by the shared pool loop (runs.pooled.PooledRequests). This module
only renders the judge's prompt and reads its answer (judges.protocol).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

from judges import protocol, windowing
from judges.providers.base import Control, JudgeProvider, TraceInput, TraceOutcome
from runs.clients import Sizing
from runs.pooled import PooledRequests
from runs.transport import AUTO, Endpoint, ModelPool, ModelRequest, RequestOutcome


def endpoint(config) -> Endpoint:
    return Endpoint(
        base_url=config.base_url, model=config.model, api_key_env=config.api_key_env, output_mode=config.output_mode,
        output_mode_resolved=config.output_mode_resolved, concurrency=config.concurrency,
        rate_limit_per_minute=config.rate_limit_per_minute, max_retries=config.max_retries,
        timeout_seconds=config.timeout_seconds, price_input_per_mtok=config.price_input_per_mtok,
        price_output_per_mtok=config.price_output_per_mtok,
    )


def cache_scope(config) -> str:
    """What besides the request decides a judge's answer: the judge, its version and its prompt version."""
    return f"judge:{config.pk}:v{config.version}:p{config.prompt_version}"


class OpenAICompatibleProvider(PooledRequests, JudgeProvider):
    """A trace's requests are its windows (one unless it does not fit the judge's context); the shared pool loop
    (runs.pooled) asks them and folds each trace's windows into its outcome."""

    def __init__(self, config, store=None, *, force: bool = False) -> None:
        super().__init__(config, store, force=force)
        # id(request) -> (its trace's windows, this window's index) for traces judged in windows
        self.windowed: dict[int, tuple[list[windowing.Window], int]] = {}
        self.parts: dict[int, dict[int, RequestOutcome]] = {}  # trace pk -> its windows' outcomes so far

    @classmethod
    def sizing(cls, config) -> Sizing:
        # A whole number of rounds of `concurrency` requests: no idle slots at the end of a chunk.
        return Sizing(concurrency=max(1, config.concurrency), target_requests=cls.chunk_size)

    def open_pool(self) -> ModelPool:
        return ModelPool(endpoint(self.config), cache_scope(self.config), self.store, force=self.force)

    def request(self, trace: TraceInput) -> ModelRequest:
        cfg = self.config

        # The trace's own schema and token budget: a grammar-constrained server
        # stops when the JSON closes after at most N entries (docs/judges.md).
        max_tokens = protocol.effective_max_tokens(cfg.max_tokens, len(trace.steps))

        def build(output_mode: str) -> dict:
            return {"messages": protocol.messages(cfg.prompt_template, trace, cfg.mode, output_mode),
                    "temperature": cfg.temperature, "max_tokens": max_tokens}

        def parse(content: str) -> protocol.ParsedOutput:
            return protocol.parse_output(content, len(trace.steps), len(trace.skeleton), cfg.mode)

        return ModelRequest(item=trace.trace_pk, build=build, parse=parse, schema=protocol.trace_schema(trace, cfg.mode),
                            schema_name=protocol.SCHEMA_NAME)

    def windows(self, trace: TraceInput) -> list[windowing.Window]:
        """The windows a trace is judged in: one unless the judge names its
        context window and the trace's prompt would not fit it."""
        return plan_trace_windows(self.config, trace)

    def item_id(self, trace: TraceInput) -> int:
        return trace.trace_pk

    def outcome(self, trace: TraceInput) -> TraceOutcome:
        # A trace without steps asks nothing: it is done at once, with this warning.
        return TraceOutcome(trace.trace_pk, "ok", warnings=[] if trace.steps else ["the trace has no steps; nothing to judge"])

    def requests(self, trace: TraceInput) -> list[ModelRequest]:
        if not trace.steps:
            return []
        wins = self.windows(trace)
        if len(wins) == 1:
            return [self.request(trace)]
        asked = []
        for i, w in enumerate(wins):
            request = self.request(dataclasses.replace(trace, steps=trace.steps[w.start - 1:w.end]))
            self.windowed[id(request)] = (wins, i)
            asked.append(request)
        return asked

    def take(self, out: TraceOutcome, done: RequestOutcome) -> None:
        key = self.windowed.get(id(done.request))
        if key is None:
            self._read(out, done)
            return
        # A trace is done when every window is (the pool answers each, skipped when the run stopped).
        wins, i = key
        got = self.parts.setdefault(out.item, {})
        got[i] = done
        if len(got) == len(wins):
            self._merge(out, wins, [got[j] for j in range(len(wins))])
            del self.parts[out.item]

    def judge(self, traces: Sequence[TraceInput], control: Control) -> Iterator[TraceOutcome]:
        yield from self.execute(traces, control)
        if self.config.output_mode == AUTO and self.pool is not None and self.pool.accepted_mode:
            self.config.output_mode_resolved = self.pool.accepted_mode

    @staticmethod
    def _merge(out: TraceOutcome, wins: list[windowing.Window], done: list[RequestOutcome]) -> None:
        """One trace's outcome from the outcomes of its windows: labels of each
        window's core, renumbered to the trace's steps; the answer's verdict
        from the last window (the one that saw the end)."""
        out.calls = [c for d in done for c in d.calls]
        bad = [(w, d) for w, d in zip(wins, done, strict=True) if d.status != "ok" or d.answer is None]
        if bad:
            out.status = "failed" if any(d.status == "failed" for _w, d in bad) else "skipped"
            out.reason = "; ".join(f"window of steps {w.start}-{w.end}: {d.reason or d.status}" for w, d in bad)
            return
        per_window = []
        for w, d in zip(wins, done, strict=True):
            parsed: protocol.ParsedOutput = d.answer.value
            shifted = [dataclasses.replace(label, step=label.step + w.start - 1) for label in parsed.labels]
            per_window.append([(label.step, label) for label in shifted])
            out.warnings += [f"steps {w.start}-{w.end}: {x}" for x in parsed.warnings]
            if parsed.copied_example and protocol.COPIED_EXAMPLE_NOTE not in out.notes:
                out.notes.append(protocol.COPIED_EXAMPLE_NOTE)
        out.labels = windowing.merge_window_labels(wins, per_window)
        last = done[-1].answer
        out.answer_correct, out.output_mode = last.value.answer_correct, last.output_mode
        out.cached = all(d.answer.cached for d in done)

    @staticmethod
    def _read(out: TraceOutcome, done: RequestOutcome) -> None:
        """A trace judged in one request: its answer is the trace's."""
        out.calls = done.calls
        if done.status != "ok" or done.answer is None:
            out.status, out.reason = done.status, done.reason
            return
        parsed: protocol.ParsedOutput = done.answer.value
        out.labels, out.answer_correct, out.warnings = parsed.labels, parsed.answer_correct, list(parsed.warnings)
        out.notes = [protocol.COPIED_EXAMPLE_NOTE] if parsed.copied_example else []
        out.cached, out.output_mode = done.answer.cached, done.answer.output_mode


#: Steps two consecutive windows share: the context a window's first steps
#: are judged with.
WINDOW_OVERLAP_STEPS = 4
#: Most steps in one window: the answer's max_tokens (256 + 128 per step) stays within its cap.
WINDOW_MAX_STEPS = (protocol.MAX_TOKENS_CAP - protocol.MAX_TOKENS_BASE) // protocol.MAX_TOKENS_PER_STEP


def plan_trace_windows(config, trace: TraceInput) -> list[windowing.Window]:
    """Windows of ``trace`` for a judge configuration (also the cost estimate's)."""
    n = len(trace.steps)
    whole = [windowing.Window(1, n, 1, n)]
    if not config.context_tokens or n == 0:
        return whole
    # Everything but the steps: system message, problem, skeleton, instructions and schema.
    bare = dataclasses.replace(trace, steps=())
    fixed = sum(len(m["content"]) for m in protocol.messages(config.prompt_template, bare, config.mode,
                                                             config.output_mode_resolved or config.output_mode))
    fixed = fixed // windowing.CHARS_PER_TOKEN + 64  # the per-step schema entries, roughly
    costs = [windowing.step_tokens(s) for s in trace.steps]
    output = config.max_tokens or protocol.derived_max_tokens(min(n, WINDOW_MAX_STEPS))
    budget = config.context_tokens - fixed - output
    if sum(costs) <= budget and (config.max_tokens or n <= WINDOW_MAX_STEPS):
        return whole
    return windowing.plan_windows(costs, max(1, budget), WINDOW_OVERLAP_STEPS,
                                  max_steps=None if config.max_tokens else WINDOW_MAX_STEPS)
