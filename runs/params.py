"""The one declaration of every numeric run parameter's range (docs/runs.md, "Parameter limits").

Web forms, REST serializers, management commands and the services all take their bounds from
``LIMITS``: the services check every value with ``check`` (so a value that reaches a service by any
road is refused the same way, naming the field), and forms, serializers, model validators and
argparse types are made from the same entries, so the three front doors refuse the same values
before a service is asked. The maxima keep one run from pinning a worker (a timeout), filling
the database (an anytime grid of 300,000 budgets) or overflowing a PostgreSQL ``integer``
(max_tokens). The anytime grid is bounded by its parser (faithfulness.core.anytime: MAX_GRID_POINTS,
MAX_BUDGET), pure code that every road calls too."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass

from django.core.validators import MaxValueValidator, MinValueValidator

from reasonlib.refusals import FieldInvalid


@dataclass(frozen=True)
class Limit:
    kind: type  # int or float
    low: float
    high: float
    why: str  # why the maximum is what it is (docs/runs.md)
    label: str  # what a form calls the parameter
    help: str  # what it does, in a few words (a form's help text, before the range)


LIMITS: dict[str, Limit] = {
    "budget_usd": Limit(float, 0, 100_000, "a typo of a few zeros should not be spendable",
                        "Budget (USD)", "stop once the estimated cost reaches this many US dollars; empty: no limit"),
    "samples": Limit(int, 1, 100, "K completions per problem; pass@k needs no more",
                     "Samples per problem (K)", "completions asked of each problem; empty: the subject model's"),
    "max_tokens": Limit(int, 1, 262_144, "the longest context of current open models; fits a PostgreSQL integer",
                        "Max tokens", "the longest answer the server may write, in tokens"),
    "timeout_seconds": Limit(float, 0.1, 600, "one request may hold a worker slot at most ten minutes",
                             "Timeout (seconds)", "how long one request may take"),
    "concurrency": Limit(int, 1, 64, "requests in flight per run", "Concurrency", "requests in flight at once"),
    "rate_limit_per_minute": Limit(int, 1, 100_000, "requests per minute per run",
                                   "Rate limit (per minute)", "requests a minute at most"),
    "max_retries": Limit(int, 0, 20, "attempts after the first", "Retries", "attempts after a failed request"),
    "per_trace": Limit(int, 1, 20, "intervention targets per trace",
                       "Targets per trace", "at most this many steps of each trace are edited"),
    "per_problem": Limit(int, 1, 10, "fidelity variants per strategy and problem",
                         "Variants per problem (K)", "variants of each problem for every strategy"),
    "per_sub_dataset": Limit(int, 1, 10_000, "abstraction instances per sub-dataset",
                             "Instances per sub-dataset", "only the first N instances of every sub-dataset; empty: all"),
    "max_examples": Limit(int, 0, 50, "the abstraction prompt has 50 worked examples",
                          "Worked examples", "send only the first N of the 50 worked examples; empty: all"),
    "limit": Limit(int, 1, 100_000, "traces of a faithfulness run",
                   "Traces (at most)", "only the first N traces, by id; empty: all"),
    "seed": Limit(int, 0, 2**31 - 1, "fits a PostgreSQL integer", "Seed", "the seed of the random choices"),
    "samples_per_prefix": Limit(int, 1, 200, "continuations per thought prefix of a step-importance run; the paper "
                                "used 100", "Samples per prefix (N)", "continuations resampled from each prefix"),
    "stride": Limit(int, 1, 10_000, "every k-th thought step; a thought has at most a few thousand",
                    "Stride", "measure every k-th thought step (1: every step)"),
    "temperature": Limit(float, 0, 2, "the range of the OpenAI API", "Temperature",
                         "sampling temperature of the continuations; empty: the subject model's"),
}


class ParamError(FieldInvalid):
    """A run parameter out of its range; the message starts with the field's name."""


def range_text(name: str) -> str:
    lim = LIMITS[name]
    return f"{lim.low:g}..{lim.high:g}"


