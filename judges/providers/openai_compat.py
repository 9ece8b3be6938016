"""An LLM judge on any OpenAI-compatible chat completions endpoint: one
request per trace through the run engine's ModelPool (runs.transport), which
owns retries, backoff, the rate limit, the response cache, the structured
output fallback and the accounting. This module only renders the judge's
prompt and reads its answer (judges.protocol).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from judges import protocol
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

    def judge(self, traces: Sequence[TraceInput], control: Control) -> Iterator[TraceOutcome]:
        requests = []
        for trace in traces:
            if not trace.steps:
                yield TraceOutcome(trace.trace_pk, "ok", warnings=["the trace has no steps; nothing to judge"])
            else:
                requests.append(self.request(trace))
        for done in self.pool.run(requests, control):
            yield self._outcome(done)
        if self.config.output_mode == AUTO and self.pool.accepted_mode:
            self.config.output_mode_resolved = self.pool.accepted_mode

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
