"""REST: my queue and the owner's assignment of traces."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access
from annotation.api import serializers as s
from annotation.review.filters import filter_traces
from annotation.review.progress import annotator_progress
from annotation.review.queues import do_assign, my_assignments, with_status
from reasonlib.refusals import Invalid


class StudyQueue(generics.GenericAPIView):
    """My queue: assigned traces in order, with my status (``?status=todo|done|skipped|all``)."""

    serializer_class = s.QueueItemSerializer

    @extend_schema(responses=s.QueueItemSerializer(many=True))  # a page of rows
    def get(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        qs = filter_traces(my_assignments(study, request.user), request.query_params, study, membership,
                           prefix="trace__")
        page = self.paginate_queryset(with_status(qs, request.query_params.get("status", "all")))
        rows = [{"position": a.position, "trace": s.TraceListSerializer(a.trace, context={"request": request}).data,
                 "status": "done" if a.done else "skipped" if a.skipped else "started" if a.started else "todo"}
                for a in page]
        return self.get_paginated_response(rows)


class StudyAssignments(APIView):
    @extend_schema(request=s.AssignmentRequestSerializer, responses={201: None})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership, "assigning traces")
        ser = s.AssignmentRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        # Members only: whether some other account exists is nobody's business here (issue 29, L5).
        users = {u.username: u for u in get_user_model().objects.filter(username__in=d["annotators"],
                                                                          memberships__study=study)}
        missing = [u for u in d["annotators"] if u not in users]
        if missing:
            raise Invalid(errors=[("annotators", f"not members: {', '.join(missing)}")],
                          said=f"annotators: no member named {missing[0]!r}")
        n = do_assign(study, request.user, [users[u] for u in d["annotators"]], d["k"],
                      stratify=d["stratify"], only_unassigned=d["only_unassigned"])
        return Response({"created": n, "progress": annotator_progress(study)}, status=status.HTTP_201_CREATED)
