"""REST: studies, imports and jobs."""

from __future__ import annotations

from django.db import IntegrityError
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access, jobs, services
from annotation.api import serializers as s
from annotation.models import Job, Membership, Study


def _roles(user) -> dict[int, str]:
    return dict(Membership.objects.filter(user=user).values_list("study_id", "role"))


class StudyList(generics.ListCreateAPIView):
    serializer_class = s.StudySerializer

    def get_queryset(self):
        return Study.objects.visible_to(self.request.user).select_related("primary_judge").order_by("name")

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "roles": _roles(self.request.user)}

    def perform_create(self, serializer):
        data = serializer.validated_data
        fields = {key: data[key] for key in ("description", "blind", "segmenter", "thought_segmenter")
                  if key in data}
        try:
            serializer.instance = services.do_create_study(data["name"], owner=self.request.user, **fields)
        except IntegrityError:
            # Lost a race with another request for the same name.
            raise ValidationError({"name": ["study with this name already exists."]}) from None
        # The roles were read before the study existed: the creator owns it.
        serializer.context["roles"] = {**serializer.context.get("roles", {}),
                                       serializer.instance.pk: Membership.Role.OWNER}


class StudyDetail(APIView):
    @extend_schema(responses=s.StudySerializer)
    def get(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        return Response(s.StudySerializer(study, context={"request": request, "roles": {pk: membership.role}}).data)

    @extend_schema(request=s.StudyUpdateSerializer, responses=s.StudySerializer)
    def patch(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership, "changing the study's settings")
        ser = s.StudyUpdateSerializer(study, data=request.data, partial=True)
        ser.is_valid(raise_exception=True)
        services.do_update_study(study, ser.validated_data, user=request.user)
        return Response(s.StudySerializer(study, context={"request": request, "roles": {pk: membership.role}}).data)


class StudyImports(APIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request=s.ImportRequestSerializer, responses={202: s.JobSerializer})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership, "importing traces")
        ser = s.ImportRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        job = services.do_queue_import(
            study, ser.validated_data["file"], fmt=ser.validated_data["format"],
            skip_invalid=ser.validated_data["skip_invalid"], user=request.user,
            thought_segmenter=ser.validated_data["thought_segmenter"],
        )
        job.refresh_from_db()
        return Response(s.JobSerializer(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)


class JobDetail(APIView):
    kinds: tuple[str, ...] | None = None

    @extend_schema(responses=s.JobSerializer)
    def get(self, request, pk: int):
        job, _ = access.check_job(request.user, pk, kinds=self.kinds)
        return Response(s.JobSerializer(job, context={"request": request}).data)

    @extend_schema(responses={200: s.JobSerializer}, summary="Cancel the job",
                   description="Cancels the job (who started it, owners and adjudicators); the job is kept and "
                               "answered with its status (cancelled, or still running until its worker stops).")
    def delete(self, request, pk: int):
        job, membership = access.check_job(request.user, pk, kinds=self.kinds)
        access.check_cancel_job(request.user, job, membership)
        job = jobs.cancel(job)
        return Response(s.JobSerializer(job, context={"request": request}).data)


class ImportDetail(JobDetail):
    kinds = (Job.Kind.IMPORT,)
    http_method_names = ["get"]
