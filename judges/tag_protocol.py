"""The step-function tagging protocol of an LLM judge: the prompt it sees and the answer it must give
(docs/judges.md, "Step-function tags"). Pure (no ORM, no I/O): judges.tagging renders and parses with it.

The judge reads the problem and the numbered steps and gives every step one or more of the eight functions
of reasonlib.step_functions (Thought Anchors' taxonomy); a tag is named as the taxonomy names it, and a
near spelling ("Plan Generation", "plan-generation") is read as that name (normalize_function).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from reasonlib import json_answer
from reasonlib.step_functions import FUNCTION_NAMES, FUNCTIONS, normalize_function
from runs.transport import Malformed

SCHEMA_NAME = "step_functions"
SYSTEM_MESSAGE = (
    "You annotate the reasoning of language models: for every step of a chain of thought you say what the "
    "step does, not whether it is right. You answer with one JSON object and nothing else."
)
#: The most steps one request tags: max_tokens grows by TOKENS_PER_STEP a step up to the 4,096 every current
#: API allows for an answer (a longer trace fails with this reason rather than being cut silently).
TOKENS_BASE = 256
TOKENS_PER_STEP = 32
MAX_TOKENS = 4096
MAX_STEPS = (MAX_TOKENS - TOKENS_BASE) // TOKENS_PER_STEP


def max_tokens(n_steps: int, configured: int | None = None) -> int:
    """The judge's own max_tokens when it sets one, else what ``n_steps`` steps of tags take."""
    return configured or min(MAX_TOKENS, TOKENS_BASE + TOKENS_PER_STEP * max(1, n_steps))


def prompt(problem: str, steps: list[str]) -> str:
    categories = "\n".join(f"- {name}: {meaning}" for name, _, meaning in FUNCTIONS)
    numbered = "\n".join(f"Step {k}: {text}" for k, text in enumerate(steps, start=1))
    return (f"Problem:\n{problem}\n\nThe model's reasoning, {len(steps)} step{'s' if len(steps) != 1 else ''}:\n"
            f"{numbered}\n\nGive every step the functions it serves (one or more) among:\n{categories}\n\n"
            'Reply with one JSON object: {"steps": [{"step": <step number>, "tags": [<function names>]}, ...]}, '
            "one entry per step.")


def messages(problem: str, steps: list[str]) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": prompt(problem, steps)}]


def schema(n_steps: int) -> dict:
    """The answer's JSON schema (sent as the response format): one entry per step at most, step numbers
    spelled out (llama.cpp's grammar ignores integer bounds), one to eight known tags each."""
    n = max(1, n_steps)
    return {
        "type": "object",
        "properties": {"steps": {"type": "array", "minItems": 1, "maxItems": n, "items": {
            "type": "object",
            "properties": {
                "step": {"type": "integer", "minimum": 1, "maximum": n, "enum": list(range(1, n + 1))},
                "tags": {"type": "array", "minItems": 1, "maxItems": len(FUNCTION_NAMES),
                         "items": {"type": "string", "enum": list(FUNCTION_NAMES)}},
            },
            "required": ["step", "tags"], "additionalProperties": False}}},
        "required": ["steps"], "additionalProperties": False,
    }


@dataclass
class TagAnswer:
    tags: dict[int, list[str]]  # step number -> its functions, in the taxonomy's order
    warnings: list[str] = field(default_factory=list)


def parse(content: str | None, n_steps: int) -> TagAnswer:
    """The judge's tags. Steps outside 1..N, a step given twice (its first entry is kept) and names that are
    none of the eight are dropped with a warning; an answer with no usable tag is Malformed (asked again)."""
    try:
        data = json_answer.find_object(content or "", lambda d: "steps" in d)
    except json_answer.JSONAnswerError as exc:
        raise Malformed(str(exc)) from None
    entries = data.get("steps")
    if not isinstance(entries, list):
        raise Malformed("steps: not a list")
    order = {name: i for i, name in enumerate(FUNCTION_NAMES)}
    out: dict[int, list[str]] = {}
    warnings: list[str] = []
    for entry in entries:
        step = entry.get("step") if isinstance(entry, dict) else None
        if not isinstance(step, int) or isinstance(step, bool) or not 1 <= step <= n_steps:
            warnings.append(f"step {json.dumps(step)[:40]} is outside 1..{n_steps}; ignored")
            continue
        if step in out:
            warnings.append(f"step {step} was tagged twice; kept the first")
            continue
        names = entry.get("tags")
        names = names if isinstance(names, list) else []
        known = {normalize_function(n) for n in names if isinstance(n, str)} - {""}
        unknown = [n for n in names if not (isinstance(n, str) and normalize_function(n))]
        if unknown:
            warnings.append(f"step {step}: {json.dumps(unknown[0])[:60]} is none of the eight functions; ignored")
        if known:
            out[step] = sorted(known, key=order.__getitem__)
    if not out:
        raise Malformed("no step was given a known function")
    return TagAnswer(dict(sorted(out.items())), warnings)
