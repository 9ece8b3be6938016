"""A model's own chat template, rendered as Hugging Face renders it
(``tokenizer.apply_chat_template(..., tokenize=False)``): a Jinja template in
an immutable sandbox, with ``trim_blocks`` / ``lstrip_blocks``, loop controls,
the ``tojson`` filter and the ``raise_exception`` / ``strftime_now`` globals.

The continuation mode ``completions`` sends the rendered chat plus a partial
assistant text as a raw prompt, so the model decodes from exactly the tokens
it would have produced itself. No ORM; the render runs in a child process with
memory and time limits (runs.sandbox).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range

from reasonlib.refusals import Invalid
from runs import sandbox


class ChatTemplateError(Invalid):
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


# Bounds of one render (docs/runs.md, "Bounded templates"): a chat template comes from a study owner.
MAX_STEPS = 2_000_000  # loop iterations, calls and range() items together
MAX_OUTPUT_CHARS = 2_000_000
MAX_VALUE_CHARS = 1_000_000  # the longest string or list "*" or "+" may build
MAX_POWER_BITS = 4_096  # the largest number "**" may build
MAX_SECONDS = 2.0
MAX_SOURCE_CHARS = 200_000
_ITER = "__bounded_iter"


class _Budget:
    __slots__ = ("steps", "deadline", "max_steps", "seconds", "max_value")

    def __init__(self, max_steps: int, seconds: float, max_value: int) -> None:
        self.steps = 0
        self.max_steps, self.seconds, self.max_value = max_steps, seconds, max_value
        self.deadline = time.monotonic() + seconds

    def step(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > self.max_steps:
            raise ChatTemplateError(f"the chat template takes more than {self.max_steps:,} steps to render")
        if self.steps & 255 == 0 and time.monotonic() > self.deadline:
            raise ChatTemplateError(f"the chat template takes longer than {self.seconds:g} s to render")


_BUDGET: ContextVar[_Budget | None] = ContextVar("chat_template_budget", default=None)


def _charge(n: int = 1) -> None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.step(n)


def _bounded_iter(iterable: Any) -> Iterator[Any]:
    """What every {% for %} walks (the parse adds the call): each item is a step."""
    for item in iterable:
        _charge()
        yield item


def _bounded_range(*args: int) -> range:
    """range() as the sandbox allows it (at most 100,000 items), its items counted up front."""
    try:
        numbers = safe_range(*args)
    except OverflowError as exc:
        raise ChatTemplateError(f"the chat template asks for a range too large: {exc}") from None
    _charge(len(numbers))
    return numbers


def _max_value() -> int:
    budget = _BUDGET.get()
    return budget.max_value if budget is not None else MAX_VALUE_CHARS


def _length(value: Any) -> int | None:
    return len(value) if isinstance(value, (str, list, tuple)) else None


class _BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The Hugging Face sandbox, bounded: every for loop's items and every call are steps, and "*",
    "**" and "+" never build a value beyond the limits (checked before the operation)."""

    intercepted_binops = frozenset({"*", "**", "+"})

    def call_binop(self, context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                size = _length(seq)
                if size is not None and isinstance(times, int) and size * times > _max_value():
                    raise ChatTemplateError(f"the chat template builds a value of more than {_max_value():,} "
                                            "characters or items")
        elif operator == "**":
            if isinstance(left, (int, float)) and isinstance(right, (int, float)) and abs(left) > 1 \
                    and abs(right) * math.log2(abs(left)) > MAX_POWER_BITS:
                raise ChatTemplateError(f"the chat template computes a number of more than {MAX_POWER_BITS:,} bits")
        elif operator == "+":
            a, b = _length(left), _length(right)
            if a is not None and b is not None and a + b > _max_value():
                raise ChatTemplateError(f"the chat template builds a value of more than {_max_value():,} "
                                        "characters or items")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context, __obj, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - as the sandbox names them
        _charge()
        return super().call(__context, __obj, *args, **kwargs)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        for loop in list(tree.find_all(nodes.For)):
            loop.iter = nodes.Call(nodes.Name(_ITER, "load", lineno=loop.lineno), [loop.iter], [], None, None,
                                   lineno=loop.lineno)
        return tree


@lru_cache(maxsize=32)
def compile_template(template: str) -> jinja2.Template:
    # Compiling happens where the template is saved or validated (the web process too): its cost grows
    # with the source, so the source is bounded (chat templates of real models are under 20,000 characters).
    if len(template) > MAX_SOURCE_CHARS:
        raise ChatTemplateError(f"the chat template is longer than {MAX_SOURCE_CHARS:,} characters")
    env = _BoundedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, loopcontrols])
    env.globals[_ITER] = _bounded_iter
    env.globals["range"] = _bounded_range
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(template)
    except jinja2.TemplateError as exc:
        raise ChatTemplateError(f"the chat template does not compile: {exc}") from None
    except (RecursionError, MemoryError, ValueError, OverflowError, SyntaxError) as exc:
        # Nesting too deep to compile: Jinja's parser recurses, and Python refuses the generated code
        # ("too many statically nested blocks", "too many levels of indentation").
        raise ChatTemplateError(f"the chat template does not compile: {type(exc).__name__}: {str(exc)[:100]}") from None


def render_chat(template: str, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
                bos_token: str = "", eos_token: str = "", **variables: Any) -> str:
    """The conversation as the model sees it. ``bos_token`` is empty by default:
    a server tokenizing a raw prompt adds the BOS token itself, and a template that
    writes ``{{ bos_token }}`` would otherwise give it twice. Rendered in a child process with memory
    and time limits (runs.sandbox): whatever a filter or a method builds, it builds there."""
    if not template.strip():
        raise ChatTemplateError("no chat template is configured")
    args = (template, [dict(m) for m in messages], add_generation_prompt, bos_token, eos_token, variables,
            MAX_STEPS, MAX_OUTPUT_CHARS, MAX_VALUE_CHARS, MAX_SECONDS)
    try:
        return sandbox.run("runs.chat_template:render_here", args, seconds=MAX_SECONDS, max_chars=MAX_OUTPUT_CHARS)
    except sandbox.SandboxRefused as exc:
        raise ChatTemplateError(f"the chat template {exc}") from None
    except ValueError as exc:
        raise ChatTemplateError(str(exc)) from None


def render_here(template: str, messages: list[dict], add_generation_prompt: bool, bos_token: str, eos_token: str,
                variables: dict[str, Any], max_steps: int, max_chars: int, max_value: int, seconds: float) -> str:
    """The render itself, with the step, output and time bounds (what the sandbox's child runs)."""
    compiled = compile_template(template)
    budget = _Budget(max_steps, seconds, max_value)
    token = _BUDGET.set(budget)
    try:
        out: list[str] = []
        size = 0
        for chunk in compiled.generate(messages=messages, add_generation_prompt=add_generation_prompt,
                                       bos_token=bos_token, eos_token=eos_token, **variables):
            size += len(chunk)
            if size > max_chars:
                raise ChatTemplateError(f"the chat template renders more than {max_chars:,} characters")
            budget.step()
            out.append(chunk)
        return "".join(out)
    except ChatTemplateError:
        raise
    except jinja2.TemplateError as exc:
        raise ChatTemplateError(f"the chat template failed: {exc}") from None
    except (ArithmeticError, ValueError, TypeError, LookupError, AttributeError, RecursionError) as exc:
        # Whatever the template's own expressions raise is the template's error, with a message.
        raise ChatTemplateError(f"the chat template failed: {type(exc).__name__}: {str(exc)[:200]}") from None
    finally:
        _BUDGET.reset(token)


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
