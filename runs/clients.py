"""What a kind of run tells the engine: the apps that start runs (judges now;
generation, continuations, diagnostics next) register a RunClient for their
kind in their AppConfig.ready(), so this app never imports them.

A client cuts a run into items and, for each chunk, gives a ChunkWork that
loads the chunk's items, executes them (usually through a
runs.transport.ModelPool, one or more requests per item) and commits their
outcomes inside the engine's transaction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import transaction

from annotation import signals
from annotation.models import Job, Study
from runs.models import UNLISTED_KINDS, Run
from runs.transport import CallRecord, Control

if TYPE_CHECKING:
    from runs.models import RunRecord


class Accounting:
    """Sums over an outcome's ``calls``; unknown token counts are counted, not added as zero."""

    calls: list[CallRecord]

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens or 0 for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens or 0 for c in self.calls)

    @property
    def unknown_token_calls(self) -> int:
        return sum(not c.tokens_known for c in self.calls)

    @property
    def cost_usd(self) -> float:
        return sum(c.cost_usd for c in self.calls)


@dataclass
class ItemOutcome(Accounting):
    """The end of one work item: ok, failed (with the reason) or skipped (the
    run stopped before it was done; its calls still cost and are recorded).
    ``notes`` are run-level warnings (counted per message on the Run).
    Clients may use their own dataclass with these fields (and Accounting)."""

    item: int
    status: str  # ok | failed | skipped
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    cached: bool = False
    output_mode: str = ""  # the structured-output form of the answer used, if any
    result: Any = None  # the parsed answer of an ok item (runs.pooled.PooledWork)


class ChunkWork(ABC):
    """One chunk's work for one kind of run."""

    @abstractmethod
    def load(self, items: Sequence[int]) -> list[Any]:
        """The items' inputs, in order; items deleted since the run started are left out."""

    @abstractmethod
    def execute(self, inputs: Sequence[Any], control: Control) -> Iterator[ItemOutcome]:
        """One outcome per input, in any order. Checks ``control`` between items;
        items it did not start are simply not yielded. May raise
        runs.transport.FatalRunError after yielding what finished."""

    @abstractmethod
    def commit(self, outcomes: Sequence[ItemOutcome]) -> None:
        """Store the outcomes' domain results (called inside the chunk's transaction)."""

    def close(self) -> None:  # noqa: B027 - most work holds nothing to release
        """Release connections and threads."""


@dataclass(frozen=True)
class Sizing:
    """What a chunk's size follows from: the requests in flight at once (0: the kind calls no model),
    the requests of one item, about how many requests a chunk should hold, and the fewest rounds of
    the concurrency it should hold (a chunk's start -- claim, load, cache lookup -- has no request in
    flight, so a chunk of one or two rounds at a high concurrency spends much of its time there)."""

    concurrency: int = 0
    requests_per_item: int = 1
    target_requests: int = 50
    min_rounds: int = 1
    #: The work is the CPU's (no model calls, no shared concurrency to keep): the run's chunks go to every
    #: free worker process, on every machine, instead of one chain (runs.engine: spread runs).
    spread: bool = False


