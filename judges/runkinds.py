"""The judge run as every door starts it (runs.kinds)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from annotation import scopes
from annotation.models import Study, Trace
from annotation.review.filters import study_domains, study_models
from judges import services, tagging
from judges.models import JudgeConfig, JudgeRun, TagRun
from judges.serializers import JudgeRunRequestSerializer
from runs import kinds
from runs.params import ParamError


def start(study: Study, data: dict[str, Any], user) -> JudgeRun:
    filters = {key: data.get(key) for key in services.FILTER_KEYS}
    if data.get("cohort"):
        # A cohort is a set of traces: the run's trace filter (with any trace ids given, the traces in both).
        cohort = Trace.objects.filter(pk__in=scopes.cohort_traces(study, data["cohort"]))
        ids = list(cohort.order_by("pk").values_list("trace_id", flat=True))
        given = set(filters.get("trace_ids") or ids)
        filters["trace_ids"] = [t for t in ids if t in given]
        if not filters["trace_ids"]:
            raise ParamError("cohort", "the cohort holds none of the traces asked for")
    return services.do_start_run(data["judge"], scope=data["traces"], filters=filters, force=data["force"],
                                 budget_usd=data.get("budget_usd"), user=user)


def retry(run, user) -> JudgeRun:
    """The traces whose last judgement by this judge failed, with the run's filters."""
    record = JudgeRun.objects.select_related("judge").get(run=run)
    return services.do_start_run(record.judge, scope=JudgeRun.Scope.FAILED, filters=record.filters, user=user)


def report(record: JudgeRun) -> str:
    return (f"labels {record.labels_created} new, {record.labels_changed} changed, {record.labels_unchanged} "
            f"unchanged; {record.warnings} warnings")


def options(study: Study) -> dict[str, list[str]]:
    """The judges, and the models and domains the traces filters can name (one query each)."""
    return {
        # The built-in verifier first, so a form's default is the judge that costs nothing and needs no server
        # (it was the first name alphabetically: a paid LLM judge).
        "judge": [name for _, name in sorted(
            JudgeConfig.objects.filter(study=study).values_list("provider", "name"),
            key=lambda row: (row[0] != JudgeConfig.Provider.MECHANISTIC, row[1]))],
        # A loose index scan on PostgreSQL: a DISTINCT read every trace of the study (167 ms at 300,000, on
        # every page that draws a judge run's form).
        "model": study_models(study),
        "domain": [d for d in study_domains(study) if d],
    }


class TagRunRequestSerializer(JudgeRunRequestSerializer):
    """The judge run's parameters but its trace filters other than the ids (a cohort narrows them too)."""

    traces = model = domain = answer_correct = None
    judge = serializers.CharField(label="Judge", help_text="name of one of the study's LLM judges")

    def validate_judge(self, value: str) -> JudgeConfig:
        judge = super().validate_judge(value)
        if judge.provider != JudgeConfig.Provider.LLM:
            raise serializers.ValidationError(f"{value} is a {judge.provider} judge; only an LLM judge tags steps")
        return judge


def start_tags(study: Study, data: dict[str, Any], user) -> TagRun:
    return tagging.start_for_study(study, data["judge"], cohort=data.get("cohort"), trace_ids=data.get("trace_ids"),
                                   user=user, force=data["force"], budget_usd=data.get("budget_usd"))


def report_tags(record: TagRun) -> str:
    return f"traces tagged {record.traces_tagged}; tags {record.tags_created} new, {record.tags_removed} removed"


def declare() -> None:
    kinds.declare(kinds.RunKind(
        "judge", "Judge", JudgeRunRequestSerializer, start, options=options, retry=retry, report=report,
        help="Label every step of the selected traces with a judge configuration."))
    kinds.declare(kinds.RunKind(
        tagging.KIND, "Step-function tags", TagRunRequestSerializer, start_tags, report=report_tags,
        options=lambda study: {"judge": list(JudgeConfig.objects.filter(study=study, provider=JudgeConfig.Provider.LLM)
                                             .order_by("name").values_list("name", flat=True))},
        help="Tag the function of every step of the selected traces (Thought Anchors' eight categories) with "
             "an LLM judge."))
