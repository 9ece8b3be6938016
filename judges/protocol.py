"""The LLM judge protocol: the prompt a judge sees and the answer it must give
(docs/judges.md, "The LLM protocol"). No ORM and no I/O: the provider and the
prompt preview both call these functions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reasonlib import json_answer
from runs import transport
from runs.templating import BoundedTemplate, PromptTemplateError
from runs.templating import compile_template as _compile_bounded


@dataclass(frozen=True)
class TraceInput:
    """Everything a judge may see of one trace."""

    trace_pk: int
    trace_id: str
    model: str
    problem: str
    gold_answer: str
    answer: str
    steps: tuple[str, ...]
    skeleton: tuple[tuple[str, str], ...] = ()  # approved skeleton: (text, check expression)


@dataclass
class LabelOut:
    step: int  # 1-based
    verdict: str
    skeleton_refs: list[int]
    confidence: float | None
    reason: str


SKELETON = "skeleton"
REFERENCE_FREE = "reference-free"

SYSTEM_MESSAGE = (
    "You audit step-by-step solutions to math problems. You judge every step on its own: "
    "is what it claims true and does it follow from the problem and the steps before it? "
    "You answer with one JSON object and nothing else."
)

DEFAULT_TEMPLATE = """Problem:
{{ problem }}

Gold answer: {{ gold_answer }}
{% if mode == "skeleton" %}
Reference skeleton (the minimal steps of a correct solution):
{% for s in skeleton %}S{{ s.number }}. {{ s.text }}
{% empty %}(no approved skeleton)
{% endfor %}{% endif %}
The model's solution, {{ n_steps }} step{{ n_steps|pluralize }}:
{% for s in steps %}Step {{ s.number }}: {{ s.text }}
{% endfor %}
Final answer given: {{ answer|default:"(none)" }}

