"""The judge provider interface: the built-in mechanistic verifier, any
OpenAI-compatible chat endpoint (through runs.transport), and a deterministic
fake for tests all label the traces of a chunk through it.

A provider sees plain data (TraceInput) and yields plain data
(TraceOutcome, a runs.clients.ItemOutcome whose item is the trace pk);
storing labels, counting progress, leases and stopping runs belong to
judges.runclient and runs.engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from judges.protocol import LabelOut, TraceInput
from runs.clients import ItemOutcome, Sizing
from runs.transport import CachedAnswer, CallRecord, Control, NoStop, NullStore, ResponseStore
from runs.transport import FatalRunError as FatalJudgeError

if TYPE_CHECKING:
    from judges.models import JudgeConfig

__all__ = [
    "CachedAnswer", "CallRecord", "Control", "FatalJudgeError", "JudgeProvider", "LabelOut", "NoStop", "NullStore",
    "ResponseStore", "TraceInput", "TraceOutcome",
]


@dataclass
class TraceOutcome(ItemOutcome):
    """A trace's outcome with the judge's verdicts; the item is the trace pk."""

    labels: list[LabelOut] = field(default_factory=list)
    answer_correct: bool | None = None
    # Each step's claim keys, (wrong, right) in step order, when the provider parsed the steps' arithmetic
    # (the mechanistic judge): stored for the score recompute (annotation.stored_claims). None: not parsed.
    claims: list[tuple[tuple[str, ...], tuple[str, ...]]] | None = None

    @property
    def trace_pk(self) -> int:
        return self.item


class JudgeProvider(ABC):
    """Labels the steps of traces. ``judge`` yields one outcome per trace, in
    any order, and asks ``control.stop_reason()`` before starting a trace;
    traces it did not start are simply not yielded."""

    #: traces per chunk (one task); LLM providers round it to their concurrency
    chunk_size = 50

    def __init__(self, config: JudgeConfig, store: ResponseStore | None = None, *, force: bool = False) -> None:
        self.config = config
        self.store = store or NullStore()
        self.force = force

    @classmethod
    def sizing(cls, config: JudgeConfig) -> Sizing:
        """What a chunk's size follows from (runs.clients.RunClient.chunk_size): no model calls here."""
        return Sizing(target_requests=cls.chunk_size)

    @abstractmethod
    def judge(self, traces: Sequence[TraceInput], control: Control) -> Iterator[TraceOutcome]:
        ...

    def close(self) -> None:  # noqa: B027 - most providers hold nothing to release
        """Release connections and threads."""
