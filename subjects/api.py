"""REST API for subject models and generation runs: thin views over subjects.services."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access
from annotation.api.serializers import JobSerializer
from runs import api as runs_api
from runs.serializers import RunDetailSerializer
from subjects import serializers as s
from subjects import services
from subjects.models import GenerationRun, PromptTemplate, SubjectModel


def _save(study, data: dict, *, subject: SubjectModel | None = None, user=None) -> SubjectModel:
    """Save, then (``check``, with a base_url given) start a probe job that contacts the server: the
    request never does (services.do_check_after_save); GET jobs/?kind=probe follows it."""
    data = dict(data)
    name, version = data.pop("template", None), data.pop("template_version", None)
    check = data.pop("check", True)
    # Refusals (and the model's own validation) are rendered with their fields and status by annotation.api.errors.
    if name:
        data["prompt_template"] = services.find_template(study, name, version)
    subject, _ = services.do_save_subject(study, data, subject=subject)
    if check and "base_url" in data:
        services.do_check_after_save(subject, user=user)
    return subject


class StudySubjectModels(generics.ListCreateAPIView):
    """GET: the study's subject models (members). POST: a new one (owners)."""

    refusal_statuses = (502,)  # the model server named does not answer (annotation.api.schema)
    serializer_class = s.SubjectModelSerializer

    def get_queryset(self):
        study, _ = access.check_study(self.request.user, self.kwargs["pk"])
        return SubjectModel.objects.filter(study=study).select_related("prompt_template").order_by("name")

    def create(self, request, *args, **kwargs):
        study, membership = access.check_study(request.user, self.kwargs["pk"])
        services.check_owner(membership)
        ser = self.get_serializer(data=request.data)
        ser.is_valid(raise_exception=True)
        subject = _save(study, ser.validated_data, user=request.user)
        return Response(self.get_serializer(subject).data, status=status.HTTP_201_CREATED)


class SubjectModelDetail(APIView):
    refusal_statuses = (502,)  # the model server named does not answer (annotation.api.schema)

    @extend_schema(responses=s.SubjectModelSerializer)
    def get(self, request, pk: int):
        subject, _ = services.check_subject(request.user, pk)
        return Response(s.SubjectModelSerializer(subject, context={"request": request}).data)

    @extend_schema(request=s.SubjectModelSerializer, responses=s.SubjectModelSerializer)
    def patch(self, request, pk: int):
        subject, membership = services.check_subject(request.user, pk)
        services.check_owner(membership)
        ser = s.SubjectModelSerializer(subject, data=request.data, partial=True, context={"request": request})
        ser.is_valid(raise_exception=True)
        subject = _save(subject.study, ser.validated_data, subject=subject, user=request.user)
        return Response(s.SubjectModelSerializer(subject, context={"request": request}).data)


class SubjectModelProbe(APIView):
    """POST: probe the subject model's server in the background (owners) -> 202
    with the probe's job (GET jobs/{id}/ follows it; its result names the mode
    recorded, its error why nothing was); 409 while a probe is running."""

    @extend_schema(request=None, responses={202: JobSerializer})
    def post(self, request, pk: int):
        subject, membership = services.check_subject(request.user, pk)
        services.check_owner(membership)
        job = services.do_start_probe(subject, user=request.user)
        return Response(JobSerializer(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)


class StudyGenerationRuns(generics.ListAPIView):
    """GET: the study's generation runs, newest first. POST: start one (owners) -> 202 with the run, as
    ``POST studies/{id}/runs/`` with ``kind=generation`` (runs.api)."""

    serializer_class = s.GenerationRunSerializer

    def get_queryset(self):
        study, _ = access.check_study(self.request.user, self.kwargs["pk"])
        return (GenerationRun.objects.filter(subject__study=study).select_related("subject", "job", "run")
                .order_by("-created_at", "-pk"))

    @extend_schema(request=s.GenerationRunRequestSerializer, responses={202: RunDetailSerializer})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        return runs_api.start(request, study, membership, "generation", request.data)


class GenerationRunDetail(generics.RetrieveAPIView):
    serializer_class = s.GenerationRunSerializer

    def get_object(self):
        record, _ = services.check_generation_run(self.request.user, self.kwargs["pk"])
        return record


def _template_invalid(exc: services.TemplateInvalid) -> ValidationError:
    return ValidationError({exc.field: [str(exc)]})


class StudyPromptTemplates(generics.ListAPIView):
    """GET: every version of the study's prompt templates (members). POST
    ``{"name", "template", "exemplars"}`` (owners): the next version of NAME
    -> 201 (200 with the newest version when nothing changed); 400 names the field."""

    serializer_class = s.PromptTemplateSerializer

    def get_queryset(self):
        study, _ = access.check_study(self.request.user, self.kwargs["pk"])
        services.ensure_builtin_templates(study)
        return PromptTemplate.objects.filter(study=study).order_by("name", "-version")

    @extend_schema(request=s.PromptTemplateSerializer, responses={201: s.PromptTemplateSerializer})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        services.check_owner(membership)
        ser = s.PromptTemplateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        before = PromptTemplate.objects.filter(study=study, name=data["name"]).count()
        saved = services.do_save_template(study, data["name"], data["template"], exemplars=data.get("exemplars"))
        created = PromptTemplate.objects.filter(study=study, name=data["name"]).count() > before
        return Response(s.PromptTemplateSerializer(saved, context={"request": request}).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class PromptTemplateDetail(generics.RetrieveAPIView):
    """GET: one version of a prompt template (members)."""

    serializer_class = s.PromptTemplateSerializer

    def get_object(self):
        template, _ = services.check_template(self.request.user, self.kwargs["pk"])
        return template


class PromptTemplatePreview(APIView):
    """POST ``{"template", "exemplars", "problem_id"}`` (owners): the template
    rendered on one problem of the study (default: its first), as a generation
    run renders it -> ``{"problem_id", "text"}``; nothing is saved and no model
    is called. 400 names the field (template, exemplars, problem_id)."""

    @extend_schema(request=s.PromptTemplatePreviewSerializer, responses=s.PromptTemplatePreviewResultSerializer)
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        services.check_owner(membership)
        ser = s.PromptTemplatePreviewSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        preview = services.preview_template(study, data["template"], data["exemplars"],
                                            problem_id=data["problem_id"] or None)
        return Response({"problem_id": preview.problem_id, "text": preview.text})
