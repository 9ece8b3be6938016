"""Prompt templates of subject models: rendering and the built-in ones. No
ORM, no I/O but reading the bundled exemplars.

A template is a Django template rendered in a sandbox, as the judges' prompts
are: no autoescaping (prompts are text, not HTML), a missing variable renders
empty, and no tag library beyond Django's built-ins can be loaded. Its
context is ``problem`` (the statement), ``exemplars`` (a list of
``{"question", "answer"}``) and ``problem_id``."""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from pathlib import Path

from annotation.importing.regime import messages_hash
from runs.templating import BoundedTemplate, PromptTemplateError
from runs.templating import compile_template as _compile_bounded

ZERO_SHOT = "zero-shot"
GSM8K_8SHOT = "gsm8k-8shot-cot"

ZERO_SHOT_TEMPLATE = (
    "Solve the following problem step by step, one step per line. "
    "End with a line \"The answer is N.\"\n\n{{ problem }}"
)
# The format of Wei et al. (2022): "Q: ... A: ... The answer is N." per exemplar, then the question.
K_SHOT_TEMPLATE = "{% for e in exemplars %}Q: {{ e.question }}\nA: {{ e.answer }}\n\n{% endfor %}Q: {{ problem }}\nA:"


@cache
def gsm8k_exemplars() -> tuple[dict[str, str], ...]:
    """The 8 chain-of-thought exemplars for GSM8K of Wei et al. (2022), Table 20."""
    path = Path(__file__).resolve().parent / "data" / "gsm8k_8shot_cot.json"
    return tuple(json.loads(path.read_text(encoding="utf-8")))


def builtin_templates() -> list[dict]:
    """The templates every study can use without writing one (version 1 each)."""
    return [
        {"name": ZERO_SHOT, "kind": "zero-shot", "template": ZERO_SHOT_TEMPLATE, "exemplars": []},
        {"name": GSM8K_8SHOT, "kind": "k-shot", "template": K_SHOT_TEMPLATE, "exemplars": list(gsm8k_exemplars())},
    ]


# Tags of Django's built-in library a prompt has no use for: {% debug %} prints the context and
# the loaded modules, {% include %} / {% extends %} would read other templates (the engine has no
# loader directories, but a prompt must not depend on that).
_REFUSED_TAGS = re.compile(r"{%-?\s*(debug|include|extends)\b")


def template_error(source: str) -> str | None:
    """Why ``source`` cannot be a prompt template (it does not compile, or uses a refused tag), or None."""
    refused = _REFUSED_TAGS.search(source)
    if refused:
        return f"the {{% {refused.group(1)} %}} tag is not allowed in a prompt template"
    try:
        _compile_bounded(source)
    except PromptTemplateError as exc:
        return str(exc)
    return None


def names_the_problem(source: str) -> bool:
    """Whether the template puts the problem into the prompt (``{{ problem }}``, with or without filters)."""
    return re.search(r"{{\s*problem\s*(\||}})", source) is not None


@lru_cache(maxsize=64)
def _compiled(source: str) -> BoundedTemplate:
    """Compiled once per process: a run renders the same template for every request."""
    return _compile_bounded(source)


def render(source: str, *, problem: str, problem_id: str = "", exemplars: list[dict] | None = None) -> str:
    """The prompt; PromptTemplateError (a ValueError) when the template fails or goes over a limit
    (runs.templating: bounded work, output and filter arguments; a read-only context)."""
    return _compiled(source).render({"problem": problem, "problem_id": problem_id, "exemplars": exemplars or []}).strip()


def messages(system_prompt: str, user_text: str) -> list[dict[str, str]]:
    out = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*out, {"role": "user", "content": user_text}]


def completion_prompt(system_prompt: str, user_text: str) -> str:
    """The raw prompt of the completions API: the system prompt, then the text."""
    return f"{system_prompt}\n\n{user_text}" if system_prompt else user_text


def prompt_hash(api: str, system_prompt: str, user_text: str) -> str:
    """The regime's messages hash (annotation.importing.regime), of what is sent."""
    if api == "completions":
        return messages_hash(completion_prompt(system_prompt, user_text))
    return messages_hash(messages(system_prompt, user_text))
