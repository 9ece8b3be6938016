"""REST API of search (docs/search.md, docs/api.md): the trace search on ``studies/<id>/traces/``
(the same parameters as the search page, one filter set) and cohorts."""

from __future__ import annotations

from dataclasses import asdict

from django.contrib.auth import get_user_model
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access
from annotation.api.serializers import TraceListSerializer, annotators_per_trace_field
from annotation.api.views.traces import StudyTraces
from annotation.models import Trace
from judges.serializers import JudgeRunRequestSerializer
from runs import api as runs_api
from runs.serializers import RunDetailSerializer
from search import paging, scanners, services
from search.errors import SearchError
from search.filters import TraceSearchFilter
from search.models import Cohort, Scanner
from search.runkinds import ScannerStartSerializer


def _invalid(exc: SearchError | services.CohortError) -> ValidationError:
    if isinstance(exc, SearchError):
        return ValidationError(exc.errors)
    return ValidationError({exc.field: [exc.message]})


class SearchTraceSerializer(TraceListSerializer):
    matches = serializers.SerializerMethodField()

    class Meta(TraceListSerializer.Meta):
        fields = TraceListSerializer.Meta.fields + ["matches"]

    def get_matches(self, trace) -> list[dict]:
        return [asdict(h) for h in self.context.get("hits", {}).get(trace.pk, [])]


class SearchPagination(PageNumberPagination):
    """The project's page size, paged by SearchPaginator (Search.paginator() per request). The count is bounded
    (paging.COUNT_CAP): ``count_is_lower_bound`` says when more than ``count`` traces match."""

    django_paginator_class = paging.SearchPaginator

    def get_paginated_response(self, data) -> Response:
        response = super().get_paginated_response(data)
        # A count told to the paginator (Search.count: every trace of the study) is exact.
        response.data["count_is_lower_bound"] = getattr(self.page.paginator, "count_is_lower_bound", False)
        return response

    def get_paginated_response_schema(self, schema: dict) -> dict:
        page = super().get_paginated_response_schema(schema)
        page["properties"]["count"]["description"] = (
            f"the number of matching traces, counted up to {paging.COUNT_CAP:,}; with count_is_lower_bound, "
            "more than this many match")
        page["properties"]["count_is_lower_bound"] = {
            "type": "boolean",
            "description": f"true when the count stopped at its bound ({paging.COUNT_CAP:,}, or the end of a page "
                           "past it): more than `count` traces match, and `next` leads on"}
        page["properties"]["notes"] = {"type": "array", "items": {"type": "string"},
                                       "description": "what the search could not do in full (a regex's budget)"}
        page["required"] = [*page["required"], "count_is_lower_bound"]
        return page


@extend_schema(filters=True)
class SearchTraces(StudyTraces):
    """Traces of a study: text query ``q`` (docs/search.md), regex ``re`` and every structured filter;
    each trace lists its matches (steps with context and a link to the review page at that step)."""

    serializer_class = SearchTraceSerializer
    filterset_class = TraceSearchFilter
    pagination_class = SearchPagination

    def _search(self) -> services.Search:
        study, membership = access.check_study(self.request.user, self.kwargs["pk"])
        return services.search(study, membership, self.request.query_params)

    def list(self, request, *args, **kwargs):
        s = self._search()
        self.paginator.django_paginator_class = s.paginator()
        page = self.paginate_queryset(s.traces)
        context = {**self.get_serializer_context(), "hits": services.hits(s, page)}
        response = self.get_paginated_response(SearchTraceSerializer(page, many=True, context=context).data)
        if s.notes:
            response.data["notes"] = s.notes
        return response


class CohortSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None, read_only=True)

    class Meta:
        model = Cohort
        fields = ["id", "name", "query", "n_traces", "note", "created_by", "created_at"]
        read_only_fields = ["id", "n_traces", "created_by", "created_at"]