Label every step:
- "valid": what the step says is correct and follows from what came before;
- "invalid": the step contains an error (wrong arithmetic, a false claim, a wrong use of the problem's facts);
- "neutral": the step plans, restates or says nothing that can be checked.
{% if mode == "skeleton" %}For every step give skeleton_refs: the numbers of the skeleton steps it correctly establishes (an empty list if none).
{% endif %}Give a confidence between 0 and 1 and a short reason for every step, and say whether the final answer is correct (answer_correct).
"""

@lru_cache(maxsize=32)
def compile_template(source: str) -> BoundedTemplate:
    """The compiled template (runs.templating: text, not HTML; a missing variable renders empty;
    bounded work, output and filter arguments), or PromptTemplateError with Django's message."""
    return _compile_bounded(source)


def template_error(source: str) -> str | None:
    try:
        compile_template(source)
    except PromptTemplateError as exc:
        return str(exc)
    return None


# A verdict's reason is "a few words"; the schema bounds it so that a small
# model under a grammar cannot spend its whole token budget on one reason.
# 200 characters is two short sentences, about 50 tokens.
REASON_MAX_CHARS = 200

# max_tokens when the judge leaves it unset: a fixed part for the JSON around
# the steps (and some prose or a code fence in prompt mode) plus a share per
# step, at most a cap. One step's entry is about 30 tokens of keys, verdict and
# confidence, up to about 50 of reason (REASON_MAX_CHARS) and a few skeleton
# references: 128 leaves room for a tokenizer that splits worse than 4
# characters a token. The cap keeps long traces inside common context windows
# and output limits (4,096 is the smallest output limit of current APIs).
MAX_TOKENS_BASE = 256
MAX_TOKENS_PER_STEP = 128
MAX_TOKENS_CAP = 4096


def derived_max_tokens(n_steps: int) -> int:
    """The max_tokens of a request for a trace of ``n_steps`` steps when the judge sets none."""
    return min(MAX_TOKENS_CAP, MAX_TOKENS_BASE + MAX_TOKENS_PER_STEP * max(1, n_steps))


def effective_max_tokens(configured: int | None, n_steps: int) -> int:
    """The judge's own max_tokens when it sets one, else derived from the trace's steps."""
    return configured if configured else derived_max_tokens(n_steps)


def output_schema(mode: str, n_steps: int, n_skeleton: int = 0) -> dict:
    """JSON schema of the judge's answer on a trace of ``n_steps`` steps (and a
    skeleton of ``n_skeleton``): sent as the response format, shown in the
    prompt otherwise. It bounds everything a grammar-constrained server
    (llama.cpp) would otherwise let a model repeat without end: at most one
    entry per step, step numbers 1..N, short reasons, at most L skeleton
    references. ``enum`` spells the step numbers out because llama-cpp-python's
    grammar ignores ``minimum``/``maximum`` on integers; the bounds stay for
    servers that read them."""
    n = max(1, n_steps)
    step: dict = {
        "type": "object",
        "properties": {
            "step": {"type": "integer", "minimum": 1, "maximum": n, "enum": list(range(1, n + 1))},
            "verdict": {"type": "string", "enum": ["valid", "invalid", "neutral"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "reason": {"type": "string", "maxLength": REASON_MAX_CHARS},
        },
        "required": ["step", "verdict", "reason"],
        "additionalProperties": False,
    }
    if mode == SKELETON:
        refs: dict = {"type": "array", "maxItems": n_skeleton}
        refs["items"] = ({"type": "integer", "minimum": 1, "maximum": n_skeleton,
                          "enum": list(range(1, n_skeleton + 1))} if n_skeleton else {"type": "integer"})
        step["properties"]["skeleton_refs"] = refs
        step["required"].append("skeleton_refs")
    return {
        "type": "object",
        "properties": {"steps": {"type": "array", "items": step, "minItems": 1, "maxItems": n},
                       "answer_correct": {"type": "boolean"}},
        "required": ["steps"],
        "additionalProperties": False,
    }


def trace_schema(trace: TraceInput, mode: str) -> dict:
    return output_schema(mode, len(trace.steps), len(trace.skeleton) if mode == SKELETON else 0)


# The example answer is a FORMAT illustration made of placeholders: a small
# model copied a concrete example's reason ("computes the eggs left
# correctly") into every verdict of problems with no eggs (issue 15).
EXAMPLE_REASON = "<why, in a few words>"
COPIED_EXAMPLE_NOTE = "a verdict's reason copies the prompt's example verbatim (the model may be echoing the prompt)"


def _example(mode: str) -> str:
    refs = '"skeleton_refs": [<numbers of skeleton steps>], ' if mode == SKELETON else ""
    return ('{"steps": [{"step": <step number>, "verdict": <"valid" | "invalid" | "neutral">, ' + refs
            + '"confidence": <0 to 1>, "reason": "' + EXAMPLE_REASON + '"}, ...], '
            '"answer_correct": <true | false>}')


def copies_example(reason: str) -> bool:
    """True when a verdict's reason is the example's placeholder (with or without its brackets)."""
    text = reason.strip().strip('"').strip().lower()
    return text in (EXAMPLE_REASON.lower(), EXAMPLE_REASON.strip("<>").lower())


def output_instructions(mode: str, output_mode: str, schema: dict) -> str:
    """What follows the rendered template. With json_schema the server enforces
    ``schema`` (the trace's, see trace_schema); otherwise it travels in the prompt."""
    text = (f"\n\nReply with one JSON object of this form (the <...> are placeholders for your own "
            f"judgement, one entry per step):\n{_example(mode)}\n")
    if output_mode != "json_schema":
        text += f"It must follow this JSON schema:\n{json.dumps(schema)}\n"
    return text


def template_context(trace: TraceInput, mode: str) -> dict:
    return {
        "problem": trace.problem,
        "gold_answer": trace.gold_answer,
        "mode": mode,
        "skeleton": [{"number": k, "text": text} for k, (text, _check) in enumerate(trace.skeleton, start=1)]
        if mode == SKELETON else [],
        "steps": [{"number": k, "text": text} for k, text in enumerate(trace.steps, start=1)],
        "n_steps": len(trace.steps),
        "answer": trace.answer,
        "model": trace.model,
        "trace_id": trace.trace_id,
    }


def render_prompt(template: str, trace: TraceInput, mode: str, output_mode: str) -> str:
    body = compile_template(template or DEFAULT_TEMPLATE).render(template_context(trace, mode))
    return body.rstrip() + output_instructions(mode, output_mode, trace_schema(trace, mode))


def messages(template: str, trace: TraceInput, mode: str, output_mode: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_MESSAGE},
        {"role": "user", "content": render_prompt(template, trace, mode, output_mode)},
    ]


def response_format(trace: TraceInput, mode: str, output_mode: str) -> dict | None:
    """The response_format of a request on ``trace`` (runs.transport builds it: json_object carries the schema too)."""
    return transport.response_format(output_mode, trace_schema(trace, mode), SCHEMA_NAME)


SCHEMA_NAME = "step_verdicts"


# --------------------------------------------------------------------------
# The answer


class _StepOut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    step: int
    verdict: Literal["valid", "invalid", "neutral"]
    skeleton_refs: list[int] = Field(default_factory=list)
    # Range-checked in parse_output: an out-of-range confidence costs the step its
    # confidence, not the trace its verdicts (llama-cpp-python's grammar does not
    # bound numbers, and SmolLM2 wrote confidences above 1 on 4 of 40 traces).
    confidence: float | None = None
    reason: str = ""

    @field_validator("verdict", mode="before")
    @classmethod
    def _lower(cls, v):
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("reason", mode="before")
    @classmethod
    def _none_is_empty(cls, v):
        return "" if v is None else v

    @field_validator("skeleton_refs", mode="before")
    @classmethod
    def _null_refs(cls, v):
        return [] if v is None else v


class _JudgeOut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    steps: list[_StepOut]
    answer_correct: bool | None = None


class MalformedOutput(transport.Malformed):
    """The content is not valid JSON of the judge output shape: a failed attempt."""


@dataclass
class ParsedOutput:
    labels: list[LabelOut]
    answer_correct: bool | None
    warnings: list[str] = field(default_factory=list)
    copied_example: bool = False


def extract_json(text: str) -> dict:
    """The JSON object of an answer: the whole text, a fenced block, or the first ``{...}`` holding
    ``steps`` (models like to talk around their JSON). Linear in the answer's length, at most
    reasonlib.json_answer.MAX_ANSWER_CHARS read; every failure is MalformedOutput (issue 29)."""
    try:
        return json_answer.find_object(text or "", lambda d: "steps" in d)
    except json_answer.JSONAnswerError as exc:
        raise MalformedOutput(str(exc)) from None


def parse_output(content: str | None, n_steps: int, n_skeleton: int, mode: str) -> ParsedOutput:
    """Validate an answer. Steps outside 1..N and skeleton references outside
    1..L are dropped with a warning; a step given twice keeps its first entry."""
    data = extract_json(content or "")
    try:
        out = _JudgeOut.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise MalformedOutput(f"{where}: {first['msg']}" if where else first["msg"]) from None
    warnings: list[str] = []
    labels: list[LabelOut] = []
    seen: set[int] = set()
    for s in out.steps:
        if not 1 <= s.step <= n_steps:
            warnings.append(f"step {s.step} is outside 1..{n_steps}; ignored")
            continue
        if s.step in seen:
            warnings.append(f"step {s.step} was labelled twice; kept the first")
            continue
        seen.add(s.step)
        refs: list[int] = []
        if mode == SKELETON:
            for r in s.skeleton_refs:
                if 1 <= r <= n_skeleton:
                    if r not in refs:
                        refs.append(r)
                else:
                    warnings.append(f"step {s.step}: skeleton step {r} is outside 1..{n_skeleton}; ignored")
        confidence = s.confidence
        if confidence is not None and not 0 <= confidence <= 1:
            warnings.append(f"step {s.step}: confidence {confidence:g} is outside 0..1; dropped")
            confidence = None
        labels.append(LabelOut(s.step, s.verdict, sorted(refs), confidence, s.reason.strip()))
    labels.sort(key=lambda label: label.step)
    copied = [label.step for label in labels if copies_example(label.reason)]
    if copied:
        warnings.append(f"the reason of step{'s' if len(copied) > 1 else ''} {', '.join(map(str, copied))} "
                        "copies the prompt's example verbatim")
    return ParsedOutput(labels, out.answer_correct, warnings, copied_example=bool(copied))
