"""Named scopes of traces that higher apps offer to lower ones: search registers "cohort" (a saved
cohort's traces) from its AppConfig.ready, and exports and calibration samples accept it without
importing search (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import QuerySet

from annotation.models import Study, Trace
from reasonlib.refusals import Invalid

# (study, value) -> a queryset of the scope's trace ids (values("pk")); raises ScopeError on a bad value.
TraceScope = Callable[[Study, str], QuerySet]
_SCOPES: dict[str, TraceScope] = {}
# study -> the scope's values as a form offers them: (value, text) pairs.
ScopeChoices = Callable[[Study], list[tuple[str, str]]]
_CHOICES: dict[str, ScopeChoices] = {}


class ScopeError(Invalid):
    """A scope value that names nothing of the study; the message says which."""


def register_scope(name: str, scope: TraceScope, choices: ScopeChoices | None = None) -> None:
    _SCOPES[name] = scope
    if choices is not None:
        _CHOICES[name] = choices


def scope_choices(study: Study, name: str) -> list[tuple[str, str]] | None:
    """The values of scope ``name`` in ``study`` as a menu offers them, or None when the scope lists none
    (its app is not installed): a form then takes the value as text."""
    choices = _CHOICES.get(name)
    return None if choices is None else choices(study)


def scope_trace_ids(study: Study, name: str, value: str) -> QuerySet:
    try:
        scope = _SCOPES[name]
    except KeyError:
        raise ScopeError(f"no trace scope named {name!r}") from None
    # Every scope narrows the study's own traces: a cohort saved before its benchmark items were told
    # apart still hands out none of them.
    return Trace.objects.of_study(study).filter(pk__in=scope(study, value)).values("pk")


#: The help text of every ``cohort`` run parameter (runs page, REST, CLI).
COHORT_HELP = ("only the traces of this saved cohort (by its id in the API and the commands; docs/search.md); runs "
               "that take problems (generation, fidelity) ask about the problems of those traces; empty: no cohort")


def check_cohort(study: Study, value) -> str:
    """A run's ``cohort`` parameter, checked the same way by its serializer, its service and its command:
    "" (no cohort) or the cohort's id as a string; ScopeError naming the mistake."""
    value = "" if value is None else str(value).strip()
    if value:
        scope_trace_ids(study, "cohort", value)  # the scope refuses an unknown id at once
    return value


def cohort_traces(study: Study, value: str) -> QuerySet | None:
    """The trace ids (``values("pk")``-shaped) of a checked cohort parameter, or None for no cohort."""
    return scope_trace_ids(study, "cohort", value) if value else None


def cohort_problems(study: Study, value: str) -> QuerySet | None:
    """The problem pks of the traces of a checked cohort parameter, or None for no cohort."""
    traces = cohort_traces(study, value)
    return None if traces is None else Trace.objects.filter(pk__in=traces).values("problem_id")
