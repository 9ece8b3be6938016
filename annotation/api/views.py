"""REST API (docs/api.md): thin views over annotation.services; access is
decided by annotation.access."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError
from django.db.models import Exists, OuterRef, Prefetch
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import access, jobs, members, services, skeletons
from annotation.api import serializers as s
from annotation.models import (
    Assignment,
    Job,
    Membership,
    Problem,
    Skeleton,
    SkeletonStep,
    Step,
    StepLabel,
    Study,
    Trace,
    TraceReview,
)
from annotation.review.adjudication import disagreement_steps, do_adjudicate
from annotation.review.base import UNSET, VIA_API
from annotation.review.filters import filter_traces, parse_flag
from annotation.review.labels import LabelIn, do_save_labels
from annotation.review.progress import annotator_progress
from annotation.review.queues import do_assign
from annotation.review.visibility import is_revealed, source_name, visible_labels


def _roles(user) -> dict[int, str]:
    return dict(Membership.objects.filter(user=user).values_list("study_id", "role"))


class StudyList(generics.ListCreateAPIView):
    serializer_class = s.StudySerializer

    def get_queryset(self):
        return Study.objects.visible_to(self.request.user).select_related("primary_judge").order_by("name")

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "roles": _roles(self.request.user)}

    def perform_create(self, serializer):
        data = serializer.validated_data
        fields = {key: data[key] for key in ("description", "blind", "segmenter", "thought_segmenter")
                  if key in data}
        try:
            serializer.instance = services.do_create_study(data["name"], owner=self.request.user, **fields)
        except IntegrityError:
            # Lost a race with another request for the same name.
            raise ValidationError({"name": ["study with this name already exists."]}) from None
        # The roles were read before the study existed: the creator owns it.
        serializer.context["roles"] = {**serializer.context.get("roles", {}),
                                       serializer.instance.pk: Membership.Role.OWNER}


class StudyDetail(APIView):
    @extend_schema(responses=s.StudySerializer)
    def get(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        return Response(s.StudySerializer(study, context={"request": request, "roles": {pk: membership.role}}).data)

    @extend_schema(request=s.StudyUpdateSerializer, responses=s.StudySerializer)
    def patch(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership, "changing the study's settings")
        ser = s.StudyUpdateSerializer(study, data=request.data, partial=True)
        ser.is_valid(raise_exception=True)
        services.do_update_study(study, ser.validated_data, user=request.user)
        return Response(s.StudySerializer(study, context={"request": request, "roles": {pk: membership.role}}).data)


class StudyImports(APIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request=s.ImportRequestSerializer, responses={202: s.JobSerializer})
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership, "importing traces")
        ser = s.ImportRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        job = services.do_queue_import(
            study, ser.validated_data["file"], fmt=ser.validated_data["format"],
            skip_invalid=ser.validated_data["skip_invalid"], user=request.user,
            thought_segmenter=ser.validated_data["thought_segmenter"],
        )
        job.refresh_from_db()
        return Response(s.JobSerializer(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)


class JobDetail(APIView):
    kinds: tuple[str, ...] | None = None

    @extend_schema(responses=s.JobSerializer)
    def get(self, request, pk: int):
        job, _ = access.check_job(request.user, pk, kinds=self.kinds)
        return Response(s.JobSerializer(job, context={"request": request}).data)

    @extend_schema(responses={200: s.JobSerializer}, summary="Cancel the job",
                   description="Cancels the job (who started it, owners and adjudicators); the job is kept and "
                               "answered with its status (cancelled, or still running until its worker stops).")
    def delete(self, request, pk: int):
        job, membership = access.check_job(request.user, pk, kinds=self.kinds)
        access.check_cancel_job(request.user, job, membership)
        job = jobs.cancel(job)
        return Response(s.JobSerializer(job, context={"request": request}).data)


class ImportDetail(JobDetail):
    kinds = (Job.Kind.IMPORT,)
    http_method_names = ["get"]


def _error(status_code: int, detail: str, errors: list[tuple[str, str]] | None = None) -> Response:
    return Response({"detail": detail, "errors": [{"field": f, "message": m} for f, m in errors or []]},
                    status=status_code)



def _trace_and_membership(user, pk: int) -> tuple[Trace, Membership]:
    return access.check_trace(user, pk)


def _label_row(lab: StepLabel, index: int) -> dict:
    source = {"human": "human", "adjudication": "final"}.get(lab.kind) or f"judge:{lab.judge.name}"
    return {"step": index, "source": source, "annotator": source_name(lab) if lab.kind != "judge" else lab.judge.name,
            "verdict": lab.verdict, "skeleton_refs": list(lab.skeleton_refs or []), "confidence": lab.confidence,
            "reason": lab.reason}


def _bool_param(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, bool, description=description)


@extend_schema_view(get=extend_schema(parameters=[
    OpenApiParameter("model", str), OpenApiParameter("domain", str),
    _bool_param("answer_correct", "the answer verdict"),
    _bool_param("lucky_guess", "a lucky guess by the final labels under the default profile (needs scores)"),
    _bool_param("flagged", "flagged by any reviewer"),
    _bool_param("needs_review", "true: not labelled completely by you"),
    _bool_param("disagreement", "labels of some step disagree (refused to a blinded annotator: annotation.gate)"),
]))
class StudyTraces(generics.ListAPIView):
    """Traces of a study with filters; paginated."""

    serializer_class = s.TraceListSerializer

    def get_queryset(self):
        study, membership = access.check_study(self.request.user, self.kwargs["pk"])
        qs = Trace.objects.filter(study=study).select_related("problem").order_by("pk")
        return filter_traces(qs, self.request.query_params, study, membership)


class TraceDetail(APIView):
    @extend_schema(responses=s.TraceDetailSerializer)
    def get(self, request, pk: int):
        trace, membership = _trace_and_membership(request.user, pk)
        my_review = TraceReview.objects.filter(trace=trace, annotator=request.user).first()
        revealed = is_revealed(membership, my_review)
        steps = list(trace.steps.order_by("index"))
        index = {st.pk: st.index for st in steps}
        labels = [_label_row(lab, index[lab.step_id]) for lab in visible_labels(trace, request.user, revealed)]
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


# --------------------------------------------------------------------------
# Problems and skeletons


@extend_schema_view(get=extend_schema(parameters=[
    OpenApiParameter("domain", str), OpenApiParameter("tag", str, description="one whole tag"),
    _bool_param("has_skeleton", "has an approved skeleton"),
    _bool_param("suites", "true: include the fidelity suites' variants (left out by default, as on the problem list)"),
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


# --------------------------------------------------------------------------
# Adjudication


def _disagreement_row(request, step: Step) -> dict:
    labels = list(step.labels.all())
    final = next((lab for lab in labels if lab.kind == StepLabel.Kind.ADJUDICATION), None)
    return {
        "step_id": step.pk, "trace": step.trace_id, "step": step.index, "text": step.text,
        "labels": [_label_row(lab, step.index) for lab in labels if lab.kind != StepLabel.Kind.ADJUDICATION],
        "final": _label_row(final, step.index) if final else None,
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
        qs = disagreement_steps(study, status_ if status_ in ("open", "resolved", "all") else "open")
        qs = qs.prefetch_related(Prefetch("labels", queryset=StepLabel.objects.select_related("annotator", "judge")
                                          .order_by("kind", "pk")))
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


# --------------------------------------------------------------------------
# Queues and members


class StudyQueue(generics.GenericAPIView):
    """My queue: assigned traces in order, with my status (``?status=todo|done|skipped|all``)."""

    serializer_class = s.QueueItemSerializer

    @extend_schema(responses=s.QueueItemSerializer(many=True))  # a page of rows
    def get(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        mine = TraceReview.objects.filter(trace=OuterRef("trace"), annotator=request.user)
        qs = (Assignment.objects.filter(study=study, annotator=request.user).select_related("trace__problem")
              .annotate(done=Exists(mine.filter(complete=True)), skipped=Exists(mine.filter(skipped=True)),
                        started=Exists(mine.filter(version__gt=0)))
              .order_by("position"))
        qs = filter_traces(qs, request.query_params, study, membership, prefix="trace__")
        wanted = request.query_params.get("status", "all")
        if wanted == "todo":
            qs = qs.filter(done=False, skipped=False)
        elif wanted == "done":
            qs = qs.filter(done=True)
        elif wanted == "skipped":
            qs = qs.filter(skipped=True, done=False)
        page = self.paginate_queryset(qs)
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
            return _error(400, f"annotators: no member named {missing[0]!r}",
                          [("annotators", f"not members: {', '.join(missing)}")])
        n = do_assign(study, request.user, [users[u] for u in d["annotators"]], d["k"],
                      stratify=d["stratify"], only_unassigned=d["only_unassigned"])
        return Response({"created": n, "progress": annotator_progress(study)}, status=status.HTTP_201_CREATED)


class StudyMembers(APIView):
    @extend_schema(responses=s.MembershipSerializer(many=True))
    def get(self, request, pk: int):
        study, _ = access.check_study(request.user, pk)
        rows = Membership.objects.filter(study=study).select_related("user").order_by("user__username")
        return Response(s.MembershipSerializer(rows, many=True).data)

    @extend_schema(request=s.MemberRequestSerializer, responses={
        200: s.MembershipSerializer,
        # An invitation sent, or no such user: one answer whichever it was (annotation.members).
        202: inline_serializer("MemberInvited", {"detail": serializers.CharField(),
                                                 "invited": serializers.CharField(), "role": serializers.CharField()}),
    })
    def post(self, request, pk: int):
        study, membership = access.check_study(request.user, pk)
        access.check_owner(membership, "managing members")
        ser = s.MemberRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        name, role = ser.validated_data["username"], ser.validated_data["role"]
        try:
            m = members.do_invite(study, name, role, by=request.user)
        except members.MemberError as exc:
            return _error(400, str(exc), [("username", str(exc))])
        if m is None:  # invited, or no such user: one answer (annotation.members)
            return Response({"detail": members.invited_message(name, role), "invited": name, "role": role},
                            status=status.HTTP_202_ACCEPTED)
        return Response(s.MembershipSerializer(m).data)
