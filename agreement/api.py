"""REST API of agreement, calibration studies and export jobs
(docs/agreement.md, docs/exports.md): thin views over
agreement.services, agreement.calibration, agreement.exports (kinds) and scoring.export_jobs."""

from __future__ import annotations

from urllib.parse import urlencode

from django.db.models import Count
from django.http import FileResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from agreement import calibration
from agreement import services as svc
from agreement.models import CalibrationStudy
from annotation import access
from annotation.api.schema import one_page
from annotation.api.serializers import JobSerializer, annotators_per_trace_field
from annotation.models import Membership, Trace
from scoring import exports
from scoring.export_jobs import check_download, do_queue_export, open_download

REFERENCE = OpenApiParameter("reference", str, description="reference label source (default human): human, final, "
                                                            "adjudicated, judge:NAME or annotator:USERNAME")
CANDIDATE = OpenApiParameter("candidate", str, description="candidate label source (default the primary judge)")
PROFILE = OpenApiParameter("profile", str, description="scoring profile of the process scores (default: the "
                                                        "study's default profile)")
CALIBRATION = OpenApiParameter("calibration", str, description="only the traces of this calibration study (id)")
SEED = OpenApiParameter("seed", int, description="bootstrap seed (default 0)")


def _viewer(request, study_id: int):
    study, membership = access.check_study(request.user, study_id)
    svc.check_view(membership)
    return study, membership


def _select(request, study, params=None, calibration_obj=None) -> svc.Selection:
    return svc.select(study, request.query_params if params is None else params, calibration=calibration_obj)


def _abs(request, url: str) -> str:
    return request.build_absolute_uri(url)


class StudyAgreement(APIView):
    @extend_schema(parameters=[REFERENCE, CANDIDATE, PROFILE, CALIBRATION, SEED], responses=OpenApiTypes.OBJECT,
                   description="The agreement metrics of the candidate against the reference (docs/agreement.md: "
                               "steps_compared, percent_agreement, kappa, kappa_binary, confusion, traces_compared, "
                               "first_error_exact, first_error_within_1, pb_error_acc, pb_correct_acc, pb_f1, "
                               "pearson_r, pearson_ci, spearman_rho, spearman_ci, ...), with a 95% trace-bootstrap "
                               "interval <metric>_ci for every rate, provenance (profile version, seed, scores) "
                               "and `undefined` (metric -> reason for every null).")
    def get(self, request, pk: int):
        study, _ = _viewer(request, pk)
        sel = _select(request, study)
        report = svc.agreement_report(sel)
        page = f"{reverse('scoring-agreement', args=[study.pk])}?{urlencode(sel.params())}"
        return Response({**report["metrics"], "html_url": _abs(request, page)})


class StudyDisagreements(APIView):
    @extend_schema(parameters=[REFERENCE, CANDIDATE, PROFILE, CALIBRATION], responses=OpenApiTypes.OBJECT,
                   description="Steps where the candidate's verdict differs from the reference's (paginated): "
                               "trace_id, model, step, reference_verdict, candidate_verdict, confidence, html_url.")
    def get(self, request, pk: int):
        study, _ = _viewer(request, pk)
        sel = _select(request, study)
        rows = svc.agreement_report(sel)["disagreements"]
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        traces = {t.pk: t for t in Trace.objects.filter(pk__in=[r[0] for r in page]).only("pk", "trace_id", "model")}
        out = []
        for tpk, step, ref, cand, conf in page:
            t = traces.get(tpk)
            out.append({"trace_id": t.trace_id if t else None, "model": t.model if t else None, "step": step,
                        "reference_verdict": ref, "candidate_verdict": cand, "confidence": conf,
                        "html_url": _abs(request, reverse("trace", args=[tpk]))})
        return paginator.get_paginated_response(out)


class StudyAnnotatorAgreement(APIView):
    @extend_schema(parameters=[CALIBRATION], responses=OpenApiTypes.OBJECT,
                   description="Agreement among annotators: overall and per domain (Krippendorff's alpha, Fleiss' "
                               "kappa, pairwise Cohen's kappa), overlap sets, and each annotator against the "
                               "adjudicated label, else the other annotators' consensus.")
    def get(self, request, pk: int):
        study, _ = _viewer(request, pk)
        cal = None
        if request.query_params.get("calibration"):
            cal = svc._calibration(study, request.query_params["calibration"])
        report = svc.cached_annotator_report(study, cal)
        page = reverse("scoring-annotators", args=[study.pk]) + (f"?calibration={cal.pk}" if cal else "")
        return Response({**report, "html_url": _abs(request, page)})


