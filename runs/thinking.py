"""What a subject model's thinking settings add to a model call (pure: no ORM, no I/O).

Every call of a subject model -- generation, fidelity, abstraction, and each continuation mode
of interventions, anytime and early answering -- goes through :func:`thinking_request`, so a
continuation is decoded under the same thinking regime as the trace it continues
(docs/generation.md, "Reasoning models"). The settings and their switches:

* ``chat_template_kwargs: {"enable_thinking": bool}`` (switch ``template``) -- Qwen3's chat
  template switch, passed to the template by vLLM, SGLang and llama.cpp's server; for a raw
  completions prompt rendered here from the model's own template, the same variable is given
  to that template;
* a "/think" or "/no_think" marker at the end of the last user message (switch ``prompt``) --
  Qwen3's soft switch, for servers that pass no template arguments (``both`` sends both);
* ``reasoning_effort`` (low / medium / high);
* ``thinking_budget`` (tokens of thought) -- sent only when set, never when thinking is off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ON, OFF, DEFAULT = "on", "off", ""
TEMPLATE, PROMPT, BOTH = "template", "prompt", "both"
EFFORTS = ("low", "medium", "high")
THINK_MARK, NO_THINK_MARK = "/think", "/no_think"


def request_extras(thinking: str, switch: str, effort: str, budget: int | None) -> dict[str, Any]:
    """The body keys the settings add to a chat or completions request (sent as the client's extra_body)."""
    body: dict[str, Any] = {}
    if thinking in (ON, OFF) and switch in (TEMPLATE, BOTH):
        body["chat_template_kwargs"] = {"enable_thinking": thinking == ON}
    if effort:
        if effort not in EFFORTS:
            raise ValueError(f"reasoning_effort {effort!r}: choose one of {', '.join(EFFORTS)}")
        body["reasoning_effort"] = effort
    if budget is not None and thinking != OFF:
        if budget < 0:
            raise ValueError(f"thinking_budget {budget}: must be 0 or more tokens")
        body["thinking_budget"] = budget
    return body


def user_text(text: str, thinking: str, switch: str) -> str:
    """The user message with Qwen3's soft switch appended when the settings say so."""
    if thinking in (ON, OFF) and switch in (PROMPT, BOTH):
        return f"{text.rstrip()} {THINK_MARK if thinking == ON else NO_THINK_MARK}"
    return text


@dataclass(frozen=True)
class ThinkingSettings:
    """A subject model's thinking settings; the default (all unset) adds nothing to a request."""

    thinking: str = DEFAULT  # on | off | "" (the server's default)
    switch: str = TEMPLATE  # template | prompt | both
    reasoning_effort: str = ""
    budget: int | None = None

    @classmethod
    def of(cls, cfg: Mapping[str, Any]) -> ThinkingSettings:
        """The settings of a configuration snapshot or a model's fields (older snapshots have none)."""
        return cls(cfg.get("thinking") or DEFAULT, cfg.get("thinking_switch") or TEMPLATE,
                   cfg.get("reasoning_effort") or "", cfg.get("thinking_budget"))


@dataclass(frozen=True)
class ThinkingRequest:
    """A call's messages with the soft switch applied, the variables a chat template rendered here
    takes, and the body keys sent beside the prompt (merge them into ``extra_body``)."""

    messages: list[dict[str, Any]]
    template_variables: dict[str, Any] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)


def thinking_request(settings: ThinkingSettings, messages: Sequence[Mapping[str, Any]]) -> ThinkingRequest:
    """The one place a subject model's thinking settings enter a call: the soft switch joins the
    last user message, ``enable_thinking`` goes to a template rendered here, the rest to the body."""
    out = [dict(m) for m in messages]
    for m in reversed(out):
        if m.get("role") == "user":
            m["content"] = user_text(str(m.get("content") or ""), settings.thinking, settings.switch)
            break
    variables = {"enable_thinking": settings.thinking == ON} if settings.thinking in (ON, OFF) else {}
    extras = request_extras(settings.thinking, settings.switch, settings.reasoning_effort, settings.budget)
    return ThinkingRequest(out, variables, extras)


def with_extra_body(body: dict[str, Any], extras: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with ``extras`` merged into its ``extra_body`` (keys already there, e.g. prefill's, stay)."""
    if extras:
        body["extra_body"] = {**dict(extras), **(body.get("extra_body") or {})}
    return body
