"""A model's own chat template, rendered as Hugging Face renders it
(``tokenizer.apply_chat_template(..., tokenize=False)``): a Jinja template in
an immutable sandbox, with ``trim_blocks`` / ``lstrip_blocks``, loop controls,
the ``tojson`` filter and the ``raise_exception`` / ``strftime_now`` globals.

The continuation mode ``completions`` sends the rendered chat plus a partial
assistant text as a raw prompt, so the model decodes from exactly the tokens
it would have produced itself. Pure: no ORM, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatTemplateError(ValueError):
    """A template that does not compile or refuses the conversation (its ``raise_exception``)."""


class _Generation(Extension):
    """``{% generation %}...{% endgeneration %}`` marks the assistant's tokens for
    training masks (Hugging Face's AssistantTracker); rendering keeps the body as it is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body).set_lineno(lineno)


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators=None,
            sort_keys: bool = False) -> str:
    # Hugging Face's own filter: Jinja's built-in tojson escapes HTML characters, which changes the prompt.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


@lru_cache(maxsize=32)
def compile_template(template: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(template)
    except jinja2.TemplateError as exc:
        raise ChatTemplateError(f"the chat template does not compile: {exc}") from None


def render_chat(template: str, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
                bos_token: str = "", eos_token: str = "", **variables: Any) -> str:
    """The conversation as the model sees it. ``bos_token`` is empty by default:
    a server tokenizing a raw prompt adds the BOS token itself, and a template that
    writes ``{{ bos_token }}`` would otherwise give it twice."""
    if not template.strip():
        raise ChatTemplateError("no chat template is configured")
    try:
        return compile_template(template).render(
            messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt,
            bos_token=bos_token, eos_token=eos_token, **variables,
        )
    except ChatTemplateError:
        raise
    except jinja2.TemplateError as exc:
        raise ChatTemplateError(f"the chat template failed: {exc}") from None


@dataclass(frozen=True)
class TemplateSource:
    template: str
    bos_token: str = ""
    eos_token: str = ""


def template_from_text(text: str) -> TemplateSource:
    """A chat template from a file's text: a Jinja template as it is, or a
    Hugging Face ``tokenizer_config.json`` (its ``chat_template``, the ``default``
    one when it lists several, and its ``eos_token``)."""
    stripped = text.lstrip()
    if not stripped.startswith("{") or stripped.startswith(("{%", "{{", "{#")):
        return TemplateSource(text)
    try:
        config = json.loads(text)
    except json.JSONDecodeError:
        return TemplateSource(text)
    if not isinstance(config, dict) or "chat_template" not in config:
        raise ChatTemplateError("the JSON file has no chat_template (expected a tokenizer_config.json)")
    template = config["chat_template"]
    if isinstance(template, list):  # [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    if not isinstance(template, str) or not template.strip():
        raise ChatTemplateError("the tokenizer config's chat_template is empty")
    return TemplateSource(template, eos_token=_token(config.get("eos_token")))


def _token(value: Any) -> str:
    if isinstance(value, dict):  # {"content": "</s>", "lstrip": false, ...}
        value = value.get("content")
    return value if isinstance(value, str) else ""
