"""The response cache in the database (runs.ResponseCache), behind the
runs.transport.ResponseStore interface."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from runs.models import ResponseCache
from runs.transport import CachedAnswer

# What an answer is made of: all of it is kept, so a cache hit replays the answer exactly.
FIELDS = ("content", "output_mode", "prompt_tokens", "completion_tokens", "model", "finish_reason", "reasoning")


class DbStore:
    """Valid answers by key; ``remember`` is told which structured-output form
    the server accepted (the caller stores it with its configuration)."""

    def __init__(self, scope: str, *, force: bool = False, remember: Callable[[str], None] | None = None) -> None:
        self.scope = scope
        self.force = force
        self.remember = remember

    def lookup(self, keys: Sequence[str]) -> dict[str, CachedAnswer]:
        if self.force or not keys:
            return {}
        return {
            key: CachedAnswer(content, mode, pt, ct, model, finish, reasoning)
            for key, content, mode, pt, ct, model, finish, reasoning in ResponseCache.objects.filter(
                key__in=keys).values_list("key", *FIELDS)
        }

    def save(self, answers: dict[str, CachedAnswer]) -> None:
        # Written at once, outside the chunk's transaction: a worker killed
        # mid-chunk does not pay for these answers again.
        ResponseCache.objects.bulk_create(
            [ResponseCache(key=key, scope=self.scope, content=a.content, output_mode=a.output_mode,
                           prompt_tokens=a.prompt_tokens, completion_tokens=a.completion_tokens,
                           model=a.model, finish_reason=a.finish_reason, reasoning=a.reasoning)
             for key, a in answers.items()],
            update_conflicts=True, unique_fields=["key"], update_fields=list(FIELDS),
        )

    def remember_output_mode(self, output_mode: str) -> None:
        if self.remember is not None:
            self.remember(output_mode)


def drop(scope: str) -> int:
    """Forget every cached answer of ``scope`` (its owner is gone)."""
    return ResponseCache.objects.filter(scope=scope).delete()[0]
