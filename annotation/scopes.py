"""Named scopes of traces that higher apps offer to lower ones: search registers "cohort" (a saved
cohort's traces) from its AppConfig.ready, and exports and calibration samples accept it without
importing search (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import QuerySet

from annotation.models import Study

# (study, value) -> a queryset of the scope's trace ids (values("pk")); raises ScopeError on a bad value.
TraceScope = Callable[[Study, str], QuerySet]
_SCOPES: dict[str, TraceScope] = {}


class ScopeError(ValueError):
    """A scope value that names nothing of the study; the message says which."""


def register_scope(name: str, scope: TraceScope) -> None:
    _SCOPES[name] = scope


def scope_trace_ids(study: Study, name: str, value: str) -> QuerySet:
    try:
        scope = _SCOPES[name]
    except KeyError:
        raise ScopeError(f"no trace scope named {name!r}") from None
    return scope(study, value)
