"""A scanner's prompt and the reading of its answer (pure; docs/search.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reasonlib import json_answer

SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "enum": ["yes", "no"]},
        "steps": {"type": "array", "items": {"type": "integer"}},
        "explanation": {"type": "string"},
    },
    "required": ["answer", "steps", "explanation"],
    "additionalProperties": False,
}
SYSTEM = (
    "You read one model's reasoning on one problem and answer a researcher's question about it. "
    'Answer with JSON only: {"answer": "yes" or "no", "steps": [the step numbers that show it], '
    '"explanation": "one or two sentences"}. Cite the steps your answer rests on; for "no", cite the '
    "steps you checked that come closest, or none."
)


class BadAnswer(ValueError):
    """Not an answer of the expected shape (the request is tried again)."""


@dataclass(frozen=True)
class StepText:
    index: int
    channel: str
    text: str


@dataclass(frozen=True)
class ScanAnswer:
    answer: bool
    cited: tuple[int, ...]  # cited step numbers that exist, in order, once each
    bad_citations: tuple[int, ...]  # cited numbers the trace does not have
    explanation: str


def messages(question: str, problem: str, steps: Sequence[StepText], answer: str) -> list[dict[str, str]]:
    lines = [f"Question: {question.strip()}", "", f"Problem: {problem.strip()}", "", "Reasoning:"]
    for st in steps:
        label = "Thought step" if st.channel == "thought" else "Step"
        # One line per step: newlines inside a step would read as the next step's start.
        text = " ".join(st.text.split())
        lines.append(f"{label} {st.index}: {text}")
    lines += ["", f"Final answer given: {answer.strip() or '(none)'}", "",
              f"Question again: {question.strip()} Answer yes or no, citing step numbers."]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def parse(content: str, existing: Sequence[int]) -> ScanAnswer:
    """The answer of ``content``; cited numbers are checked against ``existing`` (the trace's step
    numbers): those that do not exist are set apart, never dropped silently."""
    try:
        # Linear in the answer's length and capped (issue 29: the fence regex was quadratic); a cut
        # fence or JSON nested too deeply is a bad answer, never an exception of another kind.
        data = json_answer.find_object(content, lambda d: "answer" in d)
    except json_answer.JSONAnswerError as exc:
        raise BadAnswer(f"the answer is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadAnswer("the answer is not a JSON object")
    raw = str(data.get("answer", "")).strip().lower()
    if raw not in ("yes", "no", "true", "false"):
        raise BadAnswer(f"answer must be yes or no, not {str(data.get('answer'))[:80]!r}")
    steps = data.get("steps", [])
    if not isinstance(steps, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
        raise BadAnswer("steps must be a list of step numbers")
    have = set(existing)
    cited = tuple(dict.fromkeys(s for s in steps if s in have))
    bad = tuple(dict.fromkeys(s for s in steps if s not in have))
    return ScanAnswer(raw in ("yes", "true"), cited, bad, str(data.get("explanation", ""))[:2000])