class RunClient(ABC):
    """A kind of run."""

    kind: str = ""
    noun: str = "item"  # what an item is, in messages ("trace")
    #: Listed on the runs page and by ``GET studies/{id}/runs/`` (runs of model calls, started by people).
    #: False for the engine's own bookkeeping runs (the score job: one after every change of the data),
    #: which the study's jobs list shows instead.
    listed: bool = True
    #: The kind's row of a run (a runs.models.RunRecord), and what loading it follows besides its job and run.
    record_model: type[RunRecord] | None = None
    record_related: tuple[str, ...] = ()

    def record(self, run: Run) -> RunRecord:
        """The kind's row of ``run``, with what its work and summary read."""
        if self.record_model is None:
            raise LookupError(f"runs of kind {self.kind!r} keep no record")
        return (self.record_model._default_manager.select_related("job__study", "job__created_by", "run", *self.record_related)
                .get(run=run))

    def sizing(self, run: Run) -> Sizing:
        """What this run's chunk size follows from (the kind's row exists when this is asked)."""
        return Sizing()

    def chunk_size(self, run: Run) -> int:
        """Items per chunk (one task): about ``target_requests`` requests and at least ``min_rounds``
        rounds of a lane's share of the concurrency, a whole number of rounds."""
        s = self.sizing(run)
        cap = (run.config or {}).get("max_concurrency")  # the run's own cap (runs.kinds.RunParams.concurrency)
        concurrency = max(1, min(s.concurrency, cap or s.concurrency) // max(1, run.lanes))
        requests = max(s.target_requests, s.min_rounds * concurrency)
        requests += (-requests) % concurrency
        return max(1, -(-requests // max(1, s.requests_per_item)))

    @abstractmethod
    def open(self, run: Run) -> ChunkWork:
        """The work of one chunk of ``run`` (may raise FatalRunError: bad configuration)."""

    #: The URL name of the kind's page of one run, given the kind's row pk (``job.params["run"]``).
    url_name: str = ""
    label: str = ""  # the kind in lists ("Judge"); default: the kind

    def label_for(self, run: Run) -> str:
        """The kind as the runs page lists ``run`` (no query: what the run row holds). A client that serves
        several kinds of start says which one this run was."""
        return self.label or self.kind

    def page(self, run: Run) -> str | None:
        """The kind's page of ``run`` (the job page and the runs page link to it), or None."""
        from django.urls import reverse

        row = run.job.params.get("run")
        return reverse(self.url_name, args=[row]) if self.url_name and row else None

    def plan(self, run: Run) -> list[int]:
        """The run's items, for kinds that plan them in the job (runs.engine.start with items=None): may
        write rows (inside the engine's transaction); a ValueError ends the job failed with its message."""
        raise NotImplementedError(f"runs of kind {self.kind!r} are given their items when they start")

    def failure_reasons(self, run: Run, limit: int) -> list[str]:
        """The first reasons items of ``run`` failed, for the run's status line: the record's ``failures``."""
        if self.record_model is None:
            return []
        failures = self.record_model._default_manager.filter(run=run).values_list("failures", flat=True).first()
        return [f"{key}: {reason}" for key, reason in list((failures or {}).items())[:limit]]

    def summary(self, run: Run) -> dict:
        """The job's result when the run ends: the record's summary."""
        return self.record(run).summary() if self.record_model is not None else run.summary()

    def finished(self, run: Run) -> None:
        """Called once when the run ends (inside a transaction: queue work with on_commit). By default,
        when the record says the run changed the study's data, scoring is told once the end commits."""
        if self.record_model is None:
            return
        record = self.record(run)
        if record.changed_data():
            study = record.job.study
            transaction.on_commit(lambda: signals.data_changed.send(sender=Study, study=study, reason=self.kind))


_CLIENTS: dict[str, RunClient] = {}


def register(client: RunClient) -> None:
    _CLIENTS[client.kind] = client
    if not client.listed:
        UNLISTED_KINDS.add(client.kind)
    else:
        UNLISTED_KINDS.discard(client.kind)


def client_for(kind: str) -> RunClient:
    try:
        return _CLIENTS[kind]
    except KeyError:
        raise LookupError(f"no run client registered for kind {kind!r}") from None


def page_of_job(job: Job) -> str | None:
    """The page of the run's kind for the job page (annotation.jobs.register_link). Here, not with the
    runs page (runs.views): the app's ready() registers it, and the views load DRF, which a command such as
    import_traces does not need (docs/benchmarks.md, "Import")."""
    run = Run.objects.filter(job=job).select_related("job").first()
    if run is None:
        return None
    try:
        return client_for(run.kind).page(run)
    except LookupError:
        return None
