"""Continuation (prefix -> continue) and forced answers, the service the
diagnostics call (docs/generation.md, "Continuation mode"; docs/runs.md): re-decode a subject
model from a *given* partial trace, in one of three modes, strongest first:

``completions``
    ``/v1/completions`` with a raw prompt: the chat rendered by the model's own
    chat template (``runs.chat_template``) followed by the partial assistant text.
    The model decodes from exactly the tokens it would have produced itself.
``prefill``
    chat completions whose last message is the partial assistant message,
    continued in place (vLLM: ``continue_final_message: true,
    add_generation_prompt: false``; other servers continue a trailing
    assistant message natively -- or answer afresh, which ``probe`` detects).
``instructed``
    the partial trace shown to the model with an instruction to continue it.
    Weakest (the model reads the prefix, it does not decode from it); flagged
    in every result.

A forced answer continues a (possibly truncated) prefix followed by a cue
(default ``"\\n\\nFinal answer:"``) greedily with a small token cap.

Every request goes through ``runs.transport.ModelPool`` (retries, rate limit,
cache, tokens and cost). The diagnostics put ``continuation_request`` objects
into the pools of their own runs; ``Continuer`` runs them directly (the probe,
the CLI, small jobs). Plain data; no ORM.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from runs.chat_template import ChatTemplateError, render_chat
from runs.outbound import redact_url
from runs.thinking import ThinkingSettings, thinking_request, with_extra_body
from runs.transport import (
    CHAT,
    PROMPT,
    Control,
    Endpoint,
    FatalRunError,
    ModelPool,
    ModelRequest,
    NoStop,
    RequestOutcome,
    ResponseStore,
)
from runs.transport import COMPLETIONS as COMPLETIONS_API

COMPLETIONS, PREFILL, INSTRUCTED = "completions", "prefill", "instructed"
MODES = (COMPLETIONS, PREFILL, INSTRUCTED)  # strongest first
DEFAULT_CUE = "\n\nFinal answer:"
DEFAULT_ANSWER_TOKENS = 32
# vLLM's chat-template switches: continue the last (assistant) message instead of opening a new turn.
PREFILL_EXTRA_BODY = {"continue_final_message": True, "add_generation_prompt": False}

INSTRUCTION = (
    "Below is the beginning of an answer to the request above, cut off mid-way. Continue it from exactly "
    "where it stops. Do not repeat it, do not comment on it and do not start over: write only the text "
    "that comes next.\n\n"
    "BEGINNING OF THE ANSWER\n{partial}"
)


class ContinuationError(Exception):
    """A continuation that cannot be asked for as configured (e.g. ``completions`` without a chat template)."""


class ServerUnreachable(ContinuationError):
    pass


@dataclass(frozen=True)
class ModelServer:
    """The plain configuration of a subject model's server, all a continuation
    or a probe needs (the subject model of a study gives one)."""

    base_url: str
    model: str
    api_key_env: str = ""
    chat_template: str = ""  # Jinja, as in the model's tokenizer_config.json
    eos_token: str = ""  # passed to the template; cut from a raw continuation that writes it out as text
    timeout_seconds: float = 120.0
    probe_timeout_seconds: float = 30.0
    max_retries: int = 2
    probe_retries: int = 1
    concurrency: int = 4
    rate_limit_per_minute: int | None = None
    price_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0
    # The subject model's thinking settings: every continuation sends them as its generation did.
    thinking: ThinkingSettings = ThinkingSettings()

    def endpoint(self, *, probing: bool = False) -> Endpoint:
        return Endpoint(
            base_url=self.base_url, model=self.model, api_key_env=self.api_key_env, api=CHAT,
            output_mode=PROMPT,  # continuations ask for free text, never a response_format
            concurrency=1 if probing else self.concurrency,
            rate_limit_per_minute=self.rate_limit_per_minute,
            max_retries=self.probe_retries if probing else self.max_retries,
            timeout_seconds=self.probe_timeout_seconds if probing else self.timeout_seconds,
            price_input_per_mtok=self.price_input_per_mtok, price_output_per_mtok=self.price_output_per_mtok,
        )


@dataclass(frozen=True)
class ContinuationSpec:
    """What to continue: the conversation before the assistant turn (system and
    user messages), the partial assistant text, and the decoding of the rest."""

    messages: tuple[Mapping[str, Any], ...]
    prefix: str
    cue: str = ""  # appended after the prefix (a forced answer's "\n\nFinal answer:")
    max_tokens: int = 512
    temperature: float = 0.0
    seed: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()

    @property
    def partial(self) -> str:
        """The exact assistant text the model continues from."""
        return self.prefix + self.cue


def forced_answer_spec(messages: Sequence[Mapping[str, Any]], prefix: str, *, cue: str = DEFAULT_CUE,
                       max_tokens: int = DEFAULT_ANSWER_TOKENS, seed: int | None = None) -> ContinuationSpec:
    """A forced answer: the prefix, the cue, greedy decoding, a small token cap."""
    return ContinuationSpec(tuple(messages), prefix, cue=cue, max_tokens=max_tokens, temperature=0.0, seed=seed)


@dataclass(frozen=True)
class Regime:
    """The request's regime bits; ``model`` is the model as the server names it
    in its response ("" when the answer came from a cache that does not keep it)."""

    model: str
    temperature: float
    seed: int | None
    max_tokens: int
    top_p: float | None = None
    stop: tuple[str, ...] = ()


@dataclass
class ContinuationResult:
    mode: str
    prefix_sha256: str
    cue: str
    regime: Regime
    text: str = ""  # what the model added after the prefix and cue
    ok: bool = True
    error: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: int = 0  # of the last attempt; 0 for a cached answer
    attempts: int = 0
    cost_usd: float = 0.0
    finish_reason: str = ""
    cached: bool = False

    @property
    def flagged(self) -> bool:
        """The weakest mode: the model read the prefix as text instead of decoding from it."""
        return self.mode == INSTRUCTED

    @property
    def truncated(self) -> bool:
        """Cut by max_tokens."""
        return self.finish_reason == "length"

    @property
    def answer(self) -> str:
        """A forced answer's text: the first non-empty line of the continuation."""
        return next((line.strip() for line in self.text.splitlines() if line.strip()), "")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["regime"]["stop"] = list(self.regime.stop)
        data.update(flagged=self.flagged, truncated=self.truncated, answer=self.answer)
        return data


