"""The judge run as the runs page and the API start it (runs.kinds)."""

from __future__ import annotations

from typing import Any

from annotation.models import Problem, Study, Trace
from judges import services
from judges.models import JudgeConfig, JudgeRun
from judges.serializers import JudgeRunRequestSerializer
from runs import kinds


def start(study: Study, data: dict[str, Any], user) -> JudgeRun:
    filters = {key: data.get(key) for key in services.FILTER_KEYS}
    return services.do_start_run(data["judge"], scope=data["traces"], filters=filters, force=data["force"],
                                 budget_usd=data.get("budget_usd"), user=user)


def retry(run, user) -> JudgeRun:
    """The traces whose last judgement by this judge failed, with the run's filters."""
    record = JudgeRun.objects.select_related("judge").get(run=run)
    return services.do_start_run(record.judge, scope=JudgeRun.Scope.FAILED, filters=record.filters, user=user)


def options(study: Study) -> dict[str, list[str]]:
    """The judges, and the models and domains the traces filters can name (one DISTINCT query each)."""
    return {
        "judge": list(JudgeConfig.objects.filter(study=study).order_by("name").values_list("name", flat=True)),
        "model": list(Trace.objects.filter(study=study).order_by("model").values_list("model", flat=True).distinct()),
        "domain": [d for d in Problem.objects.filter(study=study).order_by("domain")
                   .values_list("domain", flat=True).distinct() if d],
    }


def declare() -> None:
    kinds.declare(kinds.Starter(
        "judge", "Judge", JudgeRunRequestSerializer, start,
        options=options,
        help="Label every step of the selected traces with a judge configuration."))
    kinds.declare_retry("judge", retry)
