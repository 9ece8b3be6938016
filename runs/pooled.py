"""The work of a chunk whose items ask their requests through one pool (PooledWork): the kind writes its
requests and its commit; the base opens the kind's pool, fans the finished requests in as they come, keeps the
bookkeeping every kind kept by hand (the calls, the cache hit, the structured-output form, the failure's
reason, the answer) in the one outcome type (runs.clients.ItemOutcome, or a kind's subclass of it), yields an
item once its last request finished, and closes the pool.

An item asks one request (``request``: a scanner's trace, a fidelity output's logical forms) or several
(``requests``: a generation's K samples); a kind with several folds each finished request into the item's
outcome (``take``). A request may ask for more once it finished (``take`` returns them: a fidelity original's
backward reconstruction starts from its forward answer): they are asked in a next round, after every request
of this one finished. A request may go to another pool than the kind's own (``pool_of``: the abstraction
benchmark's LLM checker reads the subject's answers on the checker's endpoint).

The loop is PooledRequests; PooledWork is a chunk's work on it. A judge provider that calls a model is a
PooledRequests too (judges.providers.openai_compat): a provider is no chunk's work, the judge's work delegates
to it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

from runs.clients import ChunkWork, ItemOutcome
from runs.transport import Control, FatalRunError, ModelPool, ModelRequest, RequestOutcome


class Unaskable(Exception):
    """An item that needs no request: it fails with this reason (a trace with no steps)."""


class PooledRequests(ABC):
    pool: ModelPool | None = None
    #: The round being asked (0: the items' own requests; n: what the requests of round n - 1 led to).
    round: int = 0

    @abstractmethod
    def open_pool(self) -> ModelPool:
        """The pool of this chunk's requests (its endpoint, cache scope and store)."""

    def request(self, item: Any) -> ModelRequest:
        """The item's one request (``item`` as ``load`` gave it); Unaskable when it needs none."""
        raise NotImplementedError(f"{type(self).__name__} gives neither request nor requests")

    def requests(self, item: Any) -> Sequence[ModelRequest]:
        """The item's requests; none: the item is done at once with its outcome as ``outcome`` made it."""
        return [self.request(item)]

    def item_id(self, item: Any) -> int:
        """The item's number in the run (what ``load`` was given)."""
        return item.pk

    def outcome(self, item: Any) -> ItemOutcome:
        """The item's outcome before any of its requests finished (a kind's own subclass of ItemOutcome)."""
        return ItemOutcome(self.item_id(item), "ok")

    def pool_of(self, request: ModelRequest) -> ModelPool:
        """The pool ``request`` is asked through: the kind's own, unless it keeps another for some requests."""
        assert self.pool is not None
        return self.pool

    def warnings(self, value: Any) -> list[str]:
        """Warnings of an answer the request's ``parse`` accepted."""
        return []

    def take(self, out: ItemOutcome, done: RequestOutcome) -> Sequence[ModelRequest] | None:
        """Fold one finished request into its item's outcome, and give the requests it leads to (asked in the
        next round), if any. The default is an item of one request: its status, reason and answer are the
        item's."""
        out.calls.extend(done.calls)
        if done.status != "ok" or done.answer is None:
            out.status, out.reason = done.status, done.reason
            return None
        out.warnings, out.cached = self.warnings(done.answer.value), done.answer.cached
        out.output_mode, out.result = done.answer.output_mode, done.answer.value
        return None

    @staticmethod
    def unanswered(out: ItemOutcome, done: RequestOutcome, label: str) -> None:
        """For items of several requests: one ended without an answer. The item's first failure names its
        request (``label: reason``); a request the run stopped before answering makes an ok item skipped,
        never a failed one ok again. The calls are the caller's to count."""
        out.cached = False
        if done.status == "failed" and out.status != "failed":
            out.status, out.reason = "failed", f"{label}: {done.reason}"
        elif out.status == "ok":
            out.status = "skipped"

    def interrupted(self, out: ItemOutcome) -> None:
        """An item a fatal error left with requests unasked or unfinished: skipped (what finished is kept)."""
        out.status = "skipped"

    def execute(self, inputs: Sequence[Any], control: Control) -> Iterator[ItemOutcome]:
        self.pool = self.open_pool()
        requests: list[ModelRequest] = []
        outcomes: dict[int, ItemOutcome] = {}
        pending: dict[int, int] = {}
        for item in inputs:
            try:
                asked = list(self.requests(item))
            except Unaskable as exc:
                yield ItemOutcome(self.item_id(item), "failed", reason=str(exc))
                continue
            key = self.item_id(item)
            out = outcomes[key] = self.outcome(item)
            pending[key] = len(asked)
            requests.extend(asked)
            if not asked:  # nothing left to ask (a generation's samples all made): done at once
                yield out
        self.round = 0
        try:
            while requests:
                asked, requests = requests, []
                # A round's requests by pool, each pool's in the order they were made.
                batches: dict[int, tuple[ModelPool, list[ModelRequest]]] = {}
                for request in asked:
                    pool = self.pool_of(request)
                    batches.setdefault(id(pool), (pool, []))[1].append(request)
                for pool, batch in batches.values():
                    for done in pool.run(batch, control):
                        item = done.request.item
                        more = list(self.take(outcomes[item], done) or ())
                        pending[item] += len(more) - 1
                        requests.extend(more)
                        if pending[item] == 0:
                            yield outcomes[item]
                self.round += 1
        except FatalRunError:
            # What finished of the unfinished items is kept (committed as skipped items: their calls cost).
            for item, n in pending.items():
                if n > 0:
                    self.interrupted(outcomes[item])
                    yield outcomes[item]
            raise

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


class PooledWork(PooledRequests, ChunkWork):
    """A chunk's work on the pool loop: the kind adds ``load`` and ``commit``."""
