"""REST: a study's traces (filtered), one trace, its labels."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access
from annotation.api import serializers as s
from annotation.api.views.base import bool_param, label_row
from annotation.models import Membership, StepLabel, Trace, TraceReview
from annotation.review.base import UNSET, VIA_API
from annotation.review.filters import filter_traces
from annotation.review.labels import LabelIn, do_save_labels
from annotation.review.visibility import is_revealed, visible_labels


def _trace_and_membership(user, pk: int) -> tuple[Trace, Membership]:
    return access.check_trace(user, pk)


@extend_schema_view(get=extend_schema(parameters=[
    OpenApiParameter("model", str), OpenApiParameter("domain", str),
    bool_param("answer_correct", "the answer verdict"),
    bool_param("lucky_guess", "a lucky guess by the final labels under the default profile (needs scores)"),
    bool_param("flagged", "flagged by any reviewer"),
    bool_param("needs_review", "true: not labelled completely by you"),
    bool_param("disagreement", "labels of some step disagree (refused to a blinded annotator: annotation.gate)"),
]))
class StudyTraces(generics.ListAPIView):
    """Traces of a study with filters; paginated."""

    serializer_class = s.TraceListSerializer

    def get_queryset(self):
        study, membership = access.check_study(self.request.user, self.kwargs["pk"])
        qs = Trace.objects.of_study(study).select_related("problem").order_by("pk")
        return filter_traces(qs, self.request.query_params, study, membership)


class TraceDetail(APIView):
    @extend_schema(responses=s.TraceDetailSerializer)
    def get(self, request, pk: int):
        trace, membership = _trace_and_membership(request.user, pk)
        my_review = TraceReview.objects.filter(trace=trace, annotator=request.user).first()
        revealed = is_revealed(membership, my_review)
        steps = list(trace.steps.order_by("index"))
        index = {st.pk: st.index for st in steps}
        labels = [label_row(lab, index[lab.step_id]) for lab in visible_labels(trace, request.user, revealed)]
        labels.sort(key=lambda r: (r["step"], r["source"], r["annotator"]))
        trace._prefetched_objects_cache = {"steps": steps}
        context = {"request": request, "labels": labels, "labels_hidden": not revealed}
        return Response(s.TraceDetailSerializer(trace, context=context).data)


class TraceLabels(APIView):
    """The requesting user's labels on a trace, with the version to send back."""

    def _state(self, request, trace: Trace) -> dict:
        my_review = TraceReview.objects.filter(trace=trace, annotator=request.user).first()
        rows = (
            StepLabel.objects.filter(step__trace=trace, kind=StepLabel.Kind.HUMAN, annotator=request.user)
            .order_by("step__index").values_list("step__index", "verdict", "skeleton_refs", "reason")
        )
        return {
            "version": my_review.version if my_review else 0,
            "complete": bool(my_review and my_review.complete),
            "rating": my_review.rating if my_review else None,
            "labels": [{"step": i, "verdict": v, "skeleton_refs": list(r or []), "note": n} for i, v, r, n in rows],
            "answer_correct": trace.answer_correct,
            "answer_origin": trace.answer_origin,
            "skipped": bool(my_review and my_review.skipped),
            "flag": my_review.flag if my_review else "",
            "html_url": request.build_absolute_uri(trace.get_absolute_url()),
        }

    @extend_schema(responses=s.LabelsOutSerializer)
    def get(self, request, pk: int):
        trace, _ = _trace_and_membership(request.user, pk)
        return Response(self._state(request, trace))

    @extend_schema(request=s.LabelsSerializer, responses={200: s.LabelsOutSerializer, 409: None})
    def put(self, request, pk: int):
        trace, _ = _trace_and_membership(request.user, pk)
        ser = s.LabelsSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        do_save_labels(
            trace, request.user, version=data["version"], complete=data.get("complete"),
            rating=data["rating"] if "rating" in data else UNSET,
            labels=[LabelIn(lab["step"], lab["verdict"], lab["skeleton_refs"], lab["note"])
                    for lab in data["labels"]],
            answer_correct=data["answer_correct"] if "answer_correct" in data else UNSET,
            via=VIA_API,
        )
        trace.refresh_from_db(fields=["answer_correct", "answer_origin"])
        return Response(self._state(request, trace))
