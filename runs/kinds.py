"""Every kind of run a researcher can start, declared once: its parameters (a DRF serializer, the one
validation of the runs page, the kind's REST endpoint and -- through runs.params and the services --
the CLI), how to start it, and what its form offers to pick from. Apps declare their kinds in
``AppConfig.ready`` (this app imports none of them); ``/studies/<id>/runs/`` lists every run of a
study and starts any declared kind (runs.views)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rest_framework import serializers

from annotation import scopes
from annotation.models import Job, Study
from reasonlib.refusals import Invalid


@dataclass(frozen=True)
class Starter:
    """A kind of run as the runs page and the API start it.

    ``start(study, data, user)`` gets the serializer's validated data and returns the row of the run
    (anything with a ``job``). ``options(study)`` lists, per field, the values the form offers
    (subject model names, judge names, ...): each a value, or a (value, text) pair when the menu should
    show something else than what is posted (a cohort's name for its id)."""

    name: str
    label: str
    serializer: type[serializers.Serializer]
    start: Callable[[Study, dict[str, Any], Any], Any]
    help: str = ""
    options: Callable[[Study], dict[str, list[Any]]] = field(default=lambda study: {})


_STARTERS: dict[str, Starter] = {}
#: The order of the runs page's kind menu.
ORDER = ("generation", "judge", "probe", "interventions", "anytime", "early_answering", "fidelity", "abstraction",
         "scanner")


_RETRIES: dict[str, Callable[[Any, Any], Any]] = {}
#: Parameters every kind shares, drawn after the kind's own (a serializer's mixins put them first).
LAST = ("force", "budget_usd", "cohort")


def declare(starter: Starter) -> None:
    _STARTERS[starter.name] = starter


def declare_retry(run_kind: str, retry: Callable[[Any, Any], Any]) -> None:
    """How to run a run of ``run_kind`` (runs.Run.kind) again over what failed: ``retry(run, user)`` starts
    a run of the same configuration and returns its row."""
    _RETRIES[run_kind] = retry


def retry_for(run_kind: str) -> Callable[[Any, Any], Any] | None:
    return _RETRIES.get(run_kind)


def starters() -> list[Starter]:
    return sorted(_STARTERS.values(), key=lambda s: (ORDER.index(s.name) if s.name in ORDER else len(ORDER), s.name))


def starter(name: str) -> Starter:
    try:
        return _STARTERS[name]
    except KeyError:
        raise serializers.ValidationError(
            {"kind": [f"unknown kind of run {name!r}; choose one of {', '.join(s.name for s in starters())}"]}
        ) from None


def job_of(row: Any) -> Job:
    """The Job of what a starter returned (a kind's row, or the Job itself: the probe has no run)."""
    return row if isinstance(row, Job) else row.job


def validate(kind: str, study: Study, data) -> tuple[Starter, dict[str, Any]]:
    """The kind's starter and its validated parameters, or a ValidationError naming the fields."""
    st = starter(kind)
    ser = st.serializer(data=data, context={"study": study})
    ser.is_valid(raise_exception=True)
    return st, dict(ser.validated_data)


def start(kind: str, study: Study, data, user) -> Any:
    """Validate and start a run of ``kind``; a service's refusal of bad input (reasonlib.refusals.Invalid)
    becomes a ValidationError naming its fields, as the serializer's own (each message once: the API
    prefixes the field itself). A RunConflict (409) and a broker that is down (503) go through unchanged:
    every door renders them once."""
    st, validated = validate(kind, study, data)
    try:
        return st.start(study, validated, user)
    except Invalid as exc:
        detail: dict[str, list[str]] = {}
        for field, message in exc.errors:
            detail.setdefault(field or "non_field_errors", []).append(message)
        raise serializers.ValidationError(detail) from None
    except ValueError as exc:
        raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from None


def _pairs(values: list[Any]) -> list[tuple[str, str]]:
    """A menu's (posted value, shown text) pairs from values or pairs."""
    return [(str(v), str(v)) if not isinstance(v, (tuple, list)) else (str(v[0]), str(v[1])) for v in values]


def label_of(name: str, f: serializers.Field) -> str:
    """What the form calls a parameter: the serializer field's label when it was given one; DRF's
    default from the name ("Budget usd") otherwise, which every kind's serializer avoids
    (tests/runs/test_runs_page.py checks them all)."""
    return f.label or name.replace("_", " ").capitalize()


def form_fields(st: Starter, study: Study, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """What the runs page draws for each of the kind's parameters: name, label, input type, bounds,
    choices (value, text), help and the current value (the serializer's declaration, so the page
    cannot drift)."""
    values = values or {}
    options = st.options(study)
    out = []
    for name, f in st.serializer(context={"study": study}).fields.items():
        if f.read_only:
            continue
        row: dict[str, Any] = {"name": name, "label": label_of(name, f),
                               "help": f.help_text or "", "required": f.required, "type": "text",
                               "value": values.get(name, "" if f.default is serializers.empty else f.default)}
        if isinstance(row["value"], (tuple, list)):
            # A list parameter written as the CLI writes it ("value_flip,paraphrase"), not as a Python tuple.
            row["value"] = ",".join(str(v) for v in row["value"])
        if isinstance(f, serializers.BooleanField) and f.allow_null:
            # Three states (any / yes / no): an unticked box would post False, not "any".
            row["type"], row["choices"] = "select", [("", "any"), ("true", "yes"), ("false", "no")]
        elif isinstance(f, serializers.BooleanField):
            row["type"] = "checkbox"
        elif isinstance(f, serializers.ChoiceField):
            row["type"], row["choices"] = "select", _pairs(list(f.choices.items()))
        elif isinstance(f, (serializers.IntegerField, serializers.FloatField)):
            row["type"] = "number"
            row["min"], row["max"] = f.min_value, f.max_value
            row["step"] = "1" if isinstance(f, serializers.IntegerField) else "any"
        elif isinstance(f, serializers.ListField):
            row["type"] = "list"
        if name == "cohort" and name not in options:
            # Every kind's cohort parameter takes an id: the menu names the study's cohorts.
            cohorts = scopes.scope_choices(study, "cohort")
            if cohorts is not None:
                options = {**options, "cohort": cohorts}
        if name in options:
            row["type"], row["choices"] = "select", _pairs(options[name])
            if not f.required:
                row["choices"] = [("", ""), *row["choices"]]
        if row["value"] is None:
            row["value"] = ""
        out.append(row)
    return sorted(out, key=lambda r: LAST.index(r["name"]) + 1 if r["name"] in LAST else 0)
