"""REST API for judges and judge runs: thin views over judges.services."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access
from judges import serializers as s
from judges import services
from judges.models import JudgeConfig, JudgeRun
from runs import api as runs_api
from runs.serializers import RunDetailSerializer


def _save(study, data: dict, *, judge=None, user=None) -> JudgeConfig:
    data = dict(data)
    prompt_version = data.pop("prompt_version", None)
    # Refusals (and the model's own validation) are rendered with their fields by annotation.api.errors.
    judge, _ = services.do_save_judge(study, data, judge=judge, user=user, prompt_version=prompt_version)
    return judge


class StudyJudges(generics.ListCreateAPIView):
    """GET: the study's judges (members). POST: a new LLM judge (owners)."""

    serializer_class = s.JudgeSerializer

    def _study(self):
        if not hasattr(self, "_membership"):
            self._study_obj, self._membership = access.check_study(self.request.user, self.kwargs["pk"])
        return self._study_obj, self._membership

    def get_queryset(self):
        study, _ = self._study()
        return JudgeConfig.objects.filter(study=study).order_by("name")

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if "pk" in self.kwargs and self.request.user.is_authenticated:
            context["study"] = self._study()[0]
        return context

    def create(self, request, *args, **kwargs):
        study, membership = self._study()
        services.check_owner(membership)
        ser = self.get_serializer(data=request.data)
        ser.is_valid(raise_exception=True)
        judge = _save(study, ser.validated_data, user=request.user)
        return Response(self.get_serializer(judge).data, status=status.HTTP_201_CREATED)


class JudgeDetail(APIView):
    @extend_schema(responses=s.JudgeDetailSerializer)
    def get(self, request, pk: int):
        judge, membership = services.check_judge(request.user, pk)
        return Response(s.JudgeDetailSerializer(judge, context={"request": request, "study": judge.study,
                                                                "membership": membership}).data)

    @extend_schema(request=s.JudgeSerializer, responses=s.JudgeDetailSerializer)
    def patch(self, request, pk: int):
        judge, membership = services.check_judge(request.user, pk)
        services.check_owner(membership)
        if judge.builtin:
            raise ValidationError({"non_field_errors": ["the built-in mechanistic judge has no settings to change"]})
        context = {"request": request, "study": judge.study, "membership": membership}
        ser = s.JudgeSerializer(judge, data=request.data, partial=True, context=context)
        ser.is_valid(raise_exception=True)
        judge = _save(judge.study, ser.validated_data, judge=judge, user=request.user)
        return Response(s.JudgeDetailSerializer(judge, context=context).data)


class StudyJudgeRuns(generics.ListAPIView):
    """GET: the study's judge runs, newest first. POST: start a run (owners) -> 202 with the run, as
    ``POST studies/{id}/runs/`` with ``kind=judge`` (runs.api)."""

    serializer_class = s.JudgeRunSerializer

    def get_queryset(self):
        study, _ = access.check_study(self.request.user, self.kwargs["pk"])
        return (JudgeRun.objects.filter(judge__study=study).select_related("judge", "job", "run")
                .order_by("-created_at", "-pk"))

    @extend_schema(request=s.JudgeRunRequestSerializer, responses={202: RunDetailSerializer})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        return runs_api.start(request, study, membership, "judge", request.data)


class JudgeRunDetail(generics.RetrieveAPIView):
    serializer_class = s.JudgeRunSerializer

    def get_object(self):
        run, _ = access.check_object(self.request.user, JudgeRun.objects.select_related("judge", "job", "run"),
                                     self.kwargs["pk"], study_path="judge__study_id", what="judge run")
        return run
