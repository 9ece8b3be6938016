"""An LLM judge on any OpenAI-compatible chat completions endpoint (OpenAI,
vLLM, llama-cpp-python's server, Ollama, ...), through the official
``openai`` client.

One chat completion per trace. A thread pool of ``concurrency`` threads keeps
that many requests in flight; the calling thread (the one with the database
connection) hands out work, reads and writes the response cache, and checks
for cancellation between traces. Retries are ours, not the client's, so that
every attempt is counted and the backoff honours Retry-After.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from django.conf import settings

from judges import protocol
from judges.providers.base import (
    CachedAnswer,
    CallRecord,
    Control,
    FatalJudgeError,
    JudgeProvider,
    TraceInput,
    TraceOutcome,
)

AUTO, JSON_SCHEMA, JSON_OBJECT, PROMPT = "auto", "json_schema", "json_object", "prompt"
_FALLBACK = {JSON_SCHEMA: JSON_OBJECT, JSON_OBJECT: PROMPT}
# What servers say when they do not support a response_format; llama-cpp-python
# answers a json_schema request with HTTP 500 "Input should be 'text' or 'json_object'".
_FORMAT_HINTS = ("response_format", "json_schema", "'text' or 'json_object'", "json_object", "response format")


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def retry_after_seconds(headers) -> float | None:
    """Seconds a server asked us to wait (Retry-After as seconds or HTTP date, or retry-after-ms)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class RateLimiter:
    """Spaces request starts ``60 / per_minute`` seconds apart."""

    def __init__(self, per_minute: int) -> None:
        self.interval = 60.0 / per_minute
        self.next = 0.0
        self.lock = threading.Lock()

    def acquire(self, stop: threading.Event) -> bool:
        with self.lock:
            now = time.monotonic()
            at = max(now, self.next)
            self.next = at + self.interval
        delay = at - now
        return not (delay > 0 and stop.wait(delay))


@dataclass
class _Result:
    outcome: TraceOutcome
    key: str | None = None
    answer: CachedAnswer | None = None
    fatal: str | None = None


