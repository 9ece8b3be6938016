"""Generation as every door starts it (runs.kinds). The probe of a subject model is not a run (it asks a
few requests outside the engine): its button is on the subject model's page, its endpoint
``POST subject-models/{id}/probe/``."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from annotation.models import Study
from runs import kinds
from subjects import services
from subjects.models import GenerationRun, SubjectModel
from subjects.serializers import GenerationRunRequestSerializer


def subject_names(study: Study) -> dict[str, list[str]]:
    return {"model": list(SubjectModel.objects.filter(study=study).order_by("name").values_list("name", flat=True))}


def start_generation(study: Study, data: dict[str, Any], user) -> GenerationRun:
    return services.do_start_generation(data["model"], scope=data["problems"], samples=data.get("samples"),
                                        force=data["force"], budget_usd=data.get("budget_usd"), user=user,
                                        cohort=data.get("cohort", ""))


def retry_generation(run, user) -> GenerationRun:
    """The problems still lacking some of their K samples (those that failed, and any never asked)."""
    record = GenerationRun.objects.select_related("subject").get(run=run)
    return services.do_start_generation(record.subject, scope=GenerationRun.Scope.MISSING, samples=record.samples,
                                        user=user, cohort=str(run.job.params.get("cohort") or ""))


def report(record: GenerationRun) -> str:
    return (f"traces {record.traces_created} new, {record.traces_unchanged} unchanged, "
            f"{record.samples_failed} samples failed")


class SubjectModelParam:
    """A kind's ``model`` parameter: the name of one of the study's subject models (``context["study"]``),
    validated to the model itself, for every kind that calls a subject model."""

    def validate_model(self, value: str) -> SubjectModel:
        subject = SubjectModel.objects.filter(study=self.context["study"], name=value).first()
        if subject is None:
            raise serializers.ValidationError(f"no subject model named {value!r} in this study")
        return subject


def declare() -> None:
    kinds.declare(kinds.RunKind(
        "generation", "Generation", GenerationRunRequestSerializer, start_generation, options=subject_names,
        retry=retry_generation, report=report,
        help="K completions of a subject model for each selected problem; they become traces."))
