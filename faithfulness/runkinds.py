"""Interventions, anytime profiles and early answering as every door starts them (runs.kinds)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation.models import Study
from faithfulness.core import anytime as any_core
from faithfulness.core import early as early_core
from faithfulness.core import edits as edit_core
from faithfulness.models import FaithfulnessRun
from faithfulness.running import (
    DEFAULT_SEED,
    ContinuationUnavailable,
    do_start_anytime,
    do_start_early,
    do_start_interventions,
    find_subject,
)
from runs import kinds, params
from runs.continuation import MODES
from subjects.models import SubjectModel


@extend_schema_field({"oneOf": [{"type": "string", "example": "value_flip,paraphrase"},
                           {"type": "array", "items": {"type": "string"}, "example": ["value_flip", "paraphrase"]}]})
class KindsField(serializers.Field):
    """Intervention kinds as the CLI writes them (``"value_flip,paraphrase"``) or as a JSON list
    (``["value_flip", "paraphrase"]``); both parse to the same tuple (issue 23 #17)."""

    default_error_messages = {"shape": "give the kinds as a comma-separated string or a JSON list of strings"}

    def to_internal_value(self, data) -> tuple[str, ...]:
        if isinstance(data, list) and not all(isinstance(item, str) for item in data):
            self.fail("shape")
        if not isinstance(data, (str, list)):
            self.fail("shape")
        try:
            return edit_core.parse_kinds(data)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def to_representation(self, value) -> list[str]:
        return list(value)


class ContinuationRunSerializer(kinds.RunParams):
    """What both kinds take: the subject model, the continuation mode, how many traces, cache and budget."""

    model = serializers.CharField(label="Subject model", help_text="name of one of the study's subject models")
    mode = serializers.ChoiceField(choices=[("", "the probe's"), *((m, m) for m in MODES)], required=False,
                                   allow_blank=True, default="", label="Continuation mode",
                                   help_text="how the server continues a cut trace (empty: the one the probe recorded)")
    limit = params.serializer_field("limit", required=False, allow_null=True)

    def validate_model(self, value: str) -> SubjectModel:
        try:
            return find_subject(self.context["study"], value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class InterventionsSerializer(ContinuationRunSerializer):
    kinds = KindsField(required=False, default=tuple(edit_core.KINDS), label="Edits",
                       help_text=f"comma-separated or a JSON list: {', '.join(edit_core.KINDS)}")
    per_trace = params.serializer_field("per_trace", required=False, default=3)
    seed = params.serializer_field("seed", required=False, default=DEFAULT_SEED,
                                   help_text="the seed of the flipped values")
    channel = serializers.ChoiceField(choices=[("", "the reasoning's"), ("thought", "thought"), ("answer", "answer")],
                                      required=False, allow_blank=True, default="", label="Channel",
                                      help_text="the channel whose steps are edited (empty: the one that holds the "
                                                "reasoning, the thought when the traces have one)")



class AnytimeSerializer(ContinuationRunSerializer):
    budgets = serializers.CharField(required=False, default=any_core.DEFAULT_TOKEN_GRID, label="Budgets",
                                    help_text=f"tokens:B1,B2,...,full or steps:B1,...,full (at most "
                                              f"{any_core.MAX_GRID_POINTS} budgets)")

    def validate_budgets(self, value: str) -> str:
        try:
            return any_core.parse_grid(value).spec
        except any_core.GridError as exc:
            raise serializers.ValidationError(str(exc)) from None


class EarlySerializer(ContinuationRunSerializer):
    grid = serializers.CharField(required=False, default=early_core.DEFAULT_EARLY_GRID, label="Cut points",
                                 help_text="'all' (after every thought step) or fractions of the thought, e.g. 0,0.5,1")

    def validate_grid(self, value: str) -> str:
        try:
            return early_core.parse_early_grid(value).spec
        except any_core.GridError as exc:
            raise serializers.ValidationError(str(exc)) from None


def _mode_refused(call):
    try:
        return call()
    except ContinuationUnavailable as exc:
        raise serializers.ValidationError({"mode": [str(exc)]}) from None


def start_interventions(study: Study, d: dict[str, Any], user) -> FaithfulnessRun:
    return _mode_refused(lambda: do_start_interventions(
        d["model"], kinds=d["kinds"], per_trace=d["per_trace"], seed=d["seed"], mode=d["mode"] or None, user=user,
        force=d["force"], budget_usd=d.get("budget_usd"), limit=d.get("limit"), cohort=d.get("cohort", ""), channel=d.get("channel") or None))


def start_anytime(study: Study, d: dict[str, Any], user) -> FaithfulnessRun:
    return _mode_refused(lambda: do_start_anytime(
        d["model"], grid=d["budgets"], mode=d["mode"] or None, user=user, force=d["force"],
        budget_usd=d.get("budget_usd"), limit=d.get("limit"), cohort=d.get("cohort", "")))


def start_early(study: Study, d: dict[str, Any], user) -> FaithfulnessRun:
    return _mode_refused(lambda: do_start_early(
        d["model"], grid=d["grid"], mode=d["mode"] or None, user=user, force=d["force"],
        budget_usd=d.get("budget_usd"), limit=d.get("limit"), cohort=d.get("cohort", "")))


def subject_names(study: Study) -> dict[str, list[str]]:
    return {"model": list(SubjectModel.objects.filter(study=study).order_by("name").values_list("name", flat=True))}


def declare() -> None:
    kinds.declare(kinds.RunKind(
        "interventions", "Interventions", InterventionsSerializer, start_interventions, options=subject_names,
        run_kind="faithfulness",
        help="Edit causally relevant steps of the model's traces and re-decode from the edited prefix (IFR)."))
    kinds.declare(kinds.RunKind(
        "anytime", "Anytime profile", AnytimeSerializer, start_anytime, options=subject_names, run_kind="faithfulness",
        help="Truncate each trace at every budget of a grid and force an answer (Acc(b), AUC_any)."))
    kinds.declare(kinds.RunKind(
        "early_answering", "Early answering", EarlySerializer, start_early, options=subject_names, run_kind="faithfulness",
        help="Cut each trace's thought after step k, close it and force the answer (AOC, decision point)."))
