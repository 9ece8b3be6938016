"""Every kind of run a researcher can start, declared once (``RunKind``): its parameters (a DRF serializer
built on ``RunParams``, the one validation of the runs page, the REST API, the CLI and the docs), how to
start it, and optionally how to retry it, what its report says and what its form offers to pick from.
An app names the module that declares its kinds on its AppConfig (``run_kinds = "<app>.runkinds"``, whose
``declare()`` declares them; this app imports none of them); the registry loads every app's module the
first time it is read, not at start-up (a kind's parameters are DRF serializers, which a command such as
``import_traces`` never uses: docs/benchmarks.md, "Import"). Every door is generated from the registry: ``/studies/<id>/runs/`` (runs.views), ``/api/v1/studies/<id>/runs/`` and
``/api/v1/runs/<id>/`` (runs.api), ``manage.py run KIND`` (runs.cli), and the list of kinds in
docs/runs.md (``manage.py run_kinds_doc``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from django.apps import apps
from django.db.models import Q
from rest_framework import serializers

from annotation import scopes
from annotation.models import Job, Study
from reasonlib.refusals import Invalid
from runs import engine, params
from runs.models import Run
from runs.params import ParamError


class RunParams(serializers.Serializer):
    """What every kind of run takes, declared once with one label each. A kind's serializer derives from
    it and drops what it cannot honour the DRF way (``cohort = None``).

    ``concurrency`` caps the requests in flight below the model's own setting (runs.engine.overrides: the
    engine stores it on the run, the pool and the chunk size follow it), so no kind threads it through."""

    force = serializers.BooleanField(default=False, label="Ask again",
                                     help_text="ask the model again instead of replaying cached answers "
                                               "(a generation run: K new samples)")
    budget_usd = params.serializer_field("budget_usd", required=False, allow_null=True, default=None)
    cohort = params.cohort_serializer_field()
    concurrency = params.serializer_field("concurrency", required=False, allow_null=True, default=None,
                                          help_text="at most this many requests in flight; empty: the model's own")

    def validate_cohort(self, value: str) -> str:
        try:
            return params.check_cohort(self.context["study"], value)
        except ParamError as exc:
            raise serializers.ValidationError(exc.message) from None


#: Parameters every kind shares (RunParams), drawn after the kind's own on the page, in the CLI and the docs.
SHARED = tuple(RunParams._declared_fields)


@dataclass(frozen=True)
class RunKind:
    """A kind of run as every door starts it.

    ``start(study, data, user)`` gets the serializer's validated data (without the shared ``concurrency``,
    which the engine applies) and returns the kind's row of the run (a runs.models.RunRecord, or the Run).
    ``run_kind`` is the engine's ``Run.kind`` of its runs (default: ``name``); kinds that share one
    (interventions, anytime and early answering are all "faithfulness" runs) are told apart by the run's
    ``config["kind"]``. ``retry(run, user)`` starts the same configuration over what failed (default: the
    same validated parameters again, from the job's ``params["request"]``); ``report(row)`` is the kind's
    own figures for the CLI's last line; ``options(study)`` lists, per field, the values the form offers:
    each a value, or a (value, text) pair when the menu shows something else than what is posted."""

    name: str
    label: str
    serializer: type[RunParams]
    start: Callable[[Study, dict[str, Any], Any], Any]
    help: str = ""
    options: Callable[[Study], dict[str, list[Any]]] = field(default=lambda study: {})
    run_kind: str = ""
    retry: Callable[[Run, Any], Any] | None = None
    report: Callable[[Any], str] | None = None
    # A run about a suite or benchmark (fidelity variants, abstraction items): its items are theirs. Every
    # other kind works on the study's own traces and problems only (Trace/Problem.objects.of_study).
    suites: bool = False

    @property
    def engine_kind(self) -> str:
        return self.run_kind or self.name


_KINDS: dict[str, RunKind] = {}
_loaded = False
_loading = threading.RLock()
#: The order of the kind menu, the CLI's list and the docs.
ORDER = ("generation", "judge", "step-tags", "interventions", "anytime", "early_answering", "step_importance", "fidelity", "abstraction",
         "scanner")


def declare(kind: RunKind) -> None:
    if not issubclass(kind.serializer, RunParams):
        raise TypeError(f"the parameters of kind {kind.name!r} must derive from runs.kinds.RunParams")
    _KINDS[kind.name] = kind


def _registry() -> dict[str, RunKind]:
    """Every declared kind: on the first read, each installed app's ``run_kinds`` module is imported and its
    ``declare()`` called, in the order of INSTALLED_APPS (once per process; a second thread waits for it)."""
    global _loaded
    if not _loaded:
        with _loading:
            if not _loaded:
                for config in apps.get_app_configs():
                    path = getattr(config, "run_kinds", None)
                    if path:
                        import_module(path).declare()
                _loaded = True
    return _KINDS


def all_kinds() -> list[RunKind]:
    return sorted(_registry().values(), key=lambda k: (ORDER.index(k.name) if k.name in ORDER else len(ORDER), k.name))


def get(name: str) -> RunKind:
    try:
        return _registry()[name]
    except KeyError:
        raise serializers.ValidationError(
            {"kind": [f"unknown kind of run {name!r}; choose one of {', '.join(k.name for k in all_kinds())}"]}
        ) from None


def _sharing(engine_kind: str) -> list[RunKind]:
    return [k for k in _registry().values() if k.engine_kind == engine_kind]


def of_run(run: Run) -> RunKind | None:
    """The declared kind ``run`` was started as (None: a kind no door starts, e.g. the forms extraction)."""
    sharing = _sharing(run.kind)
    if len(sharing) == 1:
        return sharing[0]
    return next((k for k in sharing if (run.config or {}).get("kind") == k.name), None)


def name_of(run: Run) -> str:
    kind = of_run(run)
    return kind.name if kind is not None else run.kind


def runs_of(name: str) -> Q:
    """A filter of runs.Run by declared kind (or an engine kind no declaration names)."""
    kind = _registry().get(name)
    if kind is None:
        return Q(kind=name)
    q = Q(kind=kind.engine_kind)
    return q & Q(config__kind=name) if len(_sharing(kind.engine_kind)) > 1 else q


def job_of(row: Any) -> Job:
    return row.job


def run_of(row: Any) -> Run:
    """The engine's Run of a kind's row (a kind without a row of its own uses the Run itself)."""
    return row if isinstance(row, Run) else row.run


def validate(name: str, study: Study, data) -> tuple[RunKind, dict[str, Any], dict[str, Any]]:
    """The kind, its validated parameters and the parameters as they were given (what a retry gives
    again), or a ValidationError naming the fields."""
    kind = get(name)
    ser = kind.serializer(data=data, context={"study": study})
    ser.is_valid(raise_exception=True)
    return kind, dict(ser.validated_data), _as_given(ser)


def _as_given(ser: RunParams) -> dict[str, Any]:
    """The parameters as posted, a form's or a JSON body's (names, not ids that may since have gone)."""
    data, out = ser.initial_data, {}
    for name, f in ser.fields.items():
        if f.read_only or name not in data:
            continue
        many = isinstance(f, serializers.ListField) and hasattr(data, "getlist")
        out[name] = data.getlist(name) if many else data.get(name)
    return out


def _begin(kind: RunKind, study: Study, validated: dict[str, Any], given: dict[str, Any], user) -> Any:
    concurrency = validated.pop("concurrency", None)
    try:
        with engine.overrides(concurrency=concurrency, request={"kind": kind.name, **given}):
            return kind.start(study, validated, user)
    except Invalid as exc:
        # A service's refusal of bad input (reasonlib.refusals.Invalid, ParamError among them) becomes a
        # ValidationError naming its fields, as the serializer's own (each message once: the API prefixes the
        # field itself). A RunConflict (409) and a broker that is down (503) pass through unchanged: every
        # door renders them once.
        detail: dict[str, list[str]] = {}
        for field, message in exc.errors:
            detail.setdefault(field or "non_field_errors", []).append(message)
        raise serializers.ValidationError(detail) from None
    except ValueError as exc:
        field_name = getattr(exc, "field", None)
        if field_name:
            raise serializers.ValidationError({field_name: [getattr(exc, "message", str(exc))]}) from None
        raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from None


def start(name: str, study: Study, data, user) -> Any:
    """Validate and start a run of kind ``name``; returns the kind's row. A refusal of the service becomes
    a ValidationError naming its field (runs.params.ParamError, or any ValueError with a ``field``) or the
    form as a whole. A RunConflict (409) and a broker that is down (503) go through unchanged."""
    kind, validated, given = validate(name, study, data)
    return _begin(kind, study, validated, given, user)


def can_retry(run: Run) -> bool:
    kind = of_run(run)
    return kind is not None and (kind.retry is not None or "request" in (run.job.params or {}))


def retry(run: Run, user) -> Any:
    """Start the same configuration again over what failed: the kind's own retry (the items that failed,
    or what is still missing), else the same parameters again without ``force`` -- every kind resumes
    from what it stored, so a run again without force asks only what is not answered yet."""
    kind = of_run(run)
    if kind is None:
        raise serializers.ValidationError({"non_field_errors": [f"runs of kind {run.kind!r} cannot be retried"]})
    if kind.retry is not None:
        with engine.overrides(concurrency=(run.config or {}).get("max_concurrency")):
            return kind.retry(run, user)
    asked = dict((run.job.params or {}).get("request") or {})
    if not asked:
        raise serializers.ValidationError({"non_field_errors": [f"run {run.pk} kept no parameters to retry with"]})
    asked.pop("kind", None)
    asked["force"] = False
    return start(kind.name, run.job.study, asked, user)


def _pairs(values: list[Any]) -> list[tuple[str, str]]:
    """A menu's (posted value, shown text) pairs from values or pairs."""
    return [(str(v), str(v)) if not isinstance(v, (tuple, list)) else (str(v[0]), str(v[1])) for v in values]


def label_of(name: str, f: serializers.Field) -> str:
    """What the form calls a parameter: the serializer field's label when it was given one; DRF's
    default from the name ("Budget usd") otherwise, which every kind's serializer avoids
    (tests/runs/test_runs_page.py checks them all)."""
    return f.label or name.replace("_", " ").capitalize()


def ordered(names: list[str]) -> list[str]:
    """A kind's own parameters first, then the shared ones (RunParams) in their order."""
    return sorted(names, key=lambda n: SHARED.index(n) + 1 if n in SHARED else 0)


def input_fields(kind: RunKind, study: Study | None) -> dict[str, serializers.Field]:
    fields = kind.serializer(context={"study": study}).fields
    return {name: fields[name] for name in ordered([n for n, f in fields.items() if not f.read_only])}


def form_fields(kind: RunKind, study: Study, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """What the runs page draws for each of the kind's parameters: name, label, input type, bounds,
    choices (value, text), help and the current value (the serializer's declaration, so the page
    cannot drift)."""
    values = values or {}
    options = kind.options(study)
    out = []
    for name, f in input_fields(kind, study).items():
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
    return out
