"""Thinking settings of a subject model and what they add to a request (pure: no ORM, no I/O).

Servers switch a reasoning model's thinking in different ways, so the setting says both whether
and how (docs/generation.md, "Reasoning models"):

* ``chat_template_kwargs: {"enable_thinking": bool}`` -- Qwen3's chat template switch, passed to
  the template by vLLM, SGLang and llama.cpp's server;
* a "/think" or "/no_think" marker at the end of the user message -- Qwen3's soft switch, the only
  one a server that passes no template arguments (Ollama, most hosted APIs) lets through;
* ``reasoning_effort`` (low / medium / high) -- OpenAI's reasoning models, gpt-oss, and servers that
  map it to a budget;
* ``thinking_budget`` (tokens of thought, then the server closes the thought) -- Qwen's API and
  servers that implement budget forcing. Sent only when set; a server that ignores it is not told
  apart here (the thought's token count in each trace's regime shows what happened).
"""

from __future__ import annotations

import re
from typing import Any

# The request side lives in runs.thinking (the one function every model call of a subject model goes
# through); its names stay importable from here.
from runs.thinking import (  # noqa: F401
    BOTH,
    DEFAULT,
    EFFORTS,
    NO_THINK_MARK,
    OFF,
    ON,
    PROMPT,
    TEMPLATE,
    THINK_MARK,
    ThinkingSettings,
    request_extras,
    user_text,
)

# Word pieces, as faithfulness.core.anytime counts approximate tokens.
PIECE_RE = re.compile(r"\s*(?:\w+|[^\w\s])")


def approx_tokens(text: str | None) -> int:
    """Word pieces of a text: the count of its approximate tokens when the server gave none."""
    return len(PIECE_RE.findall(text or ""))


def settings_of(cfg: dict[str, Any]) -> dict[str, Any]:
    """The thinking settings of a run's configuration snapshot (older snapshots have none)."""
    return {"thinking": cfg.get("thinking") or DEFAULT, "thinking_switch": cfg.get("thinking_switch") or TEMPLATE,
            "reasoning_effort": cfg.get("reasoning_effort") or "", "thinking_budget": cfg.get("thinking_budget")}


def regime_fields(cfg: dict[str, Any]) -> dict[str, Any]:
    """The regime's record of the settings: only those set, so a plain model's regime is unchanged."""
    s = settings_of(cfg)
    out: dict[str, Any] = {}
    if s["thinking"]:
        out["thinking"] = s["thinking"]
        out["thinking_switch"] = s["thinking_switch"]
    if s["reasoning_effort"]:
        out["reasoning_effort"] = s["reasoning_effort"]
    if s["thinking_budget"] is not None:
        out["thinking_budget"] = s["thinking_budget"]
    return out