# ---------------------------------------------------------------------------
# Calibration studies
# ---------------------------------------------------------------------------
class CalibrationSerializer(serializers.ModelSerializer):
    traces = serializers.SerializerMethodField()
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    profile = serializers.CharField(source="profile_name")
    html_url = serializers.SerializerMethodField()

    class Meta:
        model = CalibrationStudy
        fields = ["id", "study", "name", "reference", "candidates", "profile", "seed", "sample_size", "traces",
                  "allocation", "filters", "validation_fraction", "note", "created_by", "created_at", "html_url"]

    def get_traces(self, obj) -> int:
        n = getattr(obj, "n_traces", None)
        return n if n is not None else obj.items.count()

    def get_html_url(self, obj) -> str:
        request = self.context.get("request")
        url = obj.get_absolute_url()
        return request.build_absolute_uri(url) if request else url


class CalibrationCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    reference = serializers.CharField(max_length=200, default="human")
    candidates = serializers.ListField(child=serializers.CharField(max_length=200), min_length=1)
    size = serializers.IntegerField(min_value=1, max_value=calibration.MAX_SAMPLE)
    seed = serializers.IntegerField(min_value=0, max_value=svc.MAX_SEED, default=0)
    allocation = serializers.ChoiceField(choices=CalibrationStudy.Allocation.values, default="equal")
    models = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=list)
    domain = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    profile = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    validation_fraction = serializers.FloatField(min_value=0.01, max_value=0.99, default=0.5)
    note = serializers.CharField(required=False, allow_blank=True, default="")
    cohort = serializers.CharField(required=False, allow_blank=True, default="",
                                   help_text="draw from this saved cohort's traces only (id; docs/search.md)")
    reference_complete = serializers.BooleanField(
        required=False, default=False, help_text="draw only traces the reference has labelled completely")


def _calibration_error(exc: calibration.CalibrationError):
    return ValidationError({exc.field: [exc.message]})


class StudyCalibrations(APIView):
    @extend_schema(responses=one_page(CalibrationSerializer, "CalibrationPage"),
                   operation_id="v1_studies_calibrations_list")
    def get(self, request, pk: int):
        study, _ = _viewer(request, pk)
        qs = (CalibrationStudy.objects.filter(study=study).select_related("created_by")
              .annotate(n_traces=Count("items")).order_by("-created_at", "-pk"))
        data = CalibrationSerializer(list(qs), many=True, context={"request": request}).data
        return Response({"count": len(data), "next": None, "previous": None, "results": data})

    @extend_schema(request=CalibrationCreateSerializer, responses={201: CalibrationSerializer},
                   description="Create a calibration study (owners): draws the stratified sample.")
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership)
        ser = CalibrationCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        cal = calibration.do_create_calibration(
            study, name=d["name"], reference=d["reference"], candidates=d["candidates"], size=d["size"],
            seed=d["seed"], allocation=d["allocation"], models=d["models"], domain=d["domain"],
            profile_name=d["profile"], validation_fraction=d["validation_fraction"], note=d["note"],
            cohort=d["cohort"], reference_complete=d["reference_complete"], user=request.user)
        return Response(CalibrationSerializer(cal, context={"request": request}).data, status=status.HTTP_201_CREATED)


def _calibration_for(request, pk: int) -> tuple[CalibrationStudy, Membership]:
    cal, membership = access.check_object(request.user, CalibrationStudy.objects.select_related("study", "created_by"),
                                          pk, study_path="study_id", what="calibration study")
    svc.check_view(membership)
    return cal, membership


class CalibrationDetail(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT,
                   description="The calibration study, its sample composition, the prompt versions behind each "
                               "judge's labels, and every metric of every candidate on the sample (`report`).")
    def get(self, request, pk: int):
        cal, _ = _calibration_for(request, pk)
        report = calibration.calibration_report(cal)
        candidates = [{k: v for k, v in row.items() if k != "disagreements"} | {"disagreements": len(row["disagreements"])}
                      for row in report["candidates"]]
        return Response({
            **CalibrationSerializer(cal, context={"request": request}).data,
            "composition": calibration.composition(cal),
            "prompt_versions": calibration.prompt_versions(cal),
            "report": {**{k: v for k, v in report.items() if k != "candidates"}, "candidates": candidates},
        })


