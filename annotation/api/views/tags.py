"""REST: step-function tags of a trace (docs/api.md, "Step-function tags"): GET what the requesting member may
see, PUT her own through annotation.review.tags.do_save_tags, the operation the review page saves with."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access
from annotation.models import Trace, TraceReview
from annotation.review.base import VIA_API
from annotation.review.tags import do_save_tags, my_tags, visible_tag_rows
from annotation.review.visibility import is_revealed
from reasonlib.step_functions import FUNCTION_NAMES


class StepTagsSerializer(serializers.Serializer):
    step = serializers.IntegerField(min_value=1, help_text="1-based step number")
    tags = serializers.ListField(child=serializers.ChoiceField(choices=list(FUNCTION_NAMES)), max_length=8,
                                 help_text="the step's functions (an empty list clears the step's tags)")


class TagsInSerializer(serializers.Serializer):
    """The requesting user's tags on the steps named; steps left out keep theirs."""

    version = serializers.IntegerField(min_value=0, help_text="the review's version last read (the labels' "
                                       "version: labels and tags move it on together); 409 when it is stale")
    steps = StepTagsSerializer(many=True, max_length=100_000)


class VisibleTagSerializer(serializers.Serializer):
    step = serializers.IntegerField()
    source = serializers.CharField(help_text="annotator:NAME, judge:NAME or imported:ORIGIN")
    kind = serializers.ChoiceField(choices=["human", "judge", "imported"])
    tag = serializers.ChoiceField(choices=list(FUNCTION_NAMES))


class TagsOutSerializer(serializers.Serializer):
    version = serializers.IntegerField(help_text="the review's version to send back with a PUT")
    steps = StepTagsSerializer(many=True, help_text="your tags, one entry per tagged step")
    visible = VisibleTagSerializer(many=True, help_text="every tag you may see: yours, and in a blind study the "
                                   "other sources' only once you have labelled the trace completely")
    hidden = serializers.BooleanField(help_text="true while the other sources' tags are hidden from you")


def _state(request, trace: Trace, membership) -> dict:
    review = TraceReview.objects.filter(trace=trace, annotator=request.user).first()
    revealed = is_revealed(membership, review)
    return {
        "version": review.version if review else 0,
        "steps": [{"step": i, "tags": names} for i, names in my_tags(trace, request.user).items()],
        "visible": [{"step": r["step"], "source": r["source"], "kind": r["kind"], "tag": r["tag"]}
                    for r in visible_tag_rows(trace, request.user, revealed)],
        "hidden": not revealed,
    }


class TraceTags(APIView):
    """Step-function tags of one trace (reasonlib.step_functions: the eight categories of Thought Anchors)."""

    @extend_schema(responses=TagsOutSerializer)
    def get(self, request, pk: int):
        trace, membership = access.check_trace(request.user, pk)
        return Response(_state(request, trace, membership))

    @extend_schema(request=TagsInSerializer, responses=TagsOutSerializer)
    def put(self, request, pk: int):
        trace, membership = access.check_trace(request.user, pk)
        ser = TagsInSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        tags: dict[int, list[str]] = {}
        for i, entry in enumerate(data["steps"]):
            if entry["step"] in tags:
                raise serializers.ValidationError({"steps": [f"steps[{i}]: step {entry['step']} is given twice"]})
            tags[entry["step"]] = entry["tags"]
        do_save_tags(trace, request.user, version=data["version"], tags=tags, via=VIA_API)
        return Response(_state(request, trace, membership))
