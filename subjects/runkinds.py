"""The kinds of run this app declares to the runs page and the API (runs.kinds): generation and probe."""

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


class SubjectModelParam:
    """A kind's ``model`` parameter: the name of one of the study's subject models (``context["study"]``),
    validated to the model itself, for every kind that calls a subject model."""

    def validate_model(self, value: str) -> SubjectModel:
        subject = SubjectModel.objects.filter(study=self.context["study"], name=value).first()
        if subject is None:
            raise serializers.ValidationError(f"no subject model named {value!r} in this study")
        return subject


class ProbeRequestSerializer(SubjectModelParam, serializers.Serializer):
    model = serializers.CharField(label="Subject model", help_text="name of one of the study's subject models")


def declare() -> None:
    kinds.declare(kinds.Starter(
        "generation", "Generation", GenerationRunRequestSerializer, start_generation, options=subject_names,
        help="K completions of a subject model for each selected problem; they become traces."))
    kinds.declare(kinds.Starter(
        "probe", "Probe", ProbeRequestSerializer, lambda study, data, user: services.do_start_probe(data["model"], user=user),
        options=subject_names,
        help="Ask the server which continuation mode it supports (a few requests; interventions, anytime and "
             "early answering need it)."))
    kinds.declare_retry("generation", retry_generation)
