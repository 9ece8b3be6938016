"""REST: disagreements and the final verdict of a step."""

from __future__ import annotations

from django.db.models import Prefetch
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access
from annotation.api import serializers as s
from annotation.api.views.base import label_row
from annotation.models import Membership, Step, StepLabel
from annotation.paging import counted
from annotation.review.adjudication import disagreement_count, disagreement_steps, do_adjudicate
from annotation.review.base import VIA_API


def _disagreement_row(request, step: Step) -> dict:
    labels = list(step.labels.all())
    final = next((lab for lab in labels if lab.kind == StepLabel.Kind.ADJUDICATION), None)
    return {
        "step_id": step.pk, "trace": step.trace_id, "step": step.index, "text": step.text,
        "labels": [label_row(lab, step.index) for lab in labels if lab.kind != StepLabel.Kind.ADJUDICATION],
        "final": label_row(final, step.index) if final else None,
        "version": final.version if final else 0,
        "html_url": request.build_absolute_uri(reverse("trace", args=[step.trace_id]) + f"#s{step.index}"),
    }


class StudyDisagreements(generics.GenericAPIView):
    """Steps whose labels disagree (``?status=open|resolved|all``); adjudicators and owners."""

    serializer_class = s.DisagreementSerializer

    @extend_schema(responses=s.DisagreementSerializer(many=True))  # a page of rows
    def get(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_adjudicator(membership, "adjudication")
        status_ = request.query_params.get("status", "open")
        status_ = status_ if status_ in ("open", "resolved", "all") else "open"
        qs = disagreement_steps(study, status_)
        qs = qs.prefetch_related(Prefetch("labels", queryset=StepLabel.objects.select_related("annotator", "judge")
                                          .order_by("kind", "pk")))
        # The count from the stored aggregate (annotation.paging): never a COUNT over every disagreement step.
        self.paginator.django_paginator_class = counted(lambda: disagreement_count(study, status_))
        page = self.paginate_queryset(qs)
        return self.get_paginated_response([_disagreement_row(request, st) for st in page])


class StepAdjudication(APIView):
    """The final label of one step: GET it, PUT a decision (adjudicators and owners)."""

    def _step(self, request, pk: int) -> tuple[Step, Membership]:
        step, membership = access.check_object(request.user, Step.objects.select_related("trace__problem", "trace__study"),
                                               pk, study_path="trace__study_id", what="step")
        access.check_adjudicator(membership, "adjudication")
        return step, membership

    def _row(self, request, step: Step) -> dict:
        step = Step.objects.prefetch_related(
            Prefetch("labels", queryset=StepLabel.objects.select_related("annotator", "judge").order_by("kind", "pk"))
        ).get(pk=step.pk)
        return _disagreement_row(request, step)

    @extend_schema(responses=s.DisagreementSerializer)
    def get(self, request, pk: int):
        step, _ = self._step(request, pk)
        return Response(self._row(request, step))

    @extend_schema(request=s.AdjudicationSerializer, responses={200: s.DisagreementSerializer, 409: None})
    def put(self, request, pk: int):
        step, _ = self._step(request, pk)
        ser = s.AdjudicationSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        do_adjudicate(step, request.user, version=d["version"], verdict=d["verdict"],
                      skeleton_refs=d["skeleton_refs"], reason=d["reason"], via=VIA_API)
        return Response(self._row(request, step))
