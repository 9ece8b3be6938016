"""Calling a subject model, shared by every kind of run that asks one (generation, fidelity, abstraction): its
endpoint and cache scope, the request body of a prompt (decoding and thinking settings, a chat template's
rendering), reading a completion, and the inference regime of the trace it becomes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from annotation.importing.regime import host_of, messages_hash, regime
from reasonlib.thinking import split_thinking
from runs.chat_template import ChatTemplateError, render_chat
from runs.thinking import ThinkingSettings, thinking_request, with_extra_body
from runs.transport import PROMPT, Choice, Endpoint, FatalRunError, Malformed
from runs.version import code_version
from subjects import prompts, thinking
from subjects.models import SubjectModel


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
