"""The fidelity run as every door starts it (runs.kinds): build or extend the suite of
variants, then run the subject model over originals and variants."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from annotation.models import Study
from fidelity.models import FidelityRun
from fidelity.running import do_queue_run
from fidelity.suites import DEFAULT_AXES, parse_axes
from reasonlib import selection
from runs import kinds, params
from subjects.models import SubjectModel
from subjects.runkinds import SubjectModelParam


class FidelityStartSerializer(SubjectModelParam, kinds.RunParams):
    model = serializers.CharField(label="Subject model", help_text="name of one of the study's subject models")
    suite = serializers.CharField(default="fidelity", max_length=100, label="Suite",
                                  help_text="the suite of variants (made if new)")
    axes = serializers.CharField(default=DEFAULT_AXES, label="Axes",
                                 help_text="comma-separated: perturbation, counterfactual, backward, imported")
    per_problem = params.serializer_field("per_problem", default=1)
    problems = serializers.CharField(default="all", max_length=2000, label="Problems",
                                     help_text=f"which originals: {selection.SYNTAX}")
    seed = params.serializer_field("seed", default=0, label="Suite seed", help_text="the seed of a new suite's variants")

    def validate_axes(self, value: str) -> list[str]:
        try:
            return parse_axes(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_problems(self, value: str) -> str:
        try:
            return selection.validate(value)
        except selection.FilterError as exc:
            raise serializers.ValidationError(str(exc)) from None


def start(study: Study, data: dict[str, Any], user) -> FidelityRun:
    """Queue the run; its job makes the suite's variants and picks the items (plan_run_items)."""
    return do_queue_run(study, data["suite"], data["model"], axes=data["axes"],
                                 per_problem=data["per_problem"], problems=data["problems"], seed=data["seed"],
                                 force=data["force"], budget_usd=data.get("budget_usd"), user=user,
                                 cohort=data.get("cohort", ""))


def declare() -> None:
    kinds.declare(kinds.RunKind(
        "fidelity", "Fidelity", FidelityStartSerializer, start,
        options=lambda study: {"model": list(SubjectModel.objects.filter(study=study).order_by("name")
                                             .values_list("name", flat=True))},
        help="Seeded variants of the study's problems (perturbations, counterfactuals) and backward "
             "reconstructions, answered by a subject model (paper 001).", suites=True))
