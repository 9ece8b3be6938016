"""REST API of the abstraction benchmark: the table and the checked items, thin views over services."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from abstraction import runkinds, services
from abstraction.models import AbstractionRun, Benchmark, Result
from annotation import access
from annotation.api.schema import ARRAY_OF_OBJECTS
from runs import api as runs_api
from runs.serializers import RunDetailSerializer

MAX_PAGE = 1000


class TableQuery(serializers.Serializer):
    """The table's query parameters, in their ranges (a refusal names the field)."""

    benchmark = serializers.CharField(required=False, allow_blank=True)
    resamples = serializers.IntegerField(min_value=0, max_value=10000, default=1000,
                                         help_text="bootstrap resamples of the intervals (0: none)")


class ItemsQuery(serializers.Serializer):
    """The items' numeric query parameters, in their ranges (a refusal names the field)."""

    instance = serializers.IntegerField(min_value=0, required=False)
    offset = serializers.IntegerField(min_value=0, default=0)
    limit = serializers.IntegerField(min_value=1, max_value=MAX_PAGE, default=100)


def _query(serializer: type[serializers.Serializer], params) -> dict:
    """``params`` read by ``serializer`` (an empty value counts as not given); bad values are the
    serializer's 400 naming the field."""
    names = serializer().fields
    ser = serializer(data={k: v for k, v in params.items() if k in names and v != ""})
    ser.is_valid(raise_exception=True)
    return ser.validated_data


def _bench(study, name: str | None) -> Benchmark | None:
    if not name:
        return None
    bench = Benchmark.objects.filter(study=study, name=name).first()
    if bench is None:
        raise NotFound(f"no abstraction benchmark named {name!r}")
    return bench


class AbstractionTable(APIView):
    """GET: one row per (model, prompting mode): Γ per sub-dataset and category, AVG, with_mem, without_*,
    Δ_OP/NUM/ALL, F, their 95% bootstrap intervals, the checker used; full precision."""

    @extend_schema(parameters=[TableQuery], responses={200: dict})
    def get(self, request, pk: int):
        study, _ = access.check_study(request.user, pk)
        query = _query(TableQuery, request.query_params)
        bench = _bench(study, query.get("benchmark"))
        rows = services.table(study, benchmark=bench, n_resamples=query["resamples"])
        benches = [bench] if bench else list(services.benchmarks_of(study))
        return Response({"benchmarks": [b.describe() | {"counts": b.counts} for b in benches],
                         "rows": [r.as_dict() for r in rows]})


class AbstractionItems(APIView):
    """GET: checked answers, filtered by benchmark, sub_dataset, task, instance, model, mode; paged by
    ``offset`` / ``limit`` (at most 1000)."""

    @extend_schema(parameters=[*(OpenApiParameter(n, str) for n in ("benchmark", "sub_dataset", "task", "model",
                                                                    "mode")), ItemsQuery],
                   responses={200: dict})
    def get(self, request, pk: int):
        study, _ = access.check_study(request.user, pk)
        q = request.query_params
        qs = Result.objects.filter(item__benchmark__study=study).select_related("item__benchmark")
        bench = _bench(study, q.get("benchmark"))
        if bench is not None:
            qs = qs.filter(item__benchmark=bench)
        for key, field in (("sub_dataset", "item__sub_dataset"), ("task", "item__task"), ("model", "model"),
                           ("mode", "mode")):
            if q.get(key):
                qs = qs.filter(**{field: q[key]})
        numbers = _query(ItemsQuery, q)
        if "instance" in numbers:
            qs = qs.filter(item__instance=numbers["instance"])
        offset, limit = numbers["offset"], numbers["limit"]
        total = qs.count()
        page = qs.order_by("item__benchmark__name", "item__sub_dataset", "item__instance", "model", "mode")[
            offset:offset + limit]
        return Response({"count": total, "offset": offset, "results": [{
            "benchmark": r.item.benchmark.name, "category": r.item.category, "sub_dataset": r.item.sub_dataset,
            "task": r.item.task, "variant": r.item.variant, "instance": r.item.instance, "question": r.item.question,
            "gold": r.item.answer, "model": r.model, "mode": r.mode, "output": r.output, "extracted": r.extracted,
            "correct": r.correct, "checker": r.checker, "det_correct": r.det_correct, "llm_correct": r.llm_correct,
            "imported_correct": r.imported_correct, "trace": r.trace_id} for r in page]})


class StudyAbstractionRuns(APIView):
    """GET: the study's abstraction runs, newest first (members). POST: start one (owners) -> 202 with the
    run, as ``POST studies/{id}/runs/`` with ``kind=abstraction`` (runs.api): ``{"model", "benchmark", "mode"?,
    "categories"?, "per_sub_dataset"?, "max_examples"?, "checker_judge"?, "force"?, "budget_usd"?}``."""

    @extend_schema(responses={200: ARRAY_OF_OBJECTS})
    def get(self, request, pk: int):
        study, _ = access.check_study(request.user, pk)
        runs = (AbstractionRun.objects.filter(benchmark__study=study).select_related("subject", "benchmark", "job", "run")
                .order_by("-created_at", "-pk"))
        return Response([{"id": r.pk, "subject_model": r.subject.name, "benchmark": r.benchmark.name,
                          "modes": r.modes, "checker": r.checker, "status": r.job.status, "done": r.job.done,
                          "total": r.job.total, "failed": r.job.failed, "results": r.results_created,
                          "requests": r.run.requests, "cost_usd": r.run.cost_usd, "job": r.job_id,
                          "created_at": r.created_at.isoformat()} for r in runs])

    @extend_schema(request=runkinds.AbstractionStartSerializer, responses={202: RunDetailSerializer})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        return runs_api.start(request, study, membership, "abstraction", request.data)
