"""The abstraction run as every door starts it (runs.kinds)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from abstraction.core import generators as gen
from abstraction.models import AbstractionRun, Benchmark
from annotation.models import Study
from judges.models import JudgeConfig
from runs import kinds, params
from subjects.models import SubjectModel
from subjects.runkinds import SubjectModelParam

MODES = {"dp": ("dp",), "cot": ("cot",), "both": ("dp", "cot")}
MODE_CHOICES = [("dp", "direct answer (DP)"), ("cot", "chain of thought (CoT)"), ("both", "both")]


class AbstractionStartSerializer(SubjectModelParam, kinds.RunParams):
    model = serializers.CharField(label="Subject model",
                                  help_text="name of one of the study's subject models (api=chat)")
    benchmark = serializers.CharField(label="Benchmark version",
                                      help_text="a benchmark version of the study (generate one with the "
                                                "abstraction command or import one)")
    mode = serializers.ChoiceField(choices=MODE_CHOICES, default="dp", label="Prompting",
                                   help_text="DP asks for the answer alone, CoT for reasoning first; both runs each item twice")
    categories = serializers.CharField(required=False, allow_blank=True, default="", label="Categories",
                                       help_text=f"comma-separated, empty for all: {', '.join(gen.CATEGORIES)}")
    per_sub_dataset = params.serializer_field("per_sub_dataset", required=False, allow_null=True)
    max_examples = params.serializer_field("max_examples", required=False, allow_null=True)
    checker_judge = serializers.CharField(required=False, allow_blank=True, default="", label="Checker (LLM judge)",
                                          help_text="an LLM judge configuration that checks every answer too")
    cohort = None  # a benchmark's items are not traces

    def validate_benchmark(self, value: str) -> Benchmark:
        bench = Benchmark.objects.filter(study=self.context["study"], name=value).first()
        if bench is None:
            raise serializers.ValidationError(f"no abstraction benchmark named {value!r} in this study")
        return bench

    def validate_categories(self, value: str) -> list[str] | None:
        items = [c.strip() for c in (value or "").split(",") if c.strip()]
        unknown = [c for c in items if c not in gen.CATEGORIES]
        if unknown:
            raise serializers.ValidationError(f"unknown category {unknown[0]!r}; choose from {', '.join(gen.CATEGORIES)}")
        return items or None

    def validate_checker_judge(self, value: str) -> JudgeConfig | None:
        if not value:
            return None
        judge = JudgeConfig.objects.filter(study=self.context["study"], name=value).first()
        if judge is None:
            raise serializers.ValidationError(f"no judge configuration named {value!r} in this study")
        return judge


def start(study: Study, d: dict[str, Any], user) -> AbstractionRun:
    # services (pandas) is imported when a run starts, not when the app's ready() declares the kind.
    from abstraction import services

    return services.do_start_run(d["model"], d["benchmark"], modes=MODES[d["mode"]], categories=d["categories"],
                                 per_sub_dataset=d.get("per_sub_dataset"), judge=d["checker_judge"],
                                 max_examples=d.get("max_examples"), force=d["force"],
                                 budget_usd=d.get("budget_usd"), user=user)


def retry(run, user) -> AbstractionRun:
    """The same configuration again without force: a run resumes, asking only the items this
    configuration has not answered in every mode (those that failed among them)."""
    record = AbstractionRun.objects.select_related("subject", "benchmark", "judge", "job").get(run=run)
    p = record.job.params
    from abstraction import services

    return services.do_start_run(record.subject, record.benchmark, modes=record.modes, categories=p.get("categories") or None,
                                 per_sub_dataset=p.get("per_sub_dataset"), judge=record.judge,
                                 max_examples=p.get("max_examples"), budget_usd=run.budget_usd, user=user)


def options(study: Study) -> dict[str, list[str]]:
    return {
        "model": list(SubjectModel.objects.filter(study=study).order_by("name").values_list("name", flat=True)),
        "benchmark": list(Benchmark.objects.filter(study=study).order_by("name").values_list("name", flat=True)),
        # The checker is an LLM judge: the mechanistic one cannot read free answers.
        "checker_judge": list(JudgeConfig.objects.filter(study=study).exclude(provider=JudgeConfig.Provider.MECHANISTIC)
                              .order_by("name").values_list("name", flat=True)),
    }


def declare() -> None:
    kinds.declare(kinds.RunKind(
        "abstraction", "Abstraction", AbstractionStartSerializer, start, options=options, retry=retry,
        help="The abstraction benchmark of paper 004: the subject model answers every item of a benchmark version "
             "(Γ and Δ on the abstraction table).", suites=True))
