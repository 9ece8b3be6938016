"""User-written prompt templates in Django's template language, rendered within bounds
(docs/runs.md, "Bounded templates"): subject models' prompt templates (subjects.prompts) and judge
prompts (judges.protocol) compile and render here.

Any study owner writes these, so a render is bounded whatever the template says:

* **work**: every node rendered and every item a ``{% for %}`` walks counts one step; more than
  ``MAX_STEPS`` steps, or ``MAX_SECONDS`` of rendering, stops it;
* **output**: at most ``MAX_OUTPUT_CHARS`` characters (counted as text is produced, so a loop is
  stopped early, not after it built gigabytes);
* **filters** with a size argument (``ljust``, ``rjust``, ``center``, ``stringformat``,
  ``floatformat``, ``wordwrap``, ``truncatechars``, ``truncatewords``) take at most
  ``MAX_FILTER_ARGUMENT`` (runs.template_library); ``add`` never builds more than the output limit; ``{% lorem %}``,
  ``{% debug %}``, ``{% include %}`` and ``{% extends %}`` do not compile
  (runs.template_library overrides Django's built-ins of those names);
* **no mutation**: the context is frozen (lists become tuples, dicts read-only mappings), so
  ``{{ exemplars.pop }}`` finds nothing to call;
* **memory and time, whatever builds the value**: the render runs in a child process (runs.sandbox) whose
  address space may grow by at most REASONAUDIT_TEMPLATE_MEMORY_MB and which is killed at the time bound,
  so a filter that builds a huge value (``join``, ``make_list``, ``slice``, ``{% with %}``, ``|length``)
  fails to allocate it there, never in the web process or the worker;
* every failure while rendering (a filter's ``OverflowError``, ``ValueError``, ``RecursionError``, a
  limit) is a ``PromptTemplateError`` with a message.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from django.template import Context, Engine, TemplateSyntaxError
from django.template.base import Node, NodeList
from django.template.defaulttags import ForNode

from reasonlib.refusals import Invalid
from runs import sandbox

MAX_STEPS = 200_000  # a GSM8K 8-shot prompt takes about 50, a judge prompt of 100 steps about 500
MAX_OUTPUT_CHARS = 1_000_000
MAX_SECONDS = 2.0
MAX_SOURCE_CHARS = 200_000

# Prompts are text, not HTML: no autoescaping, and a missing variable renders empty. No tag library
# can be loaded; runs.template_library replaces the built-ins that could be abused.
ENGINE = Engine(autoescape=False, string_if_invalid="", libraries={}, builtins=["runs.template_library"])


class PromptTemplateError(Invalid):
    """A prompt template that does not compile, or failed or went over a limit while rendering."""


class _Budget:
    __slots__ = ("steps", "chars", "deadline", "max_steps", "max_chars", "seconds")

    def __init__(self, max_steps: int, max_chars: int, seconds: float) -> None:
        self.steps = 0
        self.chars = 0
        self.max_steps, self.max_chars, self.seconds = max_steps, max_chars, seconds
        self.deadline = time.monotonic() + seconds

    def step(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > self.max_steps:
            raise PromptTemplateError(f"the template takes more than {self.max_steps:,} steps to render")
        if self.steps % 256 == 0 and time.monotonic() > self.deadline:
            raise PromptTemplateError(f"the template takes longer than {self.seconds:g} s to render")

    def output(self, n: int) -> None:
        self.chars += n
        if self.chars > self.max_chars:
            raise PromptTemplateError(f"the template renders more than {self.max_chars:,} characters")


def _budget(context: Context) -> _Budget | None:
    return getattr(context, "template_budget", None)


class _CountedSequence:
    """A ``{% for %}`` loop's sequence: every item it yields is a step (ForNode turns it into a list
    first, so a long loop is stopped while the list is built)."""

    def __init__(self, sequence) -> None:
        self.sequence = sequence

    def resolve(self, context: Context, ignore_failures: bool = False):
        values = self.sequence.resolve(context, ignore_failures=ignore_failures)
        budget = _budget(context)
        if values is None or budget is None:
            return values
        return _counted(values, budget)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sequence, name)


def _counted(values, budget: _Budget) -> Iterator[Any]:
    for value in values:
        budget.step()
        yield value


def _guard_node(node: Node) -> None:
    render = node.render_annotated
    leaf = not any(isinstance(v, NodeList) for v in vars(node).values())

    def render_annotated(context: Context, _render=render, _leaf=leaf) -> str:
        budget = _budget(context)
        if budget is not None:
            budget.step()
        out = _render(context)
        if budget is not None and _leaf:
            budget.output(len(out))  # only leaves produce new text; the others join their children's
        return out

    node.render_annotated = render_annotated  # type: ignore[method-assign]
    if isinstance(node, ForNode):
        node.sequence = _CountedSequence(node.sequence)


def _children(value: Any) -> Iterator[Node]:
    if isinstance(value, Node):
        yield value
    elif isinstance(value, (list, tuple)):  # NodeList, IfNode's [(condition, nodelist), ...]
        for item in value:
            yield from _children(item)


def _guard(nodelist: NodeList) -> None:
    stack = list(nodelist)
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        _guard_node(node)
        for value in vars(node).values():
            stack.extend(_children(value))


def freeze(value: Any) -> Any:
    """A read-only copy of template context data: tuples for lists, read-only mappings for dicts."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


