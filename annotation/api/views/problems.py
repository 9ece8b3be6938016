"""REST: a study's problems, one problem, its skeletons."""

from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access, services, skeletons
from annotation.api import serializers as s
from annotation.api.views.base import bool_param
from annotation.models import Membership, Problem, Skeleton, SkeletonStep
from annotation.review.filters import parse_flag


@extend_schema_view(get=extend_schema(parameters=[
    OpenApiParameter("domain", str), OpenApiParameter("tag", str, description="one whole tag"),
    bool_param("has_skeleton", "has an approved skeleton"),
    bool_param("suites", "true: include the fidelity suites' variants (left out by default, as on the problem list)"),
]))
class StudyProblems(generics.ListAPIView):
    """Problems of a study. Filters: ``domain``, ``tag``, ``has_skeleton`` (true/false); fidelity variants
    belong to their suite and are listed only with ``suites=true``, as the web list shows them only with
    ``?suites=1``."""

    serializer_class = s.ProblemDetailSerializer

    def get_queryset(self):
        study, _ = access.check_study(self.request.user, self.kwargs["pk"])
        params = self.request.query_params
        qs = (Problem.objects.filter(study=study).in_scope(parse_flag(params.get("suites")) is True)
              .select_related("approved_skeleton").order_by("problem_id"))
        if params.get("domain"):
            qs = qs.filter(domain=params["domain"])
        if params.get("tag"):
            qs = qs.with_tag(params["tag"])
        flag = parse_flag(params.get("has_skeleton"))
        if flag is not None:
            qs = qs.filter(approved_skeleton__isnull=not flag)
        return qs


def _problem(request, pk: int) -> tuple[Problem, Membership]:
    return access.check_object(request.user, Problem.objects.select_related("study", "approved_skeleton"), pk,
                               study_path="study_id", what="problem")


class ProblemDetail(APIView):
    @extend_schema(responses=s.ProblemDetailSerializer)
    def get(self, request, pk: int):
        problem, _ = _problem(request, pk)
        return Response(s.ProblemDetailSerializer(problem, context={"request": request}).data)

    @extend_schema(request=s.ProblemUpdateSerializer, responses=s.ProblemDetailSerializer)
    def patch(self, request, pk: int):
        problem, membership = _problem(request, pk)
        access.check_owner(membership, "editing a problem")
        ser = s.ProblemUpdateSerializer(problem, data=request.data, partial=True)
        ser.is_valid(raise_exception=True)
        services.do_update_problem(problem, ser.validated_data, user=request.user)
        return Response(s.ProblemDetailSerializer(problem, context={"request": request}).data)


class ProblemSkeletons(APIView):
    @extend_schema(responses=s.SkeletonSerializer(many=True))
    def get(self, request, pk: int):
        problem, _ = _problem(request, pk)
        qs = (problem.skeletons.select_related("created_by", "approved_by", "problem")
              .prefetch_related(Prefetch("steps", queryset=SkeletonStep.objects.order_by("position")))
              .order_by("-version"))
        return Response(s.SkeletonSerializer(qs, many=True, context={"request": request}).data)

    @extend_schema(request=s.SkeletonCreateSerializer, responses={201: s.SkeletonSerializer})
    def post(self, request, pk: int):
        problem, membership = _problem(request, pk)
        ser = s.SkeletonCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        approve = ser.validated_data["status"] == "approved"
        if approve:
            access.check_adjudicator(membership, "approving a skeleton")
        sk = skeletons.do_save_skeleton(problem, request.user, ser.validated_data["steps"],
                                        note=ser.validated_data["note"], approve=approve)
        sk = Skeleton.objects.select_related("problem", "created_by", "approved_by").get(pk=sk.pk)
        return Response(s.SkeletonSerializer(sk, context={"request": request}).data, status=status.HTTP_201_CREATED)


class SkeletonDetail(APIView):
    def _get(self, request, pk: int) -> tuple[Skeleton, Membership]:
        return access.check_object(request.user, Skeleton.objects.select_related("problem", "created_by", "approved_by"),
                                   pk, study_path="problem__study_id", what="skeleton")

    @extend_schema(responses=s.SkeletonSerializer)
    def get(self, request, pk: int):
        sk, _ = self._get(request, pk)
        return Response(s.SkeletonSerializer(sk, context={"request": request}).data)

    @extend_schema(request=s.SkeletonUpdateSerializer, responses=s.SkeletonSerializer)
    def patch(self, request, pk: int):
        sk, membership = self._get(request, pk)
        access.check_adjudicator(membership, "approving a skeleton")
        s.SkeletonUpdateSerializer(data=request.data).is_valid(raise_exception=True)
        skeletons.do_approve_skeleton(sk, request.user)
        sk = Skeleton.objects.select_related("problem", "created_by", "approved_by").get(pk=sk.pk)
        return Response(s.SkeletonSerializer(sk, context={"request": request}).data)
