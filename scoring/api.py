"""REST API of the scoring app (docs/api.md): thin views over
scoring.analytics and scoring.services."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access
from annotation.api.schema import one_page
from annotation.api.serializers import JobSerializer
from annotation.models import Trace, TraceReview
from reasonlib.refusals import Invalid
from scoring import analytics, services, sources
from scoring.models import ScoringProfile, TraceScore

SOURCE = OpenApiParameter("source", str, description="final (default), human or judge:NAME")
PROFILE = OpenApiParameter("profile", str, description="profile name (default: the study's default profile)")
MODEL = OpenApiParameter("model", str, description="only this model")
DOMAIN = OpenApiParameter("domain", str, description="only problems of this domain")


def _absolute(request, url: str) -> str:
    return request.build_absolute_uri(url)


def _selection(request, study, membership, params=None) -> analytics.Selection:
    return analytics.select(study, request.query_params if params is None else params, membership)


def _score_row(score: TraceScore, source: str, profile: str, request) -> dict:
    trace = score.trace
    row = {
        "trace_id": trace.trace_id, "problem_id": trace.problem.problem_id, "model": trace.model,
        "source": source, "profile": profile,
    }
    for field in analytics.SCORE_EXPORT_FIELDS[5:]:
        row[field] = getattr(score, field)
    row["html_url"] = _absolute(request, trace.get_absolute_url())
    return row


def _page_url(request, name: str, study_id: int, sel: analytics.Selection) -> str:
    from urllib.parse import urlencode

    return _absolute(request, f"{reverse(name, args=[study_id])}?{urlencode(sel.params())}")


class TraceScores(APIView):
    @extend_schema(parameters=[SOURCE, PROFILE], responses=OpenApiTypes.OBJECT,
                   description="The trace's stored scores: every source (or ?source=) under the study's default "
                               "profile (or ?profile=). Fields as the score export, plus html_url.")
    def get(self, request, pk: int):
        trace, membership = access.check_object(request.user, Trace.objects.select_related("study", "problem"), pk,
                                                study_path="study_id", what="trace")
        study = membership.study
        profiles = services.ensure_profiles(study)
        profile = services.resolve_profile(study, request.query_params.get("profile"), profiles)
        qs = TraceScore.objects.filter(trace=trace, score_set__profile=profile).select_related("score_set")
        if request.query_params.get("source"):
            source = sources.check_source(study, request.query_params["source"])
            qs = qs.filter(score_set__source=source)
        finished = TraceReview.objects.filter(trace=trace, annotator=request.user, complete=True).exists()
        if not access.is_revealed(membership, finished):
            raise access.AccessDenied(
                "this study is blind: its scores show other labels; finish labelling the trace first"
            )
        rows = []
        for score in qs.order_by("score_set__source"):
            score.trace = trace  # one trace for all rows: no query per row
            rows.append(_score_row(score, score.score_set.source, profile.name, request))
        return Response({"count": len(rows), "next": None, "previous": None, "results": rows})


class StudyLeaderboard(APIView):
    @extend_schema(parameters=[SOURCE, PROFILE, MODEL, DOMAIN], responses=OpenApiTypes.OBJECT,
                   description="One row per model: model, traces, answer_accuracy, s_hcrs_mean, s_hcrs_ci, "
                               "process_mean, process_ci, s_prm_mean, holistic_mean, holistic_ci, "
                               "lucky_guess_rate, svr, vsr.")
    def get(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        params = {k: request.query_params.get(k, "") for k in ("source", "profile", "model", "domain")}
        sel = _selection(request, study, membership, params)  # rows per model, always
        rows = analytics.api_leaderboard_rows(analytics.leaderboard(sel))
        score_set = sel.score_set
        return Response({
            "source": sel.source, "profile": sel.profile.name, "profile_version": sel.profile.version,
            "computed_at": score_set.computed_at if score_set else None,
            "html_url": _page_url(request, "scoring-leaderboard", study.pk, sel),
            "count": len(rows), "results": rows,
        })


class StudyHazard(APIView):
    @extend_schema(parameters=[SOURCE, MODEL, PROFILE, DOMAIN], responses=OpenApiTypes.OBJECT,
                   description="Hazard of the first error: rows step, at_risk, events, hazard, cum_hazard, survival.")
    def get(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        sel = _selection(request, study, membership)
        rows = analytics.hazard_rows(sel)
        return Response({
            "source": sel.source, "profile": sel.profile.name, "model": sel.model or None,
            "html_url": _page_url(request, "scoring-hazard", study.pk, sel),
            "count": len(rows), "results": [{k: r[k] for k in analytics.HAZARD_FIELDS} for r in rows],
        })


class StudyLuckyGuesses(APIView):
    @extend_schema(parameters=[SOURCE, PROFILE, MODEL, DOMAIN], responses=OpenApiTypes.OBJECT,
                   description="Traces with a correct answer and process score <= tau (paginated); "
                               "fields as the score export, plus html_url.")
    def get(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        sel = _selection(request, study, membership)
        score_set = sel.score_set
        qs = TraceScore.objects.none()
        if score_set is not None:
            qs = (TraceScore.objects.filter(score_set=score_set, lucky_guess=True)
                  .select_related("trace__problem").order_by("process", "trace_id"))
            if sel.model:
                qs = qs.filter(trace__model=sel.model)
            if sel.domain:
                qs = qs.filter(trace__problem__domain=sel.domain)
            if sel.restricted_user is not None:
                qs = qs.filter(trace__reviews__annotator=sel.restricted_user, trace__reviews__complete=True)
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        rows = [_score_row(s, sel.source, sel.profile.name, request) for s in page]
        return paginator.get_paginated_response(rows)


class ProfileSerializer(serializers.ModelSerializer):
    html_url = serializers.SerializerMethodField()

    class Meta:
        model = ScoringProfile
        fields = ["id", "name", "version", "params", "is_current", "created_at", "html_url"]

    def get_html_url(self, obj) -> str:
        request = self.context.get("request")
        url = obj.get_absolute_url()
        return request.build_absolute_uri(url) if request else url


class ProfileWriteSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False)
    params = serializers.DictField(required=False)


def _check_params(params) -> None:
    """The parameters as the profile core checks them; its refusal (reasonlib.refusals.Invalid) names the
    parameter, which the API's body names as a key of ``params``."""
    try:
        services.validate_params(params)
    except Invalid as exc:
        raise Invalid(errors=[(f"params.{field}", message) for field, message in exc.errors]) from None


