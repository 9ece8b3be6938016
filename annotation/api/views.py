"""REST API (docs/api.md): thin views over annotation.services."""

from __future__ import annotations

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import jobs, services
from annotation.api import serializers as s
from annotation.models import Job, Membership, Step, Study, Trace


def _roles(user) -> dict[int, str]:
    return dict(Membership.objects.filter(user=user).values_list("study_id", "role"))


class StudyList(generics.ListCreateAPIView):
    serializer_class = s.StudySerializer

    def get_queryset(self):
        return Study.objects.visible_to(self.request.user).select_related("primary_judge").order_by("name")

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "roles": _roles(self.request.user)}

    def perform_create(self, serializer):
        study, _ = services.do_get_or_create_study(serializer.validated_data["name"], owner=self.request.user)
        for key in ("description", "blind", "segmenter"):
            if key in serializer.validated_data:
                setattr(study, key, serializer.validated_data[key])
        study.save()
        serializer.instance = study


class StudyDetail(APIView):
    @extend_schema(responses=s.StudySerializer)
    def get(self, request, pk: int):
        study, membership = services.check_membership(request.user, pk)
        return Response(s.StudySerializer(study, context={"request": request, "roles": {pk: membership.role}}).data)

    @extend_schema(request=s.StudyUpdateSerializer, responses=s.StudySerializer)
    def patch(self, request, pk: int):
        study, membership = services.check_membership(request.user, pk)
        services.check_role(membership, Membership.Role.OWNER)
        ser = s.StudyUpdateSerializer(study, data=request.data, partial=True)
        ser.is_valid(raise_exception=True)
        ser.save()
        return Response(s.StudySerializer(study, context={"request": request, "roles": {pk: membership.role}}).data)


class StudyImports(APIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request=s.ImportRequestSerializer, responses={202: s.JobSerializer})
    def post(self, request, pk: int):
        study, membership = services.check_membership(request.user, pk)
        services.check_role(membership, Membership.Role.OWNER)
        ser = s.ImportRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        job = services.do_queue_import(
            study, ser.validated_data["file"], fmt=ser.validated_data["format"],
            skip_invalid=ser.validated_data["skip_invalid"], user=request.user,
        )
        job.refresh_from_db()
        return Response(s.JobSerializer(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)


class JobDetail(APIView):
    kinds: tuple[str, ...] | None = None

    def _job(self, request, pk: int) -> Job:
        qs = Job.objects.visible_to(request.user)
        if self.kinds:
            qs = qs.filter(kind__in=self.kinds)
        return get_object_or_404(qs, pk=pk)

    @extend_schema(responses=s.JobSerializer)
    def get(self, request, pk: int):
        return Response(s.JobSerializer(self._job(request, pk), context={"request": request}).data)

    @extend_schema(responses=s.JobSerializer)
    def delete(self, request, pk: int):
        job = self._job(request, pk)
        _, membership = services.check_membership(request.user, job.study_id)
        if job.created_by_id != request.user.pk:
            services.check_role(membership, Membership.Role.OWNER)
        job = jobs.cancel(job)
        return Response(s.JobSerializer(job, context={"request": request}).data)


class ImportDetail(JobDetail):
    kinds = (Job.Kind.IMPORT,)
    http_method_names = ["get"]


class StudyTraces(generics.ListAPIView):
    serializer_class = s.TraceListSerializer

    def get_queryset(self):
        study, _ = services.check_membership(self.request.user, self.kwargs["pk"])
        qs = Trace.objects.filter(study=study).select_related("problem").order_by("pk")
        params = self.request.query_params
        if params.get("model"):
            qs = qs.filter(model=params["model"])
        if params.get("domain"):
            qs = qs.filter(problem__domain=params["domain"])
        if params.get("answer_correct") in ("true", "false"):
            qs = qs.filter(answer_correct=params["answer_correct"] == "true")
        if params.get("flagged") in ("true", "false"):
            qs = qs.filter(flagged=params["flagged"] == "true")
        return qs


class TraceDetail(generics.RetrieveAPIView):
    serializer_class = s.TraceSerializer

    def get_queryset(self):
        return (
            Trace.objects.visible_to(self.request.user)
            .select_related("problem")
            .prefetch_related(Prefetch("steps", queryset=Step.objects.order_by("index")))
        )
