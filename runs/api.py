"""The REST API of runs of every kind, generated from the registry of kinds (runs.kinds) with no code per
kind: start any kind, list a study's runs, read, cancel and retry one run. Every start answers 202 with
the same body (runs.serializers.RunDetailSerializer)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access, jobs
from annotation.models import Job, Membership, Study
from runs import kinds
from runs.engine import ACTIVE
from runs.models import Run
from runs.serializers import RunDetailSerializer, RunSerializer


def started(request: Request, row: Any) -> Response:
    """The 202 of every start of every kind, from any endpoint: the run as ``GET runs/{id}/`` shows it."""
    run = _runs().get(pk=kinds.run_of(row).pk)
    return Response(RunDetailSerializer(run, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)


def start(request: Request, study: Study, membership: Membership, kind: str, data) -> Response:
    """Start a run of ``kind`` in ``study`` (owners) and answer its 202: the POST of every start endpoint."""
    access.check_owner(membership, "starting runs")
    return started(request, kinds.start(kind, study, data, request.user))


def _runs() -> QuerySet[Run]:
    return Run.objects.select_related("job__created_by", "job__study")


def _request_schema() -> PolymorphicProxySerializer:
    """The body of ``POST studies/{id}/runs/``: one of the kinds' parameters, told apart by ``kind``."""
    def with_kind(kind: kinds.RunKind) -> type[serializers.Serializer]:
        name = "".join(part.capitalize() for part in kind.name.split("_")) + "RunStart"
        return type(name, (kind.serializer,), {
            "kind": serializers.ChoiceField(choices=[kind.name], help_text=kind.help),
            "__module__": __name__})

    return PolymorphicProxySerializer(component_name="RunStart", resource_type_field_name="kind",
                                      serializers={k.name: with_kind(k) for k in kinds.all_kinds()})


class StudyRuns(generics.ListAPIView):
    """GET: the study's runs of every kind, newest first (members), filtered by ``kind`` and ``status``.
    POST: start a run of any kind (owners): ``{"kind": ..., parameters}`` -> 202 with the run."""

    serializer_class = RunSerializer

    def get_queryset(self) -> QuerySet[Run]:
        study, _ = access.check_study(self.request.user, self.kwargs["pk"])
        qs = _runs().listed().filter(job__study=study).order_by("-created_at", "-pk")
        kind, state = self.request.query_params.get("kind"), self.request.query_params.get("status")
        if kind:
            kinds.get(kind)  # an unknown kind is a 400 naming the kinds, not an empty list
            qs = qs.filter(kinds.runs_of(kind))
        if state:
            if state not in Job.Status.values:
                raise ValidationError({"status": [f"unknown status {state!r}; choose one of "
                                                  f"{', '.join(Job.Status.values)}"]})
            qs = qs.filter(job__status=state)
        return qs

    @extend_schema(parameters=[
        OpenApiParameter("kind", str, description="only runs of this kind (runs.kinds: generation, judge, ...)"),
        OpenApiParameter("status", str, enum=list(Job.Status.values), description="only runs in this status")])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(request=_request_schema(), responses={202: RunDetailSerializer})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        return start(request, study, membership, str(request.data.get("kind", "")), request.data)


def check_run(user, pk: int) -> tuple[Run, Any]:
    """A run of a study the user belongs to, and that membership (outsiders: 404)."""
    return access.check_object(user, _runs(), pk, study_path="job__study_id", what="run")


class RunDetail(APIView):
    @extend_schema(responses=RunDetailSerializer)
    def get(self, request, pk: int):
        run, _ = check_run(request.user, pk)
        return Response(RunDetailSerializer(run, context={"request": request}).data)


class RunCancel(APIView):
    """Ask the run to stop (who started it, owners and adjudicators); what finished is kept."""

    @extend_schema(request=None, responses=RunDetailSerializer)
    def post(self, request, pk: int):
        run, membership = check_run(request.user, pk)
        access.check_cancel_job(request.user, run.job, membership)
        jobs.cancel(run.job)
        return Response(RunDetailSerializer(_runs().get(pk=run.pk), context={"request": request}).data)


class RunRetry(APIView):
    """Start the same configuration again over what failed (owners) -> 202 with the new run; 400 while the
    run is active."""

    @extend_schema(request=None, responses={202: RunDetailSerializer})
    def post(self, request, pk: int):
        run, membership = check_run(request.user, pk)
        access.check_owner(membership, "starting runs")
        if run.job.status in ACTIVE:
            raise ValidationError({"non_field_errors": [f"run {run.pk} is still {run.job.status}; cancel it or "
                                                        "wait for its end"]})
        if not kinds.can_retry(run):
            raise ValidationError({"non_field_errors": [f"run {run.pk} cannot be retried: it kept no parameters"]})
        return started(request, kinds.retry(run, request.user))
