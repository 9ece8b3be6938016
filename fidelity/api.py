"""REST API of the fidelity diagnostics: thin views over fidelity.suites, running and report."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access
from annotation.api.schema import ARRAY_OF_OBJECTS
from fidelity import runkinds
from fidelity.models import FidelityRun
from fidelity.report import item_rows, report, report_data
from fidelity.running import check_run
from runs import api as runs_api
from runs.serializers import RunDetailSerializer


def _run_row(r: FidelityRun) -> dict:
    return {"id": r.pk, "suite": r.suite.name, "subject_model": r.subject.name, "config_version": r.config_version,
            "axes": r.axes, "status": r.job.status, "done": r.job.done, "total": r.job.total,
            "created_at": r.created_at.isoformat()}


class StudyFidelityRuns(APIView):
    """GET: the study's fidelity runs (members). POST: queue a run (owners) -> 202 with the run, as
    ``POST studies/{id}/runs/`` with ``kind=fidelity`` (runs.api); its job builds or extends the suite:
    ``{"model", "suite"?, "axes"?, "per_problem"?, "problems"?, "seed"?}``; GET jobs/{job}/ follows it, its
    params hold the suite's report ("suite_report") once it is planned."""

    @extend_schema(responses={200: ARRAY_OF_OBJECTS})
    def get(self, request, pk: int):
        study, _ = access.check_study(request.user, pk)
        runs = FidelityRun.objects.filter(suite__study=study).select_related("suite", "subject", "job").order_by("-pk")
        return Response([_run_row(r) for r in runs])

    @extend_schema(request=runkinds.FidelityStartSerializer, responses={202: RunDetailSerializer})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        return runs_api.start(request, study, membership, "fidelity", request.data)


class FidelityRunDetail(APIView):
    """GET: the run's report (four-axis summary, Table 1 and Table 2 rows, per-metric means with intervals)."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        record, _ = check_run(request.user, pk)
        return Response(report_data(report(record)))


class FidelityRunItems(APIView):
    """GET: one row per original and per variant (the export's rows)."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        record, _ = check_run(request.user, pk)
        return Response(item_rows(report(record)))
