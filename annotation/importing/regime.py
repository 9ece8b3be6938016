"""The inference regime stored with an imported trace (spec: generation.md).

Pure helpers shared by the eval-log importers: one key order, one way to hash
the rendered messages, so two logs of the same prompt give the same hash
whichever tool wrote them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

# generation.md, "Inference regime": the fields every regime names, in this order.
REGIME_KEYS = (
    "model", "base_url_host", "api", "prompt_template", "prompt_template_version", "messages_hash",
    "temperature", "top_p", "seed", "max_tokens", "stop", "k", "tool_access", "continuation", "code_version",
)


def regime(**fields: Any) -> dict[str, Any]:
    """A regime dict with every key of REGIME_KEYS (None where the log does not say), then any extras."""
    named = {key: fields.pop(key, None) for key in REGIME_KEYS}
    return {**named, **{k: v for k, v in fields.items() if v is not None}}


def host_of(url: str | None) -> str | None:
    """``host[:port]`` of a base URL: where the model ran, without paths or credentials."""
    if not url:
        return None
    parts = urlsplit(url if "://" in url else f"//{url}")
    host = parts.hostname
    if not host:
        return None
    return f"{host}:{parts.port}" if parts.port else host


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # OpenAI-style content parts: only the text is what the model read as words.
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def prompt_chars(messages: Iterable[dict[str, Any]]) -> int:
    """The length of the messages' text as canonical_messages would build it, without building it."""
    total = 0
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(len(str(part.get("text") or "")) for part in content if isinstance(part, dict))
        elif content is not None:
            total += len(str(content))
    return total


def canonical_messages(messages: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"role": str(m.get("role") or ""), "content": _text(m.get("content"))} for m in messages]


def messages_hash(messages: Iterable[dict[str, Any]] | str) -> str:
    """sha256 of the rendered prompt: chat messages as ``[{"role", "content"}]`` (text only,
    canonical JSON), or a raw completions prompt as its UTF-8 text."""
    if isinstance(messages, str):
        data = messages
    else:
        data = json.dumps(canonical_messages(messages), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()
