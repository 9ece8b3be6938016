"""Web pages. Each view starts with an access helper that returns the object or
raises 404, then delegates to services; htmx requests get the page's partial."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Prefetch, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from annotation import jobs, services
from annotation.forms import ImportForm
from annotation.models import Job, Membership, Problem, SkeletonStep, Step, StepLabel, Study, Trace


def _study_for(request: HttpRequest, study_id: int) -> tuple[Study, Membership]:
    return services.check_membership(request.user, study_id)


@login_required
def studies(request: HttpRequest) -> HttpResponse:
    memberships = (
        Membership.objects.filter(user=request.user)
        .select_related("study")
        .annotate(n_traces=Count("study__traces", distinct=True), n_problems=Count("study__problems", distinct=True))
        .order_by("study__name")
    )
    return render(request, "annotation/studies.html", {"memberships": memberships})


@login_required
def study(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    # Steps are counted through a join; do it separately so traces count once.
    model_rows = []
    step_counts = dict(
        Step.objects.filter(trace__study=study).values("trace__model").annotate(n=Count("id")).values_list("trace__model", "n")
    )
    for row in Trace.objects.filter(study=study).values("model").annotate(
        traces=Count("id"), correct=Count("id", filter=Q(answer_correct=True))
    ).order_by("model"):
        row["steps"] = step_counts.get(row["model"], 0)
        row["accuracy"] = row["correct"] / row["traces"] if row["traces"] else None
        model_rows.append(row)
    recent_jobs = Job.objects.filter(study=study).order_by("-created_at")[:10]
    context = {
        "study": study,
        "membership": membership,
        "model_rows": model_rows,
        "n_problems": Problem.objects.filter(study=study).count(),
        "jobs": [(job, jobs.live_progress(job)) for job in recent_jobs],
        "import_form": ImportForm() if membership.is_owner else None,
    }
    return render(request, "annotation/study.html", context)


@login_required
@require_POST
def study_import(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    if not membership.is_owner:
        raise Http404("Only owners import")
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, "annotation/import_form.html", {"study": study, "import_form": form}, status=400)
    job = services.do_queue_import(
        study, form.cleaned_data["file"], fmt=form.cleaned_data["format"],
        skip_invalid=form.cleaned_data["skip_invalid"], user=request.user,
    )
    return redirect("job", job_id=job.pk)


@login_required
def job(request: HttpRequest, job_id: int) -> HttpResponse:
    job = get_object_or_404(Job.objects.visible_to(request.user).select_related("study"), pk=job_id)
    if request.method == "POST":
        job = jobs.cancel(job)
    context = {"job": job, "progress": jobs.live_progress(job)}
    template = "annotation/job.html#progress" if request.htmx else "annotation/job.html"
    return render(request, template, context)


@login_required
def trace_list(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    qs = Trace.objects.filter(study=study).select_related("problem").order_by("problem__problem_id", "model")
    model = request.GET.get("model", "")
    correct = request.GET.get("answer_correct", "")
    if model:
        qs = qs.filter(model=model)
    if correct in ("true", "false"):
        qs = qs.filter(answer_correct=correct == "true")
    page = Paginator(qs, 50).get_page(request.GET.get("page"))
    models = Trace.objects.filter(study=study).values_list("model", flat=True).distinct().order_by("model")
    context = {"study": study, "page": page, "models": models, "model": model, "answer_correct": correct}
    template = "annotation/trace_list.html#rows" if request.htmx else "annotation/trace_list.html"
    return render(request, template, context)


@login_required
def problem(request: HttpRequest, problem_id: int) -> HttpResponse:
    problem = get_object_or_404(Problem.objects.visible_to(request.user).select_related("study"), pk=problem_id)
    skeletons = problem.skeletons.prefetch_related(
        Prefetch("steps", queryset=SkeletonStep.objects.order_by("position"))
    ).order_by("-version")
    traces = problem.traces.order_by("model")
    return render(request, "annotation/problem.html", {"problem": problem, "skeletons": skeletons, "traces": traces})


@login_required
def trace(request: HttpRequest, trace_id: int) -> HttpResponse:
    trace = get_object_or_404(Trace.objects.visible_to(request.user).select_related("study", "problem"), pk=trace_id)
    skeleton_steps = (
        SkeletonStep.objects.filter(skeleton_id=trace.problem.approved_skeleton_id).order_by("position")
        if trace.problem.approved_skeleton_id
        else SkeletonStep.objects.none()
    )
    steps = trace.steps.order_by("index").prefetch_related(
        Prefetch("labels", queryset=StepLabel.objects.select_related("annotator", "judge"))
    )
    return render(request, "annotation/trace.html", {"trace": trace, "steps": steps, "skeleton_steps": skeleton_steps})
