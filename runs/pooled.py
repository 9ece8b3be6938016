"""The work of a chunk whose items each ask one request (PooledWork): the kind writes its request and its
commit; the base opens the kind's pool, fans the outcomes in as they finish, keeps the bookkeeping every
kind kept by hand (the calls, the cache hit, the structured-output form, the failure's reason, the answer)
in the one outcome type (runs.clients.ItemOutcome), and closes the pool."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

from runs.clients import ChunkWork, ItemOutcome
from runs.transport import Control, ModelPool, ModelRequest


class Unaskable(Exception):
    """An item that needs no request: it fails with this reason (a trace with no steps)."""


class PooledWork(ChunkWork):
    pool: ModelPool | None = None

    @abstractmethod
    def open_pool(self) -> ModelPool:
        """The pool of this chunk's requests (its endpoint, cache scope and store)."""

    @abstractmethod
    def request(self, item: Any) -> ModelRequest:
        """The item's request (``item`` as ``load`` gave it); Unaskable when it needs none."""

    def item_id(self, item: Any) -> int:
        """The item's number in the run (what ``load`` was given)."""
        return item.pk

    def warnings(self, value: Any) -> list[str]:
        """Warnings of an answer the request's ``parse`` accepted."""
        return []

    def execute(self, inputs: Sequence[Any], control: Control) -> Iterator[ItemOutcome]:
        self.pool = self.open_pool()
        requests = []
        for item in inputs:
            try:
                requests.append(self.request(item))
            except Unaskable as exc:
                yield ItemOutcome(self.item_id(item), "failed", reason=str(exc))
        for done in self.pool.run(requests, control):
            if done.status != "ok" or done.answer is None:
                yield ItemOutcome(done.request.item, done.status, reason=done.reason, calls=list(done.calls))
                continue
            yield ItemOutcome(done.request.item, "ok", warnings=self.warnings(done.answer.value),
                              calls=list(done.calls), cached=done.answer.cached,
                              output_mode=done.answer.output_mode, result=done.answer.value)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
