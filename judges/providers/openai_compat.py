"""An LLM judge on any OpenAI-compatible chat completions endpoint: one
request per trace through the run engine's ModelPool (runs.transport), which
owns retries, backoff, the rate limit, the response cache, the structured
output fallback and the accounting. This module only renders the judge's
prompt and reads its answer (judges.protocol).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

from judges import protocol, windowing
from judges.providers.base import Control, JudgeProvider, TraceInput, TraceOutcome
from runs.clients import Sizing
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


class OpenAICompatibleProvider(JudgeProvider):
    def __init__(self, config, store=None, *, force: bool = False) -> None:
        super().__init__(config, store, force=force)
        self.pool = ModelPool(endpoint(config), cache_scope(config), self.store, force=force)

    @classmethod
    def sizing(cls, config) -> Sizing:
        # A whole number of rounds of `concurrency` requests: no idle slots at the end of a chunk.
        return Sizing(concurrency=max(1, config.concurrency), target_requests=cls.chunk_size)

    def close(self) -> None:
        self.pool.close()

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

    def judge(self, traces: Sequence[TraceInput], control: Control) -> Iterator[TraceOutcome]:
        requests = []
        # id(request) -> (trace, its windows, this window's index) for traces judged in windows
        windowed: dict[int, tuple[TraceInput, list[windowing.Window], int]] = {}
        for trace in traces:
            if not trace.steps:
                yield TraceOutcome(trace.trace_pk, "ok", warnings=["the trace has no steps; nothing to judge"])
                continue
            wins = self.windows(trace)
            if len(wins) == 1:
                requests.append(self.request(trace))
                continue
            for i, w in enumerate(wins):
                request = self.request(dataclasses.replace(trace, steps=trace.steps[w.start - 1:w.end]))
                windowed[id(request)] = (trace, wins, i)
                requests.append(request)
        parts: dict[int, dict[int, RequestOutcome]] = {}
        for done in self.pool.run(requests, control):
            key = windowed.get(id(done.request))
            if key is None:
                yield self._outcome(done)
                continue
            trace, wins, i = key
            got = parts.setdefault(trace.trace_pk, {})
            got[i] = done
            # A trace is done when every window is; a run stopped halfway
            # yields nothing for it (its answered windows stay cached).
            if len(got) == len(wins):
                yield self._merged(trace.trace_pk, wins, [got[j] for j in range(len(wins))])
                del parts[trace.trace_pk]
        if self.config.output_mode == AUTO and self.pool.accepted_mode:
            self.config.output_mode_resolved = self.pool.accepted_mode

    @classmethod
    def _merged(cls, item: int, wins: list[windowing.Window], done: list[RequestOutcome]) -> TraceOutcome:
        """One trace's outcome from the outcomes of its windows: labels of each
        window's core, renumbered to the trace's steps; the answer's verdict
        from the last window (the one that saw the end)."""
        calls = [c for d in done for c in d.calls]
        bad = [(w, d) for w, d in zip(wins, done, strict=True) if d.status != "ok" or d.answer is None]
        if bad:
            status = "failed" if any(d.status == "failed" for _w, d in bad) else "skipped"
            reason = "; ".join(f"window of steps {w.start}-{w.end}: {d.reason or d.status}" for w, d in bad)
            return TraceOutcome(item, status, reason=reason, calls=calls)
        per_window = []
        warnings: list[str] = []
        notes: list[str] = []
        for w, d in zip(wins, done, strict=True):
            parsed: protocol.ParsedOutput = d.answer.value
            shifted = [dataclasses.replace(label, step=label.step + w.start - 1) for label in parsed.labels]
            per_window.append([(label.step, label) for label in shifted])
            warnings += [f"steps {w.start}-{w.end}: {x}" for x in parsed.warnings]
            if parsed.copied_example and protocol.COPIED_EXAMPLE_NOTE not in notes:
                notes.append(protocol.COPIED_EXAMPLE_NOTE)
        labels = windowing.merge_window_labels(wins, per_window)
        last = done[-1].answer
        return TraceOutcome(item, "ok", labels, last.value.answer_correct, warnings=warnings, notes=notes,
                            calls=calls, cached=all(d.answer.cached for d in done), output_mode=last.output_mode)

    @staticmethod
    def _outcome(done: RequestOutcome) -> TraceOutcome:
        item = done.request.item
        if done.status != "ok" or done.answer is None:
            return TraceOutcome(item, done.status, reason=done.reason, calls=done.calls)
        parsed: protocol.ParsedOutput = done.answer.value
        notes = [protocol.COPIED_EXAMPLE_NOTE] if parsed.copied_example else []
        return TraceOutcome(item, "ok", parsed.labels, parsed.answer_correct, warnings=list(parsed.warnings),
                            notes=notes, calls=done.calls, cached=done.answer.cached,
                            output_mode=done.answer.output_mode)


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