def prefix_sha256(prefix: str) -> str:
    return hashlib.sha256(prefix.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------
# Requests (pure)


def build_request_body(server: ModelServer, spec: ContinuationSpec, mode: str) -> tuple[str, dict]:
    """The API (chat | completions) and the body without ``model``. The server's thinking settings
    enter every mode through runs.thinking.thinking_request, as they enter generation: the soft switch
    in the last user message, ``enable_thinking`` in the template rendered for ``completions``, the
    rest (chat_template_kwargs, reasoning_effort, thinking_budget) in the body."""
    if mode not in MODES:
        raise ContinuationError(f"unknown continuation mode {mode!r}; choose one of {', '.join(MODES)}")
    think = thinking_request(server.thinking, spec.messages)
    messages = think.messages
    decoding: dict[str, Any] = {"max_tokens": spec.max_tokens, "temperature": spec.temperature}
    if spec.seed is not None:
        decoding["seed"] = spec.seed
    if spec.top_p is not None:
        decoding["top_p"] = spec.top_p
    if spec.stop:
        decoding["stop"] = list(spec.stop)
    if mode == COMPLETIONS:
        body = {"prompt": rendered_prompt(server, spec.messages) + spec.partial, **decoding}
        return COMPLETIONS_API, with_extra_body(body, think.extra_body)
    if mode == PREFILL:
        body = {"messages": [*messages, {"role": "assistant", "content": spec.partial}],
                "extra_body": dict(PREFILL_EXTRA_BODY), **decoding}
        return CHAT, with_extra_body(body, think.extra_body)
    return CHAT, with_extra_body({"messages": instructed_messages(messages, spec.partial), **decoding},
                                 think.extra_body)


def rendered_prompt(server: ModelServer, messages: Sequence[Mapping[str, Any]]) -> str:
    """The completions mode's prompt before the partial text: the conversation (under the server's
    thinking settings) rendered by the model's chat template with the generation prompt."""
    if not server.chat_template.strip():
        raise ContinuationError("the completions mode needs the model's chat template; none is configured")
    think = thinking_request(server.thinking, messages)
    try:
        return render_chat(server.chat_template, think.messages, add_generation_prompt=True,
                           eos_token=server.eos_token, **think.template_variables)
    except ChatTemplateError as exc:
        raise ContinuationError(str(exc)) from None


def instructed_messages(messages: list[dict], partial: str) -> list[dict]:
    """The instruction joins the last user message (a second user turn in a row
    is refused by templates that insist on alternating roles)."""
    instruction = INSTRUCTION.format(partial=partial)
    if messages and messages[-1].get("role") == "user":
        last = messages[-1]
        return [*messages[:-1], {**last, "content": f"{last.get('content') or ''}\n\n{instruction}"}]
    return [*messages, {"role": "user", "content": instruction}]


def clean_text(server: ModelServer, spec: ContinuationSpec, mode: str, content: str) -> str:
    """The continuation proper: a raw completion cut at an end-of-turn token the
    server wrote out as text; an instructed reply without the partial answer it echoed."""
    text = content
    if mode == COMPLETIONS and server.eos_token and server.eos_token in text:
        text = text[: text.index(server.eos_token)]
    if mode == INSTRUCTED:
        stripped = text.lstrip()
        for echo in (spec.partial, spec.partial.strip()):
            if echo and stripped.startswith(echo):
                text = stripped[len(echo):]
                break
    return text


def continuation_request(item: int, server: ModelServer, spec: ContinuationSpec, mode: str) -> ModelRequest:
    """One continuation as a request of a run's pool (``item`` is the caller's)."""
    api, body = build_request_body(server, spec, mode)
    return ModelRequest(item=item, build=lambda _output_mode: dict(body), api=api)


def result_from_outcome(outcome: RequestOutcome, server: ModelServer, spec: ContinuationSpec,
                        mode: str) -> ContinuationResult:
    answer = outcome.answer
    calls = outcome.calls
    known = [c for c in calls if c.tokens_known]
    result = ContinuationResult(
        mode=mode, prefix_sha256=prefix_sha256(spec.prefix), cue=spec.cue,
        regime=Regime(answer.model if answer else "", spec.temperature, spec.seed, spec.max_tokens,
                      spec.top_p, spec.stop),
        attempts=len(calls), latency_ms=calls[-1].latency_ms if calls else 0,
        cost_usd=sum(c.cost_usd for c in calls),
    )
    if outcome.status != "ok" or answer is None:
        result.ok = False
        result.error = outcome.reason or "not run: the run stopped before this request"
        # Tokens of failed attempts: known only when every attempt reported them.
        if calls and len(known) == len(calls):
            result.prompt_tokens = sum(c.prompt_tokens or 0 for c in calls)
            result.completion_tokens = sum(c.completion_tokens or 0 for c in calls)
        return result
    result.text = clean_text(server, spec, mode, answer.content)
    result.prompt_tokens, result.completion_tokens = answer.prompt_tokens, answer.completion_tokens
    result.finish_reason, result.cached = answer.finish_reason, answer.cached
    return result


# --------------------------------------------------------------------------
# Running


class Continuer:
    """Continuations of one server in one mode through a ModelPool. ``store``
    and ``scope`` are the cache's (the caller's: e.g. a diagnostic run's)."""

    def __init__(self, server: ModelServer, mode: str, *, store: ResponseStore | None = None,
                 scope: str = "continuation", force: bool = False, control: Control | None = None) -> None:
        if mode not in MODES:
            raise ContinuationError(f"unknown continuation mode {mode!r}; choose one of {', '.join(MODES)}")
        self.server = server
        self.mode = mode
        self.store = store
        self.scope = scope
        self.force = force
        self.control = control or NoStop()

    def run(self, specs: Iterable[ContinuationSpec]) -> list[ContinuationResult]:
        """One result per spec, in order. Failed requests give results with
        ``ok=False`` and the reason; a failure that stops the run (bad key, unknown
        model) raises FatalRunError."""
        specs = list(specs)
        requests = [continuation_request(n, self.server, spec, self.mode) for n, spec in enumerate(specs)]
        outcomes = _run(self.server.endpoint(), self.scope, requests, self.control, store=self.store,
                        force=self.force, raise_fatal=True)
        return [result_from_outcome(outcomes[n], self.server, spec, self.mode) for n, spec in enumerate(specs)]

    def continue_prefix(self, spec: ContinuationSpec) -> ContinuationResult:
        return self.run([spec])[0]

    def forced_answer(self, messages: Sequence[Mapping[str, Any]], prefix: str, *, cue: str = DEFAULT_CUE,
                      max_tokens: int = DEFAULT_ANSWER_TOKENS, seed: int | None = None) -> ContinuationResult:
        return self.continue_prefix(forced_answer_spec(messages, prefix, cue=cue, max_tokens=max_tokens, seed=seed))


def _run(endpoint: Endpoint, scope: str, requests: list[ModelRequest], control: Control, *,
         store: ResponseStore | None = None, force: bool = False, raise_fatal: bool) -> dict[int, RequestOutcome]:
    # A pool per batch: a fatal failure sets the pool's stop event for good.
    pool = ModelPool(endpoint, scope, store, force=force)
    outcomes: dict[int, RequestOutcome] = {}
    try:
        for outcome in pool.run(requests, control):
            outcomes[outcome.request.item] = outcome
    except FatalRunError:
        if raise_fatal:
            raise
    finally:
        pool.close()
    for request in requests:  # never left without an outcome
        outcomes.setdefault(request.item, RequestOutcome(request, "skipped"))
    return outcomes


# --------------------------------------------------------------------------
# Probe

PROBE_QUESTION = "Count from 1 to 20, separated by commas."
# Cut inside "10": decoding in place goes on with "0"; a fresh answer starts over ("1, 2, ...") and
# even a new turn that picks the sequence up writes "10" -- so the first character tells them apart.
PROBE_PREFIX = "1, 2, 3, 4, 5, 6, 7, 8, 9, 1"
PROBE_TOKENS = 8
EVIDENCE_CHARS = 60


def continues_in_place(text: str) -> bool:
    return text.startswith("0")


@dataclass
class ModeEvidence:
    mode: str
    supported: bool
    reason: str
    status: int | None = None  # HTTP status of the last attempt; None when nothing answered
    first_tokens: str = ""  # the start of the reply
    latency_ms: int = 0


@dataclass
class ProbeResult:
    base_url: str
    model: str
    model_reported: str
    modes: list[ModeEvidence] = field(default_factory=list)
    chosen: str | None = None

    @property
    def supported(self) -> list[str]:
        return [e.mode for e in self.modes if e.supported]

    def to_dict(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "model": self.model, "model_reported": self.model_reported,
                "chosen": self.chosen, "supported": self.supported, "modes": [asdict(e) for e in self.modes],
                "probe": {"question": PROBE_QUESTION, "prefix": PROBE_PREFIX, "max_tokens": PROBE_TOKENS}}


def probe_model(server: ModelServer, *, control: Control | None = None) -> ProbeResult:
    """Which continuation modes the server supports, with the evidence, and the
    strongest of them. Three cheap greedy requests of ``PROBE_TOKENS`` tokens,
    never cached. Raises ServerUnreachable when nothing answers at the base
    URL, FatalRunError when the server refuses the key."""
    control = control or NoStop()
    endpoint = server.endpoint(probing=True)
    messages = ({"role": "user", "content": PROBE_QUESTION},)
    spec = ContinuationSpec(messages, PROBE_PREFIX, max_tokens=PROBE_TOKENS, temperature=0.0, seed=0)
    result = ProbeResult(redact_url(server.base_url), server.model, "")
    for mode in MODES:
        if mode == COMPLETIONS and not server.chat_template.strip():
            # Still ask, for the evidence: the endpoint may answer, but without the model's template the
            # chat cannot be rendered as the model saw it.
            body = {"prompt": f"{PROBE_QUESTION}\n{PROBE_PREFIX}", "max_tokens": PROBE_TOKENS,
                    "temperature": 0.0, "seed": 0}
            request = ModelRequest(item=0, build=lambda _m, body=body: dict(body), api=COMPLETIONS_API)
        else:
            request = continuation_request(0, server, spec, mode)
        outcome = _run(endpoint, "probe", [request], control, raise_fatal=False)[0]
        if _unreachable(outcome):
            raise ServerUnreachable(f"no server answers at {redact_url(server.base_url)}: {outcome.reason}")
        if outcome.fatal and any(c.http_status in (401, 403) for c in outcome.calls):
            raise FatalRunError(outcome.fatal)
        evidence = _evidence(server, spec, mode, outcome)
        result.modes.append(evidence)
        if outcome.answer is not None and outcome.answer.model and not result.model_reported:
            result.model_reported = outcome.answer.model
    result.chosen = next((e.mode for e in result.modes if e.supported), None)
    return result


def _evidence(server: ModelServer, spec: ContinuationSpec, mode: str, outcome: RequestOutcome) -> ModeEvidence:
    calls = outcome.calls
    status = calls[-1].http_status if calls else None
    latency = calls[-1].latency_ms if calls else 0
    if outcome.status != "ok" or outcome.answer is None:
        return ModeEvidence(mode, False, f"no answer: {outcome.reason or 'not run'}", status, "", latency)
    text = clean_text(server, spec, mode, outcome.answer.content)
    first = text[:EVIDENCE_CHARS]
    if mode == INSTRUCTED:
        how = "continued in place" if continues_in_place(text) else "did not continue in place"
        return ModeEvidence(mode, True, f"the chat endpoint answers (always available; {how})", status, first,
                            latency)
    if mode == COMPLETIONS and not server.chat_template.strip():
        return ModeEvidence(mode, False, "the completions endpoint answers, but no chat template is configured",
                            status, first, latency)
    if continues_in_place(text):
        return ModeEvidence(mode, True, f"continued {PROBE_PREFIX!r} in place", status, first, latency)
    return ModeEvidence(mode, False, "answered, but did not continue the text in place (a fresh answer)", status,
                        first, latency)


def _unreachable(outcome: RequestOutcome) -> bool:
    """Every attempt failed to connect (nothing answered at all)."""
    return (outcome.status == "failed" and bool(outcome.calls)
            and all(c.http_status is None and c.error.startswith("could not connect") for c in outcome.calls))