class OpenAICompatibleProvider(JudgeProvider):
    def __init__(self, config, store=None) -> None:
        super().__init__(config, store)
        import openai  # only LLM judges need the client

        self.openai = openai
        env = config.api_key_env or "OPENAI_API_KEY"
        key = os.environ.get(env, "")
        if config.api_key_env and not key:
            raise FatalJudgeError(f"the environment variable {env} (the judge's API key) is not set")
        if not config.base_url:
            raise FatalJudgeError("the judge has no base URL")
        self.client = openai.OpenAI(
            base_url=config.base_url, api_key=key or "not-needed", max_retries=0, timeout=config.timeout_seconds
        )
        self.concurrency = max(1, config.concurrency)
        self.limiter = RateLimiter(config.rate_limit_per_minute) if config.rate_limit_per_minute else None
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.bodies: dict[int, tuple[str, dict]] = {}
        if config.output_mode == AUTO:
            self.output_mode = config.output_mode_resolved or JSON_SCHEMA
        else:
            self.output_mode = config.output_mode
        self.retry_base = _setting("JUDGE_RETRY_BASE_SECONDS", 1.0)
        self.retry_cap = _setting("JUDGE_RETRY_MAX_SECONDS", 30.0)
        self.retry_after_cap = _setting("JUDGE_RETRY_AFTER_MAX_SECONDS", 120.0)

    @classmethod
    def chunk_traces(cls, config) -> int:
        # A whole number of rounds of `concurrency` requests: no idle slots at the end of a chunk.
        concurrency = max(1, config.concurrency)
        return concurrency * math.ceil(cls.chunk_size / concurrency)

    def close(self) -> None:
        self.client.close()

    # -- requests -----------------------------------------------------------

    def request_body(self, trace: TraceInput, output_mode: str) -> dict:
        cfg = self.config
        body = {
            "model": cfg.model,
            "messages": protocol.messages(cfg.prompt_template, trace, cfg.mode, output_mode),
            "temperature": cfg.temperature,
            "max_tokens": cfg.max_tokens,
        }
        fmt = protocol.response_format(cfg.mode, output_mode)
        if fmt is not None:
            body["response_format"] = fmt
        return body

    def cache_key(self, body: dict) -> str:
        cfg = self.config
        blob = json.dumps(
            {"judge": cfg.pk, "version": cfg.version, "prompt": cfg.prompt_version, "model": cfg.model, "request": body},
            sort_keys=True, ensure_ascii=False,
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def _fall_back(self, rejected: str) -> None:
        with self.lock:
            if self.output_mode == rejected and rejected in _FALLBACK:
                self.output_mode = _FALLBACK[rejected]

    # -- the chunk ----------------------------------------------------------

    def judge(self, traces: Sequence[TraceInput], control: Control) -> Iterator[TraceOutcome]:
        queue: deque[TraceInput] = deque()
        keyed = {}
        self.bodies: dict[int, tuple[str, dict]] = {}  # rendered once; again only if the output mode changes
        for trace in traces:
            if not trace.steps:
                yield TraceOutcome(trace.trace_pk, "ok", warnings=["the trace has no steps; nothing to judge"])
            else:
                body = self.request_body(trace, self.output_mode)
                self.bodies[trace.trace_pk] = (self.output_mode, body)
                keyed[trace.trace_pk] = self.cache_key(body)
                queue.append(trace)
        cached = self.store.lookup(list(keyed.values()))
        misses: deque[TraceInput] = deque()
        for trace in queue:
            answer = cached.get(keyed[trace.trace_pk])
            outcome = self._from_cache(trace, answer) if answer else None
            if outcome is None:
                misses.append(trace)
            else:
                yield outcome
        if misses:
            yield from self._call_all(misses, control)

    def _from_cache(self, trace: TraceInput, answer: CachedAnswer) -> TraceOutcome | None:
        try:
            parsed = protocol.parse_output(answer.content, len(trace.steps), len(trace.skeleton), self.config.mode)
        except protocol.MalformedOutput:
            return None
        return TraceOutcome(trace.trace_pk, "ok", parsed.labels, parsed.answer_correct, warnings=parsed.warnings,
                            cached=True)

    def _call_all(self, queue: deque[TraceInput], control: Control) -> Iterator[TraceOutcome]:
        fatal: str | None = None
        in_flight: dict[Future, TraceInput] = {}
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="judge") as pool:

            def fill() -> None:
                while queue and len(in_flight) < self.concurrency and not self.stop.is_set():
                    if control.stop_reason():
                        self.stop.set()
                        return
                    trace = queue.popleft()
                    in_flight[pool.submit(self._judge_one, trace)] = trace

            fill()
            while in_flight:
                done, _ = wait(in_flight, timeout=0.5, return_when=FIRST_COMPLETED)
                results: list[_Result] = []
                for future in done:
                    del in_flight[future]
                    results.append(future.result())
                    if results[-1].fatal and fatal is None:
                        fatal = results[-1].fatal
                        self.stop.set()
                control.charge(sum(r.outcome.cost_usd for r in results))
                fill()  # the freed slots go back to work before we store anything
                answers = {r.key: r.answer for r in results if r.answer is not None and r.key is not None}
                if answers:
                    self.store.save(answers)
                    worked = next(iter(answers.values())).output_mode
                    if self.config.output_mode == AUTO and worked != self.config.output_mode_resolved:
                        self.store.remember_output_mode(worked)
                        self.config.output_mode_resolved = worked
                for result in results:
                    yield result.outcome
        if fatal:
            raise FatalJudgeError(fatal)

    def _judge_one(self, trace: TraceInput) -> _Result:
        openai = self.openai
        cfg = self.config
        calls: list[CallRecord] = []
        failures = 0
        rejections = 0
        while True:
            if self.stop.is_set():
                return _Result(TraceOutcome(trace.trace_pk, "skipped", calls=calls))
            mode = self.output_mode
            rendered_mode, body = self.bodies.get(trace.trace_pk, (None, None))
            if rendered_mode != mode:
                body = self.request_body(trace, mode)
            if self.limiter and not self.limiter.acquire(self.stop):
                return _Result(TraceOutcome(trace.trace_pk, "skipped", calls=calls))
            attempt = len(calls) + 1
            started = time.monotonic()
            retry_after = None
            try:
                response = self.client.chat.completions.create(**body)
            except openai.APITimeoutError:
                error, status = f"timed out after {cfg.timeout_seconds:g}s", None
            except openai.APIConnectionError as exc:
                error, status = f"connection failed: {exc}", None
            except openai.APIStatusError as exc:
                status = exc.status_code
                message = _status_message(exc)
                error = f"HTTP {status}: {message}"
                if status in (400, 422, 500) and mode != PROMPT and _mentions_format(message):
                    calls.append(CallRecord(attempt, mode, "rejected_format", status, message, _ms(started)))
                    if cfg.output_mode != AUTO:
                        return self._fatal(trace, calls, f"the server refuses output mode {mode} ({error}); "
                                                         f"choose output mode auto")
                    rejections += 1
                    if rejections > len(_FALLBACK) + 1:
                        return self._failed(trace, calls, f"the server refuses every response format: {error}")
                    self._fall_back(mode)
                    continue  # the fallback is not a retry
                if status in (401, 403):
                    return self._fatal(trace, calls + [CallRecord(attempt, mode, "error", status, message, _ms(started))],
                                       f"the server refused the API key (HTTP {status}): {message}")
                if status == 404:
                    return self._fatal(trace, calls + [CallRecord(attempt, mode, "error", status, message, _ms(started))],
                                       f"not found (HTTP 404): {message}; check the base URL and the model name")
                if status == 429:
                    retry_after = retry_after_seconds(exc.response.headers)
                elif status < 500 and status != 408:
                    calls.append(CallRecord(attempt, mode, "error", status, message, _ms(started)))
                    return self._failed(trace, calls, error)
            else:
                usage = response.usage
                pt = (usage.prompt_tokens or 0) if usage else 0
                ct = (usage.completion_tokens or 0) if usage else 0
                content = response.choices[0].message.content if response.choices else None
                record = CallRecord(attempt, mode, "ok", 200, "", _ms(started), pt, ct, cfg.price(pt, ct))
                calls.append(record)
                try:
                    parsed = protocol.parse_output(content, len(trace.steps), len(trace.skeleton), cfg.mode)
                except protocol.MalformedOutput as exc:
                    record.outcome, record.error = "malformed", str(exc)
                    error, status = f"malformed answer: {exc}", 200
                else:
                    outcome = TraceOutcome(trace.trace_pk, "ok", parsed.labels, parsed.answer_correct,
                                           warnings=parsed.warnings, calls=calls)
                    return _Result(outcome, self.cache_key(body), CachedAnswer(content or "", mode, pt, ct))
            if not calls or calls[-1].attempt != attempt:
                calls.append(CallRecord(attempt, mode, "error", status, error, _ms(started)))
            failures += 1
            if failures > cfg.max_retries:
                return self._failed(trace, calls, f"{error} (gave up after {failures} attempt{'s' if failures > 1 else ''})")
            delay = min(self.retry_cap, self.retry_base * 2 ** (failures - 1))
            delay = delay / 2 + random.uniform(0, delay / 2)  # jitter: retries of many traces spread out
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.retry_after_cap))
            if self.stop.wait(delay):
                return _Result(TraceOutcome(trace.trace_pk, "skipped", calls=calls))

    @staticmethod
    def _failed(trace: TraceInput, calls: list[CallRecord], reason: str) -> _Result:
        return _Result(TraceOutcome(trace.trace_pk, "failed", reason=reason, calls=calls))

    @staticmethod
    def _fatal(trace: TraceInput, calls: list[CallRecord], reason: str) -> _Result:
        return _Result(TraceOutcome(trace.trace_pk, "failed", reason=reason, calls=calls), fatal=reason)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _status_message(exc) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return str(message)[:1000]
    return str(exc.message)[:1000]


def _mentions_format(message: str) -> bool:
    text = message.lower()
    return any(hint in text for hint in _FORMAT_HINTS)
