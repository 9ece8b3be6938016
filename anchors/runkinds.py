"""Step-importance runs as every door starts them (runs.kinds): the runs page, REST, ``manage.py run``."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from anchors.models import ImportanceRun
from anchors.running import DEFAULT_SAMPLES, DEFAULT_SEED, MAX_STEPS_LISTED, do_start_importance
from annotation.models import Study
from faithfulness.runkinds import subject_names
from faithfulness.running import ContinuationUnavailable, find_subject
from runs import kinds, params
from runs.continuation import MODES
from subjects.models import SubjectModel

MAX_TRACE_IDS = 10_000


@extend_schema_field({"oneOf": [{"type": "string", "example": "a,b"},
                                {"type": "array", "items": {"type": "string"}, "example": ["a", "b"]}]})
class ListParam(serializers.Field):
    """A list as the CLI writes it ("a,b") or as a JSON list; ``integers`` parses each as a whole number."""

    default_error_messages = {"shape": "give a comma-separated string or a JSON list",
                              "long": "at most {max} values", "integer": "not a whole number: {value!r}"}

    def __init__(self, *, integers: bool = False, max_items: int, **kwargs) -> None:
        self.integers, self.max_items = integers, max_items
        super().__init__(**kwargs)

    def to_internal_value(self, data) -> list:
        if isinstance(data, str):
            data = [part.strip() for part in data.split(",") if part.strip()]
        if not isinstance(data, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in data):
            self.fail("shape")
        if len(data) > self.max_items:
            self.fail("long", max=self.max_items)
        if not self.integers:
            return [str(v)[:300] for v in data]
        out = []
        for v in data:
            try:
                out.append(int(v))
            except ValueError:
                self.fail("integer", value=v)
        return out

    def to_representation(self, value) -> list:
        return list(value)


class ImportanceSerializer(kinds.RunParams):
    model = serializers.CharField(label="Subject model", help_text="name of one of the study's subject models")
    samples = params.serializer_field("samples_per_prefix", required=False, default=DEFAULT_SAMPLES)
    temperature = params.serializer_field("temperature", required=False, allow_null=True, default=None)
    stride = params.serializer_field("stride", required=False, default=1)
    steps = ListParam(integers=True, max_items=MAX_STEPS_LISTED, required=False, default="", label="Steps",
                      help_text="only these thought steps (1-based, comma-separated); empty: every stride-th")
    trace_ids = ListParam(max_items=MAX_TRACE_IDS, required=False, default="", label="Traces",
                          help_text="only these traces (comma-separated ids); empty: all of the model's")
    limit = params.serializer_field("limit", required=False, allow_null=True)
    seed = params.serializer_field("seed", required=False, default=DEFAULT_SEED,
                                   help_text="sample s is asked with seed + s")
    skip_forced = serializers.BooleanField(required=False, default=False, label="Skip forced answers",
                                           help_text="do not force the answer at every cut (no forced-answer "
                                                     "importance; saves one request per cut)")
    mode = serializers.ChoiceField(choices=[("", "the probe's"), *((m, m) for m in MODES)], required=False,
                                   allow_blank=True, default="", label="Continuation mode",
                                   help_text="how the server continues a cut thought (empty: the one the probe recorded)")

    def validate_model(self, value: str) -> SubjectModel:
        try:
            return find_subject(self.context["study"], value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


def start(study: Study, d: dict[str, Any], user) -> ImportanceRun:
    try:
        return do_start_importance(
            d["model"], samples=d["samples"], temperature=d.get("temperature"), stride=d["stride"],
            steps=d.get("steps") or None, trace_ids=d.get("trace_ids") or None, cohort=d.get("cohort", ""),
            limit=d.get("limit"), seed=d["seed"], forced=not d["skip_forced"], mode=d["mode"] or None, user=user,
            force=d["force"], budget_usd=d.get("budget_usd"))
    except ContinuationUnavailable as exc:
        raise serializers.ValidationError({"mode": [str(exc)]}) from None


def declare() -> None:
    kinds.declare(kinds.RunKind(
        "step_importance", "Step importance", ImportanceSerializer, start, options=subject_names,
        help="Resample each thought from the prefix before and through every step and read the answers: which "
             "steps carry the answer (thought anchors)."))
