"""The judge provider interface: the built-in mechanistic verifier, any
OpenAI-compatible chat endpoint, and a deterministic fake for tests all
label the traces of a chunk through it.

A provider sees plain data (TraceInput) and yields plain data
(TraceOutcome); storing labels, counting progress and stopping runs belong to
judges.services.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from judges.models import JudgeConfig


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


@dataclass
class CallRecord:
    """One request to a model server (each retry is a call of its own)."""

    attempt: int
    output_mode: str
    outcome: str  # ok | malformed | error | rejected_format
    http_status: int | None = None
    error: str = ""
    latency_ms: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


@dataclass
class TraceOutcome:
    trace_pk: int
    status: str  # ok | failed | skipped (the run stopped before this trace was done)
    labels: list[LabelOut] = field(default_factory=list)
    answer_correct: bool | None = None
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    cached: bool = False

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.calls)

    @property
    def cost_usd(self) -> float:
        return sum(c.cost_usd for c in self.calls)


class FatalJudgeError(Exception):
    """A failure no retry will mend (bad key, unknown model, refused output
    mode): the run stops with this message."""


class Control(Protocol):
    def stop_reason(self) -> str | None:
        """Why the run must stop now (cancelled, budget spent), or None. Cheap to call often."""

    def charge(self, cost_usd: float) -> None:
        """Count what calls cost as soon as they return (the budget check needs it)."""


class NoStop:
    def stop_reason(self) -> str | None:
        return None

    def charge(self, cost_usd: float) -> None:
        pass


@dataclass
class CachedAnswer:
    content: str
    output_mode: str
    prompt_tokens: int
    completion_tokens: int


class ResponseStore(Protocol):
    """Where an LLM provider keeps valid answers and what it learnt about the server."""

    def lookup(self, keys: Sequence[str]) -> dict[str, CachedAnswer]: ...

    def save(self, answers: dict[str, CachedAnswer]) -> None: ...

    def remember_output_mode(self, output_mode: str) -> None: ...


class NullStore:
    def lookup(self, keys: Sequence[str]) -> dict[str, CachedAnswer]:
        return {}

    def save(self, answers: dict[str, CachedAnswer]) -> None:
        pass

    def remember_output_mode(self, output_mode: str) -> None:
        pass


class JudgeProvider(ABC):
    """Labels the steps of traces. ``judge`` yields one outcome per trace, in
    any order, and checks ``control.stop_reason()`` before starting a trace;
    traces it did not start are simply not yielded."""

    #: traces per chunk (one task); LLM providers round it to their concurrency
    chunk_size = 50

    def __init__(self, config: JudgeConfig, store: ResponseStore | None = None) -> None:
        self.config = config
        self.store = store or NullStore()

    @classmethod
    def chunk_traces(cls, config: JudgeConfig) -> int:
        """Traces per chunk for this configuration."""
        return cls.chunk_size

    @abstractmethod
    def judge(self, traces: Sequence[TraceInput], control: Control) -> Iterator[TraceOutcome]:
        ...

    def close(self) -> None:  # noqa: B027 - most providers hold nothing to release
        """Release connections and threads."""
