"""REST API of the fidelity diagnostics: thin views over fidelity.services."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access
from fidelity import services
from fidelity.models import FidelityRun
from reasonlib.selection import FilterError
from subjects.models import SubjectModel


def _run_row(r: FidelityRun) -> dict:
    return {"id": r.pk, "suite": r.suite.name, "subject_model": r.subject.name, "config_version": r.config_version,
            "axes": r.axes, "status": r.job.status, "done": r.job.done, "total": r.job.total,
            "created_at": r.created_at.isoformat()}


class StudyFidelityRuns(APIView):
    """GET: the study's fidelity runs (members). POST: build or extend a suite and start a run (owners):
    ``{"model", "suite"?, "axes"?, "per_problem"?, "problems"?, "seed"?}``."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        study, _ = access.check_study(request.user, pk)
        runs = FidelityRun.objects.filter(suite__study=study).select_related("suite", "subject", "job").order_by("-pk")
        return Response([_run_row(r) for r in runs])

    @extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership, "starting fidelity runs")
        data = request.data if isinstance(request.data, dict) else {}
        subject = SubjectModel.objects.filter(study=study, name=data.get("model") or "").first()
        if subject is None:
            raise ValidationError({"model": ["no subject model of that name in this study"]})
        try:
            axes = services.parse_axes(data.get("axes"))
        except ValueError as exc:
            raise ValidationError({"axes": [str(exc)]}) from None
        try:
            per_problem, seed = int(data.get("per_problem", 1)), int(data.get("seed", 0))
        except (TypeError, ValueError):
            raise ValidationError({"per_problem": ["per_problem and seed must be integers"]}) from None
        problems = str(data.get("problems") or "all")
        try:
            made = services.do_create_suite(study, str(data.get("suite") or "fidelity"), axes=axes,
                                            per_problem=per_problem, problems=problems, seed=seed, user=request.user)
            fid_run = services.do_start_run(made.suite, subject, axes=axes, problems=problems, user=request.user)
        except FilterError as exc:
            raise ValidationError({"problems": [str(exc)]}) from None
        except ValueError as exc:
            raise ValidationError({"per_problem": [str(exc)]}) from None
        return Response({**_run_row(fid_run), "variants_created": made.created, "golds_derived": made.derived,
                         "golds_unknown": made.unknown, "skipped": made.skipped}, status=status.HTTP_201_CREATED)


class FidelityRunDetail(APIView):
    """GET: the run's report (four-axis summary, Table 1 and Table 2 rows, per-metric means with intervals)."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        fid_run, _ = services.check_run(request.user, pk)
        return Response(services.report_data(services.report(fid_run)))


class FidelityRunItems(APIView):
    """GET: one row per original and per variant (the export's rows)."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        fid_run, _ = services.check_run(request.user, pk)
        return Response(services.item_rows(services.report(fid_run)))