class StudyProfiles(APIView):
    @extend_schema(responses=one_page(ProfileSerializer, "ProfilePage"), operation_id="v1_studies_profiles_list")
    def get(self, request, pk: int):
        study, _ = access.check_study(request.user, pk)
        current = services.ensure_profiles(study)
        data = ProfileSerializer(list(current.values()), many=True, context={"request": request}).data
        return Response({"count": len(data), "next": None, "previous": None, "results": data})

    @extend_schema(request=ProfileWriteSerializer, responses={201: ProfileSerializer})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership)
        ser = ProfileWriteSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        if not ser.validated_data.get("name"):
            raise ValidationError({"name": ["This field is required."]})
        params = ser.validated_data.get("params") or {}
        _check_params(params)
        profile = services.do_create_profile(study, ser.validated_data["name"], params, user=request.user)
        return Response(ProfileSerializer(profile, context={"request": request}).data, status=status.HTTP_201_CREATED)


class StudyProfile(APIView):
    def _current(self, study, name: str) -> ScoringProfile:
        current = services.ensure_profiles(study)
        if name not in current:
            from django.http import Http404

            raise Http404("No such profile")
        return current[name]

    @extend_schema(responses=ProfileSerializer)
    def get(self, request, pk: int, name: str):
        study, _ = access.check_study(request.user, pk)
        return Response(ProfileSerializer(self._current(study, name), context={"request": request}).data)

    @extend_schema(request=ProfileWriteSerializer, responses=ProfileSerializer,
                   description="Changes parameters: saves a new version (the old one is kept) and recomputes.")
    def patch(self, request, pk: int, name: str):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership)
        current = self._current(study, name)
        ser = ProfileWriteSerializer(data=request.data, partial=True)
        ser.is_valid(raise_exception=True)
        changes = ser.validated_data.get("params") or {}
        _check_params({**current.params, **changes})
        profile, _ = services.do_edit_profile(study, name, changes, user=request.user)
        return Response(ProfileSerializer(profile, context={"request": request}).data)


class StudyScore(APIView):
    @extend_schema(request=None, parameters=[PROFILE], responses={202: JobSerializer},
                   description="Queue a recompute of the study's scores (owners).")
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership)
        name = request.query_params.get("profile") or request.data.get("profile")
        if name:
            services.resolve_profile(study, name)
        job = services.request_recompute(study, reason="requested through the API", user=request.user,
                                         profiles=[name] if name else None)
        job.refresh_from_db()
        return Response(JobSerializer(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)