class BoundedTemplate:
    def __init__(self, source: str) -> None:
        # Compiling happens where the template is saved or validated (the web process too): its cost grows
        # with the source, so the source is bounded (a judge prompt is about 3,000 characters).
        if len(source) > MAX_SOURCE_CHARS:
            raise PromptTemplateError(f"the template is longer than {MAX_SOURCE_CHARS:,} characters")
        self.source = source
        try:
            self.template = ENGINE.from_string(source)
        except TemplateSyntaxError as exc:
            raise PromptTemplateError(str(exc)) from None
        except (RecursionError, OverflowError, ValueError) as exc:  # e.g. deeply nested tags
            raise PromptTemplateError(f"the template does not compile: {type(exc).__name__}") from None
        _guard(self.template.nodelist)

    def render(self, variables: Mapping[str, Any]) -> str:
        """The rendered text, from a child process with memory and time limits (runs.sandbox): the bounds
        above give their own messages, the child's limits catch whatever builds a value they do not count."""
        try:
            return sandbox.run("runs.templating:render_here",
                               (self.source, dict(variables), MAX_STEPS, MAX_OUTPUT_CHARS, MAX_SECONDS),
                               seconds=MAX_SECONDS, max_chars=MAX_OUTPUT_CHARS)
        except sandbox.SandboxRefused as exc:
            raise PromptTemplateError(f"the template {exc}") from None
        except ValueError as exc:
            raise PromptTemplateError(str(exc)) from None

    def render_bounded(self, variables: Mapping[str, Any], max_steps: int, max_chars: int, seconds: float) -> str:
        """The render itself, with the step, output and time bounds (in the sandbox's child)."""
        context = Context(freeze(variables), autoescape=False)
        context.template_budget = _Budget(max_steps, max_chars, seconds)  # type: ignore[attr-defined]
        try:
            out = self.template.render(context)
        except PromptTemplateError:
            raise
        except (ArithmeticError, ValueError, TypeError, LookupError, AttributeError, RecursionError,
                TemplateSyntaxError) as exc:
            raise PromptTemplateError(f"the template failed while rendering: {type(exc).__name__}: "
                                      f"{str(exc)[:200]}") from None
        if len(out) > max_chars:
            raise PromptTemplateError(f"the template renders more than {max_chars:,} characters")
        return out


def compile_template(source: str) -> BoundedTemplate:
    """The compiled, bounded template; PromptTemplateError (a ValueError) with Django's message."""
    return BoundedTemplate(source)


@lru_cache(maxsize=64)
def _compiled(source: str) -> BoundedTemplate:
    return BoundedTemplate(source)


def render_here(source: str, variables: Mapping[str, Any], max_steps: int, max_chars: int, seconds: float) -> str:
    """What the sandbox's child runs (runs.sandbox); compiled once per child."""
    return _compiled(source).render_bounded(variables, max_steps, max_chars, seconds)
