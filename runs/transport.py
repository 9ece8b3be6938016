"""Model calls on any OpenAI-compatible server (OpenAI, vLLM, SGLang,
llama.cpp / llama-cpp-python, Ollama, LiteLLM) through the official
``openai`` client: the one place that talks to model servers.

A ModelPool runs the requests of a chunk's items with ``concurrency`` requests
in flight on a thread pool. The calling thread (the one with the database
connection) hands out work, reads and writes the response cache, and beats
the run's heartbeat (lease renewal, cancel and budget checks) at least every
``TICK`` seconds whatever the requests are doing; a stop sets an event that
ends back-offs and rate-limit waits at once and keeps new requests from
starting. Retries are ours, not the client's, so that every attempt is
counted and the backoff honours Retry-After.

Plain data in and out: no ORM here (runs.engine and the client apps store).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

from django.conf import settings

from runs import deadline
from runs.outbound import GuardedTransport2, OutboundRefused, api_key_for, check_endpoint, redact_url, server_message

AUTO, JSON_SCHEMA, JSON_OBJECT, PROMPT = "auto", "json_schema", "json_object", "prompt"
OUTPUT_MODES = (AUTO, JSON_SCHEMA, JSON_OBJECT, PROMPT)
CHAT, COMPLETIONS = "chat", "completions"
_FALLBACK = {JSON_SCHEMA: JSON_OBJECT, JSON_OBJECT: PROMPT}
# What servers say when they do not support a response_format; llama-cpp-python
# answers a json_schema request with HTTP 500 "Input should be 'text' or 'json_object'".
_FORMAT_HINTS = ("response_format", "json_schema", "'text' or 'json_object'", "json_object", "response format")
# The longest the calling thread waits before it beats the heartbeat again.
TICK = 0.5


def setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


# --------------------------------------------------------------------------
# Plain data


class Malformed(ValueError):
    """An answer that is not of the expected shape: a failed attempt, retried."""


class FatalRunError(Exception):
    """A failure no retry will mend (bad key, unknown model, refused output
    mode, unreachable server): the run stops with this message."""


@dataclass(frozen=True)
class Endpoint:
    """Where and how to call a model: the server half of a judge or subject-model configuration."""

    base_url: str
    model: str
    api_key_env: str = ""
    api: str = CHAT  # chat | completions
    output_mode: str = AUTO  # structured output: auto | json_schema | json_object | prompt
    output_mode_resolved: str = ""  # what "auto" found the server accepts, from an earlier run
    concurrency: int = 4
    rate_limit_per_minute: int | None = None
    max_retries: int = 4
    timeout_seconds: float = 120.0
    price_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0

    def price(self, prompt_tokens: int | None, completion_tokens: int | None) -> float:
        """USD for the known tokens: (prompt x input price + completion x output price) / 1,000,000."""
        return ((prompt_tokens or 0) * self.price_input_per_mtok
                + (completion_tokens or 0) * self.price_output_per_mtok) / 1e6


@dataclass(frozen=True)
class Choice:
    """The first choice of a response, whole: the text (chat: the message
    content), the separate reasoning channel some servers return
    (``reasoning_content`` or ``reasoning``; "" when none), why decoding stopped
    ("length" = cut by max_tokens) and the model the server names. A cache hit
    gives back all four (runs.ResponseCache keeps them)."""

    text: str
    reasoning: str = ""
    finish_reason: str = ""
    model: str = ""


@dataclass
class ModelRequest:
    """One model request of a work item. ``build(output_mode)`` gives the body
    without ``model`` and ``response_format`` (chat: ``messages``; completions:
    ``prompt``; plus per-request ``temperature``, ``max_tokens``, ``seed``,
    ``top_p``, ``stop``...; ``extra_body``: fields the openai client passes
    through, e.g. vLLM's ``continue_final_message``), rendered again only if the output mode changes;
    ``parse(content)`` returns the value or raises Malformed (then the request
    is tried again); ``parse_choice(choice)``, when given, is used instead and
    sees the whole Choice (reasoning channel, finish reason, model).
    ``schema`` asks for structured output. ``key_extra`` goes into the cache
    key, never to the server (e.g. the sample index of K samples of one prompt)."""

    item: int
    build: Callable[[str], dict]
    parse: Callable[[str], Any] = lambda content: content
    schema: dict | None = None
    schema_name: str = "output"
    api: str | None = None  # None: the endpoint's
    parse_choice: Callable[[Choice], Any] | None = None
    key_extra: dict | None = None

    def parse_answer(self, choice: Choice) -> Any:
        """The parsed value, or Malformed: ANY exception of a parser (a ValueError of a cut fence, a
        RecursionError of deep JSON...) fails this item's attempt as malformed, never the chunk or
        the run (issue 29, L2)."""
        try:
            return self.parse_choice(choice) if self.parse_choice is not None else self.parse(choice.text)
        except Malformed:
            raise
        except Exception as exc:  # noqa: BLE001 -- whatever a parser raises is a malformed answer
            raise Malformed(f"unreadable answer ({type(exc).__name__}: {str(exc)[:200]})") from None


@dataclass
class CallRecord:
    """One request to a model server (each retry is a call of its own).
    Token counts are None when unknown."""

    attempt: int
    output_mode: str
    outcome: str  # ok | malformed | error | rejected_format
    http_status: int | None = None
    error: str = ""
    latency_ms: int = 0
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0
    cost_usd: float = 0.0

    @property
    def tokens_known(self) -> bool:
        return self.prompt_tokens is not None and self.completion_tokens is not None


@dataclass
class Answer:
    value: Any
    content: str
    output_mode: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cached: bool = False
    # What the response said: the model as the server names it (a regime field) and why
    # decoding stopped ("length" = cut by max_tokens). Empty for answers read from a cache that does not keep them.
    model: str = ""
    finish_reason: str = ""
    reasoning: str = ""


@dataclass
class RequestOutcome:
    """The end of one request: an answer, a failure with its reason, or
    skipped (the run stopped before it was done)."""

    request: ModelRequest
    status: str  # ok | failed | skipped
    answer: Answer | None = None
    reason: str = ""
    calls: list[CallRecord] = field(default_factory=list)
    fatal: str | None = None


@dataclass
class CachedAnswer:
    content: str
    output_mode: str
    prompt_tokens: int | None
    completion_tokens: int | None
    model: str = ""
    finish_reason: str = ""
    reasoning: str = ""

    @property
    def choice(self) -> Choice:
        return Choice(self.content, self.reasoning, self.finish_reason, self.model)


class ResponseStore(Protocol):
    """Where a pool keeps valid answers and what it learnt about the server."""

    def lookup(self, keys: Sequence[str]) -> dict[str, CachedAnswer]: ...

    def save(self, answers: dict[str, CachedAnswer]) -> None: ...

    def remember_output_mode(self, output_mode: str) -> None: ...


class NullStore:
    def lookup(self, keys: Sequence[str]) -> dict[str, CachedAnswer]:
        return {}

    def save(self, answers: dict[str, CachedAnswer]) -> None:
        pass

    def remember_output_mode(self, output_mode: str) -> None:
        pass


class Control(Protocol):
    def stop_reason(self) -> str | None:
        """Why the run must stop now (cancelled, budget spent, lease lost), or None. Cheap to call often."""

    def heartbeat(self) -> str | None:
        """Renew the lease and look for a cancel when due; the stop reason, or None."""

    def charge(self, cost_usd: float) -> None:
        """Count what calls cost as soon as they return (the budget check needs it)."""

    # Optional: ``idle()``, called once the first requests are in flight -- the
    # caller's own database work (the previous chunk's commit) can run meanwhile.


class NoStop:
    def stop_reason(self) -> str | None:
        return None

    def heartbeat(self) -> str | None:
        return None

    def charge(self, cost_usd: float) -> None:
        pass


# --------------------------------------------------------------------------
# Pieces


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


def backoff_seconds(failures: int, base: float, cap: float, retry_after: float | None, retry_after_cap: float,
                    rng: Callable[[float, float], float] = random.uniform) -> float:
    """The wait before attempt ``failures + 1``: d = min(cap, base x 2^(failures-1)), then a random
    point in [d/2, d] (so retries of many items spread out), and never less than
    the server's Retry-After (itself capped at ``retry_after_cap``)."""
    delay = min(cap, base * 2 ** (failures - 1))
    delay = delay / 2 + rng(0, delay / 2)
    if retry_after is not None:
        delay = max(delay, min(retry_after, retry_after_cap))
    return delay


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


def response_format(output_mode: str, schema: dict | None, name: str = "output") -> dict | None:
    """The ``response_format`` of a request. The json_object fallback carries the
    schema too: llama-cpp-python (and other llama.cpp-based servers) refuse
    ``json_schema`` but enforce ``{"type": "json_object", "schema": ...}`` with a
    grammar; servers that do not know the key ignore it."""
    if schema is None:
        return None
    if output_mode == JSON_SCHEMA:
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    if output_mode == JSON_OBJECT:
        return {"type": "json_object", "schema": schema}
    return None


def cache_key(scope: str, model: str, api: str, body: dict, extra: dict | None = None) -> str:
    """sha256 of the caller's scope, the model, the API kind, the exact request
    body and the request's ``key_extra`` (when it has one)."""
    data: dict[str, Any] = {"scope": scope, "model": model, "api": api, "request": body}
    if extra:
        data["extra"] = extra
    blob = json.dumps(data, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def start_mode(endpoint: Endpoint) -> str:
    if endpoint.output_mode == AUTO:
        return endpoint.output_mode_resolved or JSON_SCHEMA
    return endpoint.output_mode


# --------------------------------------------------------------------------
# The pool

_CLIENTS: OrderedDict[tuple, Any] = OrderedDict()
_CLIENTS_LOCK = threading.Lock()
MAX_CLIENTS = 16


def shared_client(base_url: str, api_key: str, timeout: float):
    """The openai client for a server, made once per process and reused by
    every pool (the client is thread-safe). Making one is costly -- httpx builds
    a fresh SSL context and loads the CA bundle, about 0.2 s of CPU, which once
    per chunk was the largest gap between a run and its ideal time -- and a
    reused client keeps its connections open from one chunk to the next. Keyed
    by the process id too, so a forked worker never shares its parent's sockets;
    beyond MAX_CLIENTS the least recently used is forgotten.

    Only what is passed here reaches the server: organization, project and headers are given
    explicitly (left to themselves the client reads OPENAI_ORG_ID, OPENAI_PROJECT_ID and
    OPENAI_CUSTOM_HEADERS from the worker's environment), and the transport sends no header but
    runs.outbound.SENT_HEADERS and this key, whatever the client adds. ``timeout`` is the total
    deadline of a request (runs.deadline); its body is capped at MODEL_RESPONSE_MAX_BYTES."""
    import httpx2
    import openai

    key = (os.getpid(), base_url, api_key, timeout)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is not None:
            _CLIENTS.move_to_end(key)
            return client
        transport = GuardedTransport2(api_key=api_key, seconds=timeout)
        http_client = httpx2.Client(transport=transport, timeout=timeout, trust_env=False, follow_redirects=True)
        # The client insists on a key; without one the transport sends no Authorization at all.
        client = openai.OpenAI(base_url=base_url, api_key=api_key or "none", organization="", project="",
                               default_headers={}, default_query={}, max_retries=0, timeout=timeout,
                               http_client=http_client)
        _CLIENTS[key] = client
        while len(_CLIENTS) > MAX_CLIENTS:
            _CLIENTS.popitem(last=False)  # not closed: a pool may still use it; its sockets go with it
        return client


@dataclass
class _Done:
    outcome: RequestOutcome
    key: str | None = None
    cached: CachedAnswer | None = None


_EXECUTORS: dict[tuple[int, int], list[ThreadPoolExecutor]] = {}


def _share(total: int, lanes: int, lane: int) -> int:
    """A lane's part of ``total``, as runs.engine.lane_share (this module imports no engine)."""
    lanes = max(1, lanes)
    return max(1, total // lanes + (lane < total % lanes))


@contextmanager
def _borrowed_executor(threads: int) -> Iterator[ThreadPoolExecutor]:
    """A thread pool of ``threads`` threads for one pool's requests, lent out
    of a per-process stock and given back afterwards, so the next chunk finds
    its threads running: starting 32 threads for every chunk cost a noticeable
    share of a run on a busy machine (each start waits until the new thread is
    scheduled). One borrower at a time per executor, so two pools in a process
    never share threads or exceed their concurrency. Not handed back when the
    pool ended in an exception (its threads may still be busy)."""
    key = (os.getpid(), threads)
    with _CLIENTS_LOCK:
        stock = _EXECUTORS.setdefault(key, [])
        executor = stock.pop() if stock else None
    if executor is None:
        executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="model")
    try:
        yield executor
    except BaseException:
        executor.shutdown(wait=True)
        raise
    if getattr(executor, "abandoned", False):  # threads still busy with aborted requests: not lent again
        executor.shutdown(wait=False)
        return
    with _CLIENTS_LOCK:
        _EXECUTORS[key].append(executor)


class ModelPool:
    """Runs model requests with retries, cache, structured-output fallback, rate
    limit and accounting. ``scope`` goes into every cache key (who asks, and
    the version of what they ask)."""

    def __init__(self, endpoint: Endpoint, scope: str, store: ResponseStore | None = None, *,
                 force: bool = False) -> None:
        import openai  # only runs that call models need the client

        self.openai = openai
        self.endpoint = endpoint
        self.scope = scope
        self.store = store or NullStore()
        self.force = force
        if not endpoint.base_url:
            raise FatalRunError("no base URL is configured")
        # The operator's policy (runs.outbound): the key only when its name is allowed for this host (no
        # implicit OPENAI_API_KEY), no credentials in the URL; the address is checked on every request.
        try:
            check_endpoint(endpoint.base_url, endpoint.api_key_env)
            key = api_key_for(endpoint.base_url, endpoint.api_key_env)
        except OutboundRefused as exc:
            raise FatalRunError(str(exc)) from None
        self.shown_url = redact_url(endpoint.base_url)
        self.client = shared_client(endpoint.base_url, key, endpoint.timeout_seconds)
        self.concurrency = max(1, endpoint.concurrency)
        self.limiter = RateLimiter(endpoint.rate_limit_per_minute) if endpoint.rate_limit_per_minute else None
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.output_mode = start_mode(endpoint)
        self.accepted_mode = ""  # the structured-output form that earned a valid answer in this pool
        self.retry_base = setting("RUN_RETRY_BASE_SECONDS", 1.0)
        self.retry_cap = setting("RUN_RETRY_MAX_SECONDS", 30.0)
        self.retry_after_cap = setting("RUN_RETRY_AFTER_MAX_SECONDS", 120.0)
        self.save_every = setting("RUN_CACHE_SAVE_SECONDS", 0.0)

    def close(self) -> None:
        """Nothing to release: the client is shared (shared_client) and its connections stay open for the next chunk."""

    # -- bodies -------------------------------------------------------------

    def body(self, request: ModelRequest, output_mode: str) -> dict:
        body = {"model": self.endpoint.model, **request.build(output_mode)}
        fmt = response_format(output_mode, request.schema, request.schema_name)
        if fmt is not None:
            body["response_format"] = fmt
        return body

    def key(self, request: ModelRequest, body: dict) -> str:
        return cache_key(self.scope, self.endpoint.model, request.api or self.endpoint.api, body, request.key_extra)

    def _fall_back(self, rejected: str) -> None:
        with self.lock:
            if self.output_mode == rejected and rejected in _FALLBACK:
                self.output_mode = _FALLBACK[rejected]

    # -- running ------------------------------------------------------------

    def run(self, requests: Sequence[ModelRequest], control: Control) -> Iterator[RequestOutcome]:
        """Yield one outcome per request, in any order: cached answers first,
        then the others as they finish. Raises FatalRunError after yielding
        what finished when a failure no retry mends stops the run."""
        bodies: dict[int, tuple[str, dict, str]] = {}
        for n, request in enumerate(requests):
            body = self.body(request, self.output_mode)
            bodies[n] = (self.output_mode, body, self.key(request, body))
        cached = {} if self.force else self.store.lookup([key for _m, _b, key in bodies.values()])
        queue: deque[int] = deque()
        for n, request in enumerate(requests):
            mode, _body, key = bodies[n]
            hit = cached.get(key)
            outcome = self._from_cache(request, hit) if hit else None
            if outcome is None:
                queue.append(n)
            else:
                yield outcome
        if queue:
            yield from self._call_all(requests, bodies, queue, control)

    def _from_cache(self, request: ModelRequest, hit: CachedAnswer) -> RequestOutcome | None:
        try:
            value = request.parse_answer(hit.choice)
        except Malformed:
            return None
        answer = Answer(value, hit.content, hit.output_mode, hit.prompt_tokens, hit.completion_tokens, cached=True,
                        model=hit.model, finish_reason=hit.finish_reason, reasoning=hit.reasoning)
        return RequestOutcome(request, "ok", answer)

    def _call_all(self, requests: Sequence[ModelRequest], bodies: dict[int, tuple[str, dict, str]],
                  queue: deque[int], control: Control) -> Iterator[RequestOutcome]:
        fatal: str | None = None
        in_flight: dict[Future, int] = {}
        # Valid answers not yet in the store: written after every wait (all that came
        # back together, one INSERT), so a worker killed mid-chunk asks again only for
        # what was in flight. RUN_CACHE_SAVE_SECONDS > 0 groups the writes further (a
        # kill then costs up to that many seconds of answers); the threads do not wait
        # for these writes either way, a round of requests is queued ahead of them.
        unsaved: dict[str, CachedAnswer] = {}
        saved_at = time.monotonic()

        def flush() -> None:
            nonlocal saved_at
            saved_at = time.monotonic()
            if unsaved:
                self.store.save(dict(unsaved))
                unsaved.clear()

        # A run worked on in lanes (runs.engine) gives each its share of the concurrency and rate limit.
        lanes, lane = getattr(control, "lanes", 1), getattr(control, "lane", 0)
        concurrency = _share(min(self.concurrency, getattr(control, "concurrency", None) or self.concurrency), lanes, lane)
        if self.limiter is not None and lanes > 1:
            self.limiter = RateLimiter(_share(self.endpoint.rate_limit_per_minute or 1, lanes, lane))
        try:
            with _borrowed_executor(concurrency) as pool:

                halt = False

                def beat() -> None:
                    # The heartbeat: independent of slots freeing up, so a lease is
                    # renewed and a cancel seen while every slot waits on a slow server.
                    nonlocal halt
                    why = control.heartbeat() or control.stop_reason()
                    if why:
                        self.stop.set()
                        # A cancel (or a lost chunk) does not wait for the requests in flight (a
                        # spent budget does: their answers are paid for).
                        halt = halt or why in ("cancelled", "lost")

                # Requests go to the thread pool ahead of the free slots: up to one round
                # (``concurrency``) waits in its queue, so a thread takes the next request as
                # soon as its own ends, without waiting for this thread -- which may be busy
                # storing answers or committing the previous chunk. A stop keeps the queued ones
                # from starting (each looks at the stop flag and the budget first); at most one
                # round can have been taken by a thread before this thread sees a cancel.
                reason = getattr(control, "reason", None)  # memory only: safe on the pool's threads

                def fill() -> None:
                    if not queue or len(in_flight) >= 2 * concurrency:
                        return
                    beat()  # once per hand-out: a cancel seen now starts nothing more
                    while queue and len(in_flight) < 2 * concurrency and not self.stop.is_set():
                        n = queue.popleft()
                        in_flight[pool.submit(self._task, requests[n], bodies[n], control, reason)] = n
                        submitted[n] = time.monotonic()

                submitted: dict[int, float] = {}
                fill()
                idle = getattr(control, "idle", None)
                if idle is not None:
                    idle()  # the caller's database work overlaps the first requests (runs.engine.ChunkPipeline)
                while in_flight:
                    done, _ = wait(in_flight, timeout=TICK, return_when=FIRST_COMPLETED)
                    beat()
                    results: list[_Done] = []
                    for future in done:
                        del in_flight[future]
                        results.append(future.result())
                        if results[-1].outcome.fatal and fatal is None:
                            fatal = results[-1].outcome.fatal
                            self.stop.set()
                    fill()  # the freed places in the queue first, before anything is stored
                    answers = {r.key: r.cached for r in results if r.cached is not None and r.key is not None}
                    if answers:
                        unsaved.update(answers)
                        worked = next(iter(answers.values())).output_mode
                        if self.endpoint.output_mode == AUTO and worked != self.accepted_mode:
                            self.store.remember_output_mode(worked)
                        self.accepted_mode = worked
                    if unsaved and (not in_flight or time.monotonic() - saved_at >= self.save_every):
                        flush()
                    for result in results:
                        yield result.outcome
                    if halt and in_flight:
                        yield from self._abort(requests, in_flight, submitted)
                        pool.abandoned = True
                        in_flight.clear()
                # Requests never started (the run stopped before they were handed out) are skipped.
                while queue:
                    yield RequestOutcome(requests[queue.popleft()], "skipped")
        finally:
            if in_flight:  # the consumer stopped early: what has not started must not start
                self.stop.set()
            flush()  # also when the consumer stops early
        if fatal:
            raise FatalRunError(fatal)

    def _abort(self, requests: Sequence[ModelRequest], in_flight: dict[Future, int],
               submitted: dict[int, float]) -> Iterator[RequestOutcome]:
        """End the requests in flight now: the client's connections are closed (the server sees the
        disconnect and stops generating; the pool's threads get a connection error and take nothing
        more), the client is forgotten so the next pool makes a new one, and each request is skipped
        with one call of unknown tokens (what the server did with it is not known)."""
        with _CLIENTS_LOCK:
            for key, client in list(_CLIENTS.items()):
                if client is self.client:
                    del _CLIENTS[key]
        try:
            self.client.close()
        except Exception:  # closing must never keep the run from stopping
            pass
        for future, n in in_flight.items():
            if future.cancel():  # still waiting for a thread: it never reached the server
                yield RequestOutcome(requests[n], "skipped")
                continue
            call = CallRecord(1, self.output_mode, "error", None, "cancelled while in flight",
                              int((time.monotonic() - submitted.get(n, time.monotonic())) * 1000), None, None)
            yield RequestOutcome(requests[n], "skipped", calls=[call])

    def _task(self, request: ModelRequest, rendered: tuple[str, dict, str], control: Control,
              reason: Callable[[], str | None] | None) -> _Done:
        """One request on a pool thread: skipped once the run must stop; what its calls cost
        is charged at once, so the next request's budget check counts it."""
        if reason is not None and reason():
            self.stop.set()
        done = self._call(request, rendered)
        if done.outcome.fatal:
            self.stop.set()  # before this thread takes the next request
        cost = sum(c.cost_usd for c in done.outcome.calls)
        if cost:
            with self.lock:
                control.charge(cost)
        return done

    def _call(self, request: ModelRequest, rendered: tuple[str, dict, str]) -> _Done:
        openai = self.openai
        ep = self.endpoint
        api = request.api or ep.api
        calls: list[CallRecord] = []
        failures = 0
        rejections = 0
        while True:
            if self.stop.is_set():
                return _Done(RequestOutcome(request, "skipped", calls=calls))
            mode = self.output_mode
            rendered_mode, body, key = rendered
            if rendered_mode != mode:
                body = self.body(request, mode)
                key = self.key(request, body)
                rendered = (mode, body, key)
            if self.limiter and not self.limiter.acquire(self.stop):
                return _Done(RequestOutcome(request, "skipped", calls=calls))
            attempt = len(calls) + 1
            started = time.monotonic()
            retry_after = None
            # What the server did with the tokens of a failed call: unknown (None)
            # unless it answered, so costs are never understated as zero.
            pt: int | None = None
            ct: int | None = None
            try:
                # One deadline for the whole call, redirects included: connect + headers + body (runs.deadline).
                with deadline.total(ep.timeout_seconds):
                    if api == COMPLETIONS:
                        response = self.client.completions.create(**body)
                    else:
                        response = self.client.chat.completions.create(**body)
            except openai.APITimeoutError:
                error, status = f"timed out after {ep.timeout_seconds:g}s", None
            except openai.APIConnectionError as exc:
                refusal = deadline.cause_of(exc, OutboundRefused)
                if refusal is not None:  # nothing was sent
                    calls.append(CallRecord(attempt, mode, "error", None, str(refusal), _ms(started), 0, 0))
                    return self._fatal(request, calls, str(refusal))
                cut = deadline.cause_of(exc, deadline.ResponseTooLarge)
                if cut is not None:  # the server generated (and charges) what it sent: tokens unknown
                    calls.append(CallRecord(attempt, mode, "error", None, str(cut), _ms(started), None, None))
                    return self._failed(request, calls, str(cut))
                # The cause stays (a run's owner needs it to mend the server), sanitized; only addresses
                # the policy allows are ever tried, and the web process's check says less (subjects.services).
                error = f"could not connect to {self.shown_url}: {server_message(str(_root_cause(exc)))}"
                status = None
                if _refused(exc):
                    pt = ct = 0  # nothing reached the server
            except openai.APIStatusError as exc:
                status = exc.status_code
                message = _status_message(exc)
                error = f"HTTP {status}: {message}"
                if status < 500:
                    pt = ct = 0  # refused before any generation
                if status in (400, 422, 500) and request.schema is not None and mode != PROMPT \
                        and _mentions_format(message):
                    calls.append(CallRecord(attempt, mode, "rejected_format", status, message, _ms(started), 0, 0))
                    if ep.output_mode != AUTO:
                        return self._fatal(request, calls, f"the server refuses output mode {mode} ({error}); "
                                                           f"choose output mode auto")
                    rejections += 1
                    if rejections > len(_FALLBACK) + 1:
                        return self._failed(request, calls, f"the server refuses every response format: {error}")
                    self._fall_back(mode)
                    continue  # the fallback is not a retry
                if status in (401, 403):
                    calls.append(CallRecord(attempt, mode, "error", status, message, _ms(started), pt, ct))
                    return self._fatal(request, calls, f"the server at {self.shown_url} refused the API key "
                                                       f"(HTTP {status}): {message}")
                if status == 404:
                    calls.append(CallRecord(attempt, mode, "error", status, message, _ms(started), pt, ct))
                    return self._fatal(request, calls, f"not found at {self.shown_url} (HTTP 404): {message}; "
                                                       "check the base URL and the model name")
                if status == 429:
                    retry_after = retry_after_seconds(exc.response.headers)
                elif status < 500 and status != 408:
                    calls.append(CallRecord(attempt, mode, "error", status, message, _ms(started), pt, ct))
                    return self._failed(request, calls, error)
            else:
                done, error = self._answered(request, response, api, mode, attempt, started, calls, key)
                if done is not None:
                    return done
                status = 200
            if not calls or calls[-1].attempt != attempt:
                calls.append(CallRecord(attempt, mode, "error", status, error, _ms(started), pt, ct))
            failures += 1
            if failures > ep.max_retries:
                return self._failed(request, calls,
                                    f"{error} (gave up after {failures} attempt{'s' if failures > 1 else ''})")
            delay = backoff_seconds(failures, self.retry_base, self.retry_cap, retry_after, self.retry_after_cap)
            if self.stop.wait(delay):
                return _Done(RequestOutcome(request, "skipped", calls=calls))

    def _answered(self, request: ModelRequest, response: Any, api: str, mode: str, attempt: int, started: float,
                  calls: list[CallRecord], key: str) -> tuple[_Done | None, str]:
        """An HTTP 200: the answer, or (None, the error) of a failed attempt whose CallRecord is added."""
        if not hasattr(response, "choices"):
            # No completion (an HTML page, plain text): the openai client hands the body back as a
            # string. A failed attempt like a malformed answer -- retried, then failed -- never a crash.
            error = "the server answered HTTP 200 with something that is not a completion"
            calls.append(CallRecord(attempt, mode, "malformed", 200, error, _ms(started), None, None))
            return None, error
        usage = getattr(response, "usage", None)
        pt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        ct = getattr(usage, "completion_tokens", None) if usage is not None else None
        choice = choice_of(response, api)
        record = CallRecord(attempt, mode, "ok", 200, "", _ms(started), pt, ct, self.endpoint.price(pt, ct))
        calls.append(record)
        try:
            value = request.parse_answer(choice)
        except Malformed as exc:
            record.outcome, record.error = "malformed", str(exc)
            return None, f"malformed answer: {exc}"
        answer = Answer(value, choice.text, mode, pt, ct, model=choice.model,
                        finish_reason=choice.finish_reason, reasoning=choice.reasoning)
        return (_Done(RequestOutcome(request, "ok", answer, calls=calls), key,
                      CachedAnswer(choice.text, mode, pt, ct, choice.model, choice.finish_reason, choice.reasoning)),
                "")

    @staticmethod
    def _failed(request: ModelRequest, calls: list[CallRecord], reason: str) -> _Done:
        return _Done(RequestOutcome(request, "failed", reason=reason, calls=calls))

    @staticmethod
    def _fatal(request: ModelRequest, calls: list[CallRecord], reason: str) -> _Done:
        return _Done(RequestOutcome(request, "failed", reason=reason, calls=calls, fatal=reason))


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _extra_field(obj: Any, *names: str) -> str:
    """A field the openai types do not declare (servers add their own): the first of ``names`` that is set."""
    for name in names:
        value = getattr(obj, name, None)
        if value is None and getattr(obj, "model_extra", None):
            value = obj.model_extra.get(name)
        if value:
            return str(value)
    return ""


def choice_of(response, api: str) -> Choice:
    """The first choice of a response as a Choice ("" for what is absent; no choice at all: an empty text)."""
    model = str(getattr(response, "model", None) or "")
    if not response.choices:
        return Choice("", "", "", model)
    first = response.choices[0]
    holder = first if api == COMPLETIONS else first.message
    text = first.text if api == COMPLETIONS else first.message.content
    # vLLM and llama.cpp name the channel reasoning_content; OpenRouter and Ollama name it reasoning.
    return Choice(text or "", _extra_field(holder, "reasoning_content", "reasoning"), str(first.finish_reason or ""),
                  model)


def _root_cause(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def _refused(exc: Exception) -> bool:
    """True when the connection was never made (nothing was sent)."""
    import httpx

    seen = exc
    while seen is not None:
        if isinstance(seen, (httpx.ConnectError, ConnectionRefusedError)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _status_message(exc) -> str:
    """What the server said, as it may be shown in a job error: sanitized and short (runs.outbound.server_message)."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return server_message(str(message))
    return server_message(str(exc.message))


def _mentions_format(message: str) -> bool:
    text = message.lower()
    return any(hint in text for hint in _FORMAT_HINTS)