class CalibrationTuning(APIView):
    @extend_schema(parameters=[
        OpenApiParameter("candidate", str, description="a judge candidate (judge:NAME)", required=True),
        OpenApiParameter("target", str, description="process (the reference's P; default) or rating"),
        OpenApiParameter("omegas", str, description="grid, e.g. 0,2.5,5 or 0:10:0.5 (default 0..10 by 0.5)"),
        OpenApiParameter("ws", str, description="optional w grid (compares holistic scores)"),
    ], responses=OpenApiTypes.OBJECT,
        description="The paper's tuning experiment: the omega (and w) maximising Pearson r between the judge's "
                    "score and the reference on a validation split, reported on the held-out split.")
    def get(self, request, pk: int):
        cal, _ = _calibration_for(request, pk)
        q = request.query_params
        omegas = calibration.parse_grid(q.get("omegas"), field="omegas", low=0.0, high=100.0)
        ws = calibration.parse_grid(q.get("ws"), field="ws", low=0.0, high=1.0)
        result = calibration.cached_tuning(cal, q.get("candidate", ""), target=q.get("target") or "process",
                                           omegas=omegas, ws=ws)
        return Response(result)


class QueueSerializer(serializers.Serializer):
    annotators = serializers.ListField(child=serializers.CharField(max_length=150), min_length=1)
    k = annotators_per_trace_field()


class CalibrationQueue(APIView):
    @extend_schema(request=QueueSerializer, responses=OpenApiTypes.OBJECT,
                   description="Queue the sample for annotators (owners): k annotators per trace, round-robin.")
    def post(self, request, pk: int):
        cal, membership = _calibration_for(request, pk)
        access.check_owner(membership)
        ser = QueueSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        names = ser.validated_data["annotators"]
        users = {m.user.username: m.user for m in Membership.objects.filter(study=cal.study, user__username__in=names)
                 .select_related("user")}
        missing = [n for n in names if n not in users]
        if missing:
            raise ValidationError({"annotators": [f"not members of the study: {', '.join(missing)}"]})
        n = calibration.do_queue_calibration(cal, request.user, [users[n] for n in names], ser.validated_data["k"])
        return Response({"assignments_created": n})


# ---------------------------------------------------------------------------
# Export jobs
# ---------------------------------------------------------------------------
class ExportSerializer(serializers.Serializer):
    what = serializers.CharField()
    format = serializers.ChoiceField(choices=exports.FORMATS, default="jsonl")
    source = serializers.CharField(required=False, allow_blank=True)
    reference = serializers.CharField(required=False, allow_blank=True)
    candidate = serializers.CharField(required=False, allow_blank=True)
    profile = serializers.CharField(required=False, allow_blank=True)
    model = serializers.CharField(required=False, allow_blank=True)
    domain = serializers.CharField(required=False, allow_blank=True)
    calibration = serializers.CharField(required=False, allow_blank=True)
    group = serializers.ChoiceField(choices=["model", "domain"], required=False)
    seed = serializers.IntegerField(required=False, min_value=0, max_value=svc.MAX_SEED)


class StudyExports(APIView):
    @extend_schema(request=ExportSerializer, responses={202: JobSerializer},
                   description="Queue an export (choices as the `export` command) as a job of kind export; its "
                               "result, once succeeded, has download_url, manifest_url and the manifest. Label "
                               "and agreement exports are for owners and adjudicators.")
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        ser = ExportSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        job = do_queue_export(study, membership, ser.validated_data, user=request.user,
                              base_url=request.build_absolute_uri("/"))
        job.refresh_from_db()
        return Response(JobSerializer(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)


class ExportDownload(APIView):
    refusal_statuses = (409,)  # the export has not finished (annotation.api.schema)
    @extend_schema(parameters=[OpenApiParameter("manifest", bool, description="the manifest instead of the file")],
                   responses={(200, "application/octet-stream"): OpenApiTypes.BINARY},
                   description="The file of a finished export job (members; label and agreement exports: owners "
                               "and adjudicators); 409 while it runs or when it failed.")
    def get(self, request, pk: int):
        job = check_download(request.user, pk)
        fh, name, ctype = open_download(job, manifest=request.query_params.get("manifest") in (
            "1", "true", "yes"))
        return FileResponse(fh, as_attachment=True, filename=name, content_type=ctype)
