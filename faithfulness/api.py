"""REST API of the faithfulness app: thin views over faithfulness.running, summaries and evidence.

GET  /studies/{id}/faithfulness-runs/        the study's runs (members)
POST /studies/{id}/faithfulness-runs/        start one (owners) -> 202 with the run (runs.api, as studies/{id}/runs/):
     {"what": "interventions", "model", "kinds", "per_trace", "seed", "mode"} or
     {"what": "anytime", "model", "budgets", "mode"}
GET  /faithfulness-runs/{id}/                a run with its summary (IFR table or Acc(b) / AUC_any)
GET  /faithfulness-runs/{id}/interventions/  its interventions
GET  /studies/{id}/evidence/?model=&policy=  the evidence tier and report per model (JSON)
"""

from __future__ import annotations

import json

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access, gate
from faithfulness.core import anytime as any_core
from faithfulness.core import validity as val_core
from faithfulness.evidence import EVIDENCE_READS, report
from faithfulness.models import FaithfulnessRun, Intervention
from faithfulness.running import check_frun, check_owner
from faithfulness.summaries import anytime_summary, early_summary, ifr_summary, skipped_reasons, thinking_budget_summary
from runs import api as runs_api
from runs.serializers import RunDetailSerializer


class RunSerializer(serializers.ModelSerializer):
    subject_model = serializers.CharField(source="subject.name", read_only=True)
    status = serializers.CharField(source="job.status", read_only=True)
    skipped = serializers.SerializerMethodField()
    summary = serializers.SerializerMethodField()

    class Meta:
        model = FaithfulnessRun
        fields = ["id", "kind", "subject_model", "config_version", "mode", "grid", "params", "traces", "skipped",
                  "status", "job", "created_at", "summary"]

    def get_skipped(self, obj: FaithfulnessRun) -> dict:
        return skipped_reasons(obj)

    def get_summary(self, obj: FaithfulnessRun) -> dict | None:
        if not self.context.get("detail"):
            return None
        if obj.kind == FaithfulnessRun.Kind.INTERVENTIONS:
            return ifr_summary(obj)
        if obj.kind == FaithfulnessRun.Kind.EARLY:
            return early_summary(obj)
        if obj.grid.startswith(f"{any_core.THINKING}:"):
            return thinking_budget_summary(obj)
        return anytime_summary(obj)


class InterventionSerializer(serializers.ModelSerializer):
    trace_id = serializers.CharField(source="trace.trace_id", read_only=True)

    class Meta:
        model = Intervention
        fields = ["id", "trace_id", "kind", "step", "why", "old_value", "new_value", "implied", "status", "reason",
                  "original_step", "edited_step", "original_answer", "original_correct", "new_answer", "new_correct",
                  "strict", "strict_computed", "lenient", "monotone", "invariant", "continuation", "forced", "result"]


class StartSerializer(serializers.Serializer):
    """The API's one request body for both kinds: ``what`` picks the kind, whose own serializer
    (faithfulness.runkinds, shared with the runs page) validates the rest."""

    what = serializers.ChoiceField(choices=[k for k, _ in FaithfulnessRun.Kind.choices])


class StudyRuns(generics.ListAPIView):
    """GET: the study's faithfulness runs, newest first. POST: start one (owners) -> 202 with the run, as
    ``POST studies/{id}/runs/`` with ``kind`` = ``what`` (runs.api)."""

    serializer_class = RunSerializer

    def get_queryset(self):
        study, _ = access.check_study(self.request.user, self.kwargs["pk"])
        return FaithfulnessRun.objects.filter(subject__study=study).select_related("subject", "job") \
            .order_by("-created_at", "-pk")

    @extend_schema(request=StartSerializer, responses={202: RunDetailSerializer})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        check_owner(membership)
        ser = StartSerializer(data=request.data, context={"study": study})
        ser.is_valid(raise_exception=True)
        return runs_api.start(request, study, membership, ser.validated_data["what"], request.data)


class RunDetail(generics.RetrieveAPIView):
    serializer_class = RunSerializer

    def get_object(self):
        record, _ = check_frun(self.request.user, self.kwargs["pk"])
        return record

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "detail": True}


class RunInterventions(generics.ListAPIView):
    serializer_class = InterventionSerializer

    def get_queryset(self):
        record, _ = check_frun(self.request.user, self.kwargs["pk"])
        return record.interventions.select_related("trace").order_by("pk")


class StudyEvidence(APIView):
    @extend_schema(parameters=[OpenApiParameter("model", str), OpenApiParameter("policy", str, enum=val_core.POLICIES)],
                   responses={200: dict})
    def get(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        gate.check(membership, "the faithfulness evidence", EVIDENCE_READS)
        policy = request.query_params.get("policy", val_core.EXCLUDE)
        if policy not in val_core.POLICIES:
            raise ValidationError({"policy": [f"choose {', '.join(val_core.POLICIES)}"]})
        text = report(study, request.query_params.get("model") or None, "json", policy=policy)  # refusals: model
        return Response({"policy": policy, "models": json.loads(text)})