class CohortIn(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    query = serializers.DictField(required=False, default=dict, help_text="search parameters, as on traces/")
    note = serializers.CharField(required=False, allow_blank=True, default="")


class StudyCohorts(APIView):
    @extend_schema(responses=CohortSerializer(many=True))
    def get(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        rows = []
        for cohort in Cohort.objects.filter(study=study).select_related("created_by"):
            row = CohortSerializer(cohort).data
            if not services.readable_cohort(cohort, membership):
                row["n_traces"] = None  # its query read other sources (annotation.gate): the size would tell
            rows.append(row)
        return Response(rows)

    @extend_schema(request=CohortIn, responses={201: CohortSerializer})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        data = CohortIn(data=request.data)
        data.is_valid(raise_exception=True)
        cohort = services.do_save_cohort(study, membership, name=data.validated_data["name"],
                                         data=data.validated_data["query"], note=data.validated_data["note"])
        return Response(CohortSerializer(cohort).data, status=status.HTTP_201_CREATED)


class CohortDetail(APIView):
    @extend_schema(responses=CohortSerializer)
    def get(self, request, pk: int):
        cohort, _m = services.check_cohort(request.user, pk)
        data = CohortSerializer(cohort).data
        data["trace_ids"] = list(services.cohort_traces(cohort).values_list("trace_id", flat=True))
        return Response(data)

    @extend_schema(responses={204: None})
    def delete(self, request, pk: int):
        cohort, membership = services.check_cohort(request.user, pk)
        services.do_delete_cohort(cohort, membership)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CompareIn(serializers.Serializer):
    b = serializers.IntegerField(help_text="the other cohort's id")


class CohortCompare(APIView):
    @extend_schema(parameters=[CompareIn], responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        a, membership = services.check_cohort(request.user, pk)
        data = CompareIn(data=request.query_params)
        data.is_valid(raise_exception=True)
        b, _m = services.check_cohort(request.user, data.validated_data["b"])
        return Response(services.compare_cohorts(a, b, membership))


class CohortOwnerAction(APIView):
    """A POST that uses a cohort as a scope (owners of its study): the cohort and the owner's role are
    checked, the body validated by ``serializer_class``, then ``act`` does the work; a CohortError names
    its field (400). The one shape of every such endpoint, so none can skip a step."""

    serializer_class: type[serializers.Serializer]

    def post(self, request, pk: int):
        cohort, membership = services.check_cohort(request.user, pk)
        access.check_owner(membership)
        data = self.serializer_class(data=request.data)
        data.is_valid(raise_exception=True)
        return self.act(request, cohort, data.validated_data)

    def act(self, request, cohort: Cohort, data: dict) -> Response:
        raise NotImplementedError


class AssignIn(serializers.Serializer):
    annotators = serializers.ListField(child=serializers.CharField(), min_length=1)
    k = annotators_per_trace_field()


@extend_schema(request=AssignIn, responses={201: OpenApiTypes.OBJECT})
class CohortAssign(CohortOwnerAction):
    """Queue the cohort's traces for annotators (owners)."""

    serializer_class = AssignIn

    def act(self, request, cohort: Cohort, data: dict) -> Response:
        users = list(get_user_model().objects.filter(username__in=data["annotators"]))
        missing = set(data["annotators"]) - {u.username for u in users}
        if missing:
            raise ValidationError({"annotators": [f"no user named {sorted(missing)[0]!r}"]})
        n = services.do_assign_cohort(cohort, request.user, users, data["k"])
        return Response({"assigned": n}, status=status.HTTP_201_CREATED)


def _with(data, **values) -> dict:
    """A request's body with the parameters its URL names (a JSON object or a form)."""
    body = data.dict() if hasattr(data, "dict") else dict(data)
    return {**body, **values}


class CohortJudgeRuns(APIView):
    """Start a judge run over the cohort's traces (owners): ``POST studies/{id}/runs/`` with ``kind=judge`` and
    ``cohort`` = this cohort (runs.api), the same parameters and the same 202."""

    @extend_schema(request=JudgeRunRequestSerializer, responses={202: RunDetailSerializer})
    def post(self, request, pk: int):
        cohort, membership = services.check_cohort(request.user, pk)
        return runs_api.start(request, cohort.study, membership, "judge", _with(request.data, cohort=str(cohort.pk)))


# --------------------------------------------------------------------------
# Scanners


def _scanner_invalid(exc) -> ValidationError:
    return ValidationError({exc.field: [exc.message]})


class ScannerSerializer(serializers.ModelSerializer):
    judge = serializers.CharField(source="judge.name", read_only=True)
    counts = serializers.SerializerMethodField()

    class Meta:
        model = Scanner
        fields = ["id", "name", "question", "judge", "created_at", "counts"]

    def get_counts(self, scanner) -> dict | None:
        # null for a member the visibility gate does not let read a scanner's answers (annotation.gate)
        return scanners.visible_counts(scanner, self.context.get("membership"))


class ScannerIn(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    question = serializers.CharField(max_length=2000)
    judge = serializers.CharField(help_text="an LLM judge configuration of the study, by name")


class StudyScanners(APIView):
    @extend_schema(responses=ScannerSerializer(many=True))
    def get(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        return Response(ScannerSerializer(Scanner.objects.filter(study=study).select_related("judge"), many=True,
                                          context={"membership": membership}).data)

    @extend_schema(request=ScannerIn, responses={201: ScannerSerializer})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership)
        data = ScannerIn(data=request.data)
        data.is_valid(raise_exception=True)
        scanner = scanners.do_create_scanner(study, name=data.validated_data["name"],
                                             question=data.validated_data["question"],
                                             judge_name=data.validated_data["judge"], user=request.user)
        return Response(ScannerSerializer(scanner).data, status=status.HTTP_201_CREATED)


class ScannerDetail(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        scanner, membership = scanners.check_scanner(request.user, pk)
        report = scanners.visible_validation(scanner, membership)
        data = ScannerSerializer(scanner, context={"membership": membership}).data
        # null for who may not read both the scanner's and people's answers (annotation.gate)
        data["validation"] = ({k: (asdict(v) if k in ("dev", "test") else v) for k, v in report.items()}
                              if report is not None else None)
        return Response(data)


def _cohort_of(scanner, pk: int | None):
    if pk is None:
        return None
    cohort = Cohort.objects.filter(study_id=scanner.study_id, pk=pk).first()
    if cohort is None:
        raise ValidationError({"cohort": [f"no cohort {pk} in this study"]})
    return cohort


class ScannerRuns(APIView):
    """Run the scanner over a cohort (or the whole study) through the run engine (owners):
    ``POST studies/{id}/runs/`` with ``kind=scanner`` and ``scanner`` = this one (runs.api), the same
    parameters (``cohort`` an id, as every kind takes it) and the same 202."""

    @extend_schema(request=ScannerStartSerializer, responses={202: RunDetailSerializer})
    def post(self, request, pk: int):
        scanner, membership = scanners.check_scanner(request.user, pk)
        return runs_api.start(request, scanner.study, membership, "scanner", _with(request.data, scanner=scanner.name))


class SampleIn(serializers.Serializer):
    size = serializers.IntegerField(min_value=1, max_value=scanners.MAX_SAMPLE)
    seed = serializers.IntegerField(default=0, min_value=0)
    cohort = serializers.IntegerField(required=False, allow_null=True, default=None)


class ScannerSample(APIView):
    """Draw answered traces into the validation sample (owners and adjudicators)."""

    @extend_schema(request=SampleIn, responses={201: OpenApiTypes.OBJECT})
    def post(self, request, pk: int):
        scanner, membership = scanners.check_scanner(request.user, pk)
        access.check_adjudicator(membership)
        data = SampleIn(data=request.data)
        data.is_valid(raise_exception=True)
        n = scanners.do_draw_sample(scanner, data.validated_data["size"], seed=data.validated_data["seed"],
                                    cohort=_cohort_of(scanner, data.validated_data["cohort"]))
        return Response({"added": n}, status=status.HTTP_201_CREATED)


class LabelIn(serializers.Serializer):
    trace = serializers.IntegerField(help_text="the trace's id")
    answer = serializers.BooleanField(allow_null=True, help_text="yes (true), no (false), or null to withdraw")


class ScannerLabels(APIView):
    """A member's answer to the scanner's question on one trace (the validation sample)."""

    @extend_schema(request=LabelIn, responses=OpenApiTypes.OBJECT)
    def post(self, request, pk: int):
        scanner, _m = scanners.check_scanner(request.user, pk)
        data = LabelIn(data=request.data)
        data.is_valid(raise_exception=True)
        trace = Trace.objects.filter(study_id=scanner.study_id, pk=data.validated_data["trace"]).first()
        if trace is None:
            raise ValidationError({"trace": [f"no trace {data.validated_data['trace']} in this study"]})
        label = scanners.do_answer(scanner, trace, request.user, data.validated_data["answer"])
        # The member's own answer (each person answers for themselves).
        return Response({"trace": trace.pk, "answer": data.validated_data["answer"], "split": label.split})