def range_words(name: str) -> str:
    """The range as a form's help text says it: "1 to 100,000"."""
    lim = LIMITS[name]

    def fmt(v: float) -> str:
        return f"{int(v):,}" if lim.kind is int or v == int(v) else f"{v:g}"

    return f"{fmt(lim.low)} to {fmt(lim.high)}"


def _human(name: str, kwargs: dict) -> dict:
    """A form or serializer field's label and help text: the caller's, else the declaration's, and the
    range in words after the help (what a person reads beside the input; the bounds are on it too)."""
    lim = LIMITS[name]
    kwargs.setdefault("label", lim.label)
    kwargs["help_text"] = f"{kwargs.get('help_text') or lim.help} ({range_words(name)})"
    return kwargs


def check(name: str, value, *, field: str | None = None):
    """``value`` when it lies in the declared range of ``name`` (None passes: not given); else a
    ParamError naming ``field`` (default: ``name``)."""
    if value is None:
        return None
    lim = LIMITS[name]
    field = field or name
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParamError(field, f"must be a number, got {value!r}")
    if lim.kind is int and value != int(value):
        raise ParamError(field, f"must be a whole number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ParamError(field, f"must be a finite number, got {value!r}")
    if not lim.low <= value <= lim.high:
        raise ParamError(field, f"must lie in {range_text(name)}, got {value:g}")
    return lim.kind(value)


def validators(name: str) -> list:
    """Model-field validators of the range (a ModelForm and a ModelSerializer inherit them)."""
    lim = LIMITS[name]
    return [MinValueValidator(lim.kind(lim.low)), MaxValueValidator(lim.kind(lim.high))]


def form_field(name: str, **kwargs):
    from django import forms

    lim = LIMITS[name]
    cls = forms.IntegerField if lim.kind is int else forms.FloatField
    return cls(min_value=lim.kind(lim.low), max_value=lim.kind(lim.high), **_human(name, kwargs))


def serializer_field(name: str, **kwargs):
    from rest_framework import serializers

    lim = LIMITS[name]
    cls = serializers.IntegerField if lim.kind is int else serializers.FloatField
    return cls(min_value=lim.kind(lim.low), max_value=lim.kind(lim.high), **_human(name, kwargs))


def cli_type(name: str) -> Callable[[str], int | float]:
    """An argparse ``type`` that refuses a value out of range with the same message."""
    lim = LIMITS[name]

    def parse(text: str) -> int | float:
        try:
            value = lim.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {'whole ' if lim.kind is int else ''}number: {text!r}") from None
        try:
            return check(name, value)
        except ParamError as exc:
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None

    parse.__name__ = name
    return parse


# --------------------------------------------------------------------------
# A saved cohort as a run's scope (issue 22): one check for serializer, service and command.


def check_cohort(study, value) -> str:
    """"" or the id of one of ``study``'s saved cohorts (annotation.scopes, supplied by search);
    ParamError("cohort") otherwise."""
    from annotation import scopes

    try:
        return scopes.check_cohort(study, value)
    except scopes.ScopeError as exc:
        raise ParamError("cohort", str(exc)) from None


def cohort_serializer_field():
    """The ``cohort`` parameter of every kind of run that takes one (validated by ``validate_cohort``
    of CohortParam)."""
    from rest_framework import serializers

    from annotation.scopes import COHORT_HELP

    return serializers.CharField(required=False, allow_blank=True, default="", max_length=20, label="Cohort",
                                 help_text=COHORT_HELP)


class CohortParam:
    """Serializer mixin: a ``cohort`` field checked by ``check_cohort`` against ``context["study"]``."""

    def validate_cohort(self, value: str) -> str:
        from rest_framework import serializers

        try:
            return check_cohort(self.context["study"], value)
        except ParamError as exc:
            raise serializers.ValidationError(exc.message) from None


def add_cohort_argument(parser) -> None:
    from annotation.scopes import COHORT_HELP

    parser.add_argument("--cohort", default="", help=COHORT_HELP)
