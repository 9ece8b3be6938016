"""What higher apps add to scoring, registered from their AppConfig.ready (scoring imports none of them): the
stored summaries the score job refreshes with the scores, and the one source of the evidence-tier cards.

A module of its own, and a light one: every process runs every app's ready() at start-up, while the modules
that call these hooks (score_jobs, analytics) load pandas and the scoring core, half a second of CPU that a
command such as ``import_traces`` never uses (docs/benchmarks.md, "Import"). For the same reason a hook may be
given as the dotted path of its callable, imported when the hook is first called: the registering app then
need not load its own heavy modules at start-up either."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils.module_loading import import_string

Hook = Callable[..., Any] | str

#: ``fn(study, job, whole)``: a stored aggregate of another app refreshed by the score job (same data, same
#: job that every change of the data queues); ``whole`` is False when the job recomputes only some profiles
#: (a profile changed, the data did not). By name (the hook's dotted path), in the order registered: the score
#: run stores the names and works each summary as an item of its own, in any order and at the same time as
#: the others (scoring.score_jobs.summary_steps), so a hook must not need what another one stores.
_SUMMARIES: dict[str, Hook] = {}
#: ``fn(study) -> cards``: the evidence report (faithfulness) as the source of the leaderboard's tier cards.
_TIER_SOURCES: list[Hook] = []


def _resolved(hook: Hook) -> Callable[..., Any]:
    return import_string(hook) if isinstance(hook, str) else hook


def _name(hook: Hook) -> str:
    return hook if isinstance(hook, str) else f"{hook.__module__}.{hook.__qualname__}"


def register_summary(fn: Hook) -> None:
    _SUMMARIES.setdefault(_name(fn), fn)


def summary_names() -> list[str]:
    """The stored-summary hooks by name, in the order registered."""
    return list(_SUMMARIES)


def summary(name: str) -> Callable[..., Any]:
    """The hook registered under ``name`` (a LookupError when none is: the worker runs other code than the
    process that planned the run)."""
    try:
        return _resolved(_SUMMARIES[name])
    except KeyError:
        raise LookupError(f"no stored summary named {name!r} is registered") from None


def register_tier_source(source: Hook) -> None:
    """The one source of the tier cards (a second registration replaces the first)."""
    _TIER_SOURCES[:] = [source]


def tier_source() -> Callable[..., Any] | None:
    return _resolved(_TIER_SOURCES[0]) if _TIER_SOURCES else None
