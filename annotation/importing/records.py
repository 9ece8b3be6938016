"""The canonical import records (docs/import-format.md) and their validation.

Every adapter produces these dictionaries; validation turns them into typed
records or a RecordError with a plain sentence a researcher can act on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

VERDICTS = ("valid", "invalid", "neutral")


class RecordError(Exception):
    """A line that cannot be imported; ``str(exc)`` is the reason shown to the user."""


@dataclass(frozen=True)
class TextLimits:
    """What one record may hold, in characters (settings REASONAUDIT_IMPORT_MAX_*_CHARS): a line over
    a limit is refused with its line number like any other bad line, before anything is segmented,
    stored or indexed."""

    statement: int
    output: int
    thought: int


class _Record(BaseModel):
    # Unknown keys are not an error: they are kept in the record's meta.
    model_config = ConfigDict(extra="allow", str_strip_whitespace=False)

    def extras(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class SkeletonStepIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str = Field(min_length=1)
    check: str | None = None


class ProblemIn(_Record):
    kind: Literal["problem"]
    problem_id: str = Field(min_length=1, max_length=200)
    statement: str = Field(min_length=1)
    gold_answer: str
    domain: str = ""
    tags: list[str] = Field(default_factory=list)
    skeleton: list[SkeletonStepIn] | None = None
    skeleton_status: Literal["draft", "approved"] = "approved"
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("gold_answer", mode="before")
    @classmethod
    def _answer_as_text(cls, value: Any) -> Any:
        # Gold answers are often numbers in JSON; they are compared as text.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("domain", mode="before")
    @classmethod
    def _none_domain(cls, value: Any) -> Any:
        return "" if value is None else value


class LabelIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    step: int = Field(ge=1)
    verdict: Literal["valid", "invalid", "neutral"]
    skeleton_refs: list[int] = Field(default_factory=list)
    annotator: str = Field(min_length=1, max_length=150)
    note: str = ""
    confidence: float | None = Field(default=None, ge=0, le=1)

    @field_validator("skeleton_refs")
    @classmethod
    def _positive_refs(cls, refs: list[int]) -> list[int]:
        if any(r < 1 for r in refs):
            raise ValueError("skeleton step numbers start at 1")
        return sorted(set(refs))


class ThoughtBlockIn(BaseModel):
    """A reasoning block of an eval log (Inspect's ContentReasoning): its text, or for a redacted block
    the provider's summary (never the ciphertext)."""

    model_config = ConfigDict(extra="ignore")
    text: str = ""
    redacted: bool = False
    summary: bool = False


class TraceIn(_Record):
    kind: Literal["trace"]
    problem_id: str = Field(min_length=1, max_length=200)
    model: str = Field(min_length=1, max_length=200)
    trace_id: str | None = Field(default=None, min_length=1, max_length=300)
    raw: str | None = None
    steps: list[str] | None = None
    answer: str | None = None
    answer_correct: bool | None = None
    labels: list[LabelIn] = Field(default_factory=list)
    # The labels follow a first-error protocol (ProcessBench): they stop at
    # the earliest invalid step, so a review that reaches it is complete.
    labels_to_first_error: bool = False
    rating: float | None = Field(default=None, ge=0, le=10)
    meta: dict[str, Any] = Field(default_factory=dict)
    # The separate reasoning channel, under any of the names servers give it (one at most); a thought
    # inline in raw (<think>, harmony channels, ...) is found by reasonlib.thinking.
    thought: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    # The thought's steps when given, not segmented (like "steps" for the answer).
    thought_steps: list[str] | None = None
    # Reasoning blocks of an eval log, in order (redacted/summary flags kept).
    thought_blocks: list[ThoughtBlockIn] | None = None
    # lm-eval's think_end_token: the thought is what raw has before its last occurrence.
    think_end_token: str | None = Field(default=None, min_length=1)
    # The prompt opened the thought (a chat template ending in <think>): raw without any tag is an unclosed thought.
    prompt_opens_thought: bool = False
    # The inference regime (generation.md): model, endpoint host, sampling settings, prompt hash, ...
    regime: dict[str, Any] = Field(default_factory=dict)

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_as_text(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("regime", mode="before")
    @classmethod
    def _no_regime(cls, value: Any) -> Any:
        return {} if value is None else value


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "missing":
            parts.append(f'missing "{loc}"')
        elif err["type"] == "literal_error" and loc == "kind":
            parts.append(f'unknown kind {err.get("input")!r} (expected "problem" or "trace")')
        else:
            parts.append(f'"{loc}": {err["msg"]}')
    return "; ".join(parts)


def _over(what: str, size: int, limit: int, setting: str) -> RecordError:
    return RecordError(f"{what} is {size:,} characters long, more than {limit:,} (REASONAUDIT_IMPORT_MAX_{setting}_CHARS)")


def check_sizes(record: ProblemIn | TraceIn, limits: TextLimits) -> None:
    """RecordError when a text of ``record`` is over ``limits``."""
    if isinstance(record, ProblemIn):
        if len(record.statement) > limits.statement:
            raise _over('"statement"', len(record.statement), limits.statement, "STATEMENT")
        return
    output = len(record.raw or "") + sum(map(len, record.steps or ()))
    if output > limits.output:
        raise _over('the output ("raw" and "steps")', output, limits.output, "OUTPUT")
    # validate() has put the one separate thought (under whichever name it came) in record.thought.
    thought = (len(record.thought or "")
               + sum(map(len, record.thought_steps or ()))
               + sum(len(b.text) for b in record.thought_blocks or ()))
    if thought > limits.thought:
        raise _over("the thought", thought, limits.thought, "THOUGHT")


#: The keys a line of each dataset format always has (annotation.importing.adapters), most specific first: a
#: line without "kind" that has them was most likely uploaded under the default format by mistake.
FORMAT_KEYS = [
    ("prm800k", {"question", "label", "labeler"}),
    ("processbench", {"problem", "steps", "label"}),
    ("trl-stepwise", {"prompt", "completions", "labels"}),
    ("gsm8k-solutions", {"question", "ground_truth"}),
    ("gsm8k", {"question", "answer"}),
]


def _format_hint(obj: dict) -> str:
    """Why a line has no "kind", when its keys say: it is a line of another format (upload form, REST and
    import_traces name the format; the default is ReasonAudit's own)."""
    for fmt, keys in FORMAT_KEYS:
        if keys <= obj.keys():
            return f"; this line looks like the {fmt} format (it has {', '.join(sorted(keys))}): import the file as {fmt}"
    return ""


_MODELS: dict[str, type[ProblemIn] | type[TraceIn]] = {"problem": ProblemIn, "trace": TraceIn}


def validate(obj: Any, limits: TextLimits | None = None) -> ProblemIn | TraceIn:
    if not isinstance(obj, dict):
        raise RecordError(f"expected a JSON object, got {type(obj).__name__}")
    kind = obj.get("kind")
    if kind is None:
        raise RecordError('missing "kind"' + _format_hint(obj))
    # A list or object as "kind" is unhashable: a bad line, not a crash.
    model = _MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise RecordError(f'unknown kind {kind!r} (expected "problem" or "trace")')
    try:
        record = model.model_validate(obj)
    except ValidationError as exc:
        raise RecordError(_describe(exc)) from None
    if isinstance(record, TraceIn):
        if record.raw is None and record.steps is None:
            raise RecordError('a trace needs "raw" or "steps"')
        if record.thought is not None or record.reasoning_content is not None or record.reasoning is not None:
            given = {k: v for k in ("thought", "reasoning_content", "reasoning")
                     if isinstance(v := getattr(record, k), str) and v.strip()}
            if len(set(given.values())) > 1:
                names = " and ".join(f'"{k}"' for k in given)
                raise RecordError(f"{names} both give the separate thought, with different texts: keep one")
            record.thought = next(iter(given.values()), None)
        if record.rating is not None and not record.labels:
            raise RecordError('"rating" needs "labels" naming the annotator who gave it')
    if limits is not None:
        check_sizes(record, limits)
    return record
