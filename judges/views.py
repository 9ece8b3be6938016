"""Web pages for judges: list, configuration form, prompt editor with history
and preview, starting a run and following it. Each view starts with an access
helper that returns the objects or raises (404 for non-members, 403 for
members who may not change things), then delegates to judges.services."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Prefetch, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation import access, gate, jobs
from annotation.gate import Source
from annotation.models import Membership, StepLabel, Study, Trace
from judges import protocol, services
from judges.forms import JudgeConfigForm, PromptForm
from judges.models import JudgeConfig, JudgeRun, JudgeTraceResult
from reasonlib.ids import is_id
from runs.templating import PromptTemplateError
from runs.views import page_fields, start_from_page

FAILED_CALLS_PER_PAGE = 25


def _study_for(request: HttpRequest, study_id: int) -> tuple[Study, Membership]:
    return access.check_study(request.user, study_id)


def _judge_for(request: HttpRequest, judge_id: int) -> tuple[JudgeConfig, Membership]:
    return services.check_judge(request.user, judge_id)


def _owner_only(membership: Membership) -> None:
    services.check_owner(membership)


@login_required
@require_GET
def judge_list(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    judges = services.judge_list(study)
    # Columns the member may not read are hidden (annotation.gate): None, not 0, so nothing can tell.
    hide_disagreements = not gate.may_read(membership, services.DISAGREEMENT_READS)
    hide_labels = not gate.may_read(membership, {Source.JUDGE})  # how many steps each judge labelled
    for judge in judges:
        if hide_disagreements:
            judge.n_disagreements = None
        if hide_labels:
            judge.n_labels = None
    context = {"study": study, "membership": membership, "judges": judges}
    return render(request, "judges/list.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def judge_create(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    _owner_only(membership)
    form = JudgeConfigForm(request.POST or None, study=study, instance=JudgeConfig(study=study))
    if request.method == "POST" and form.is_valid():
        judge, _ = services.do_save_judge(study, form.cleaned_data, user=request.user)
        messages.success(request, f"Judge {judge.name} created. Its prompt is the default one; edit it below.")
        return redirect("judge", judge_id=judge.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "judges/form.html", {"study": study, "form": form, "judge": None}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def judge_edit(request: HttpRequest, judge_id: int) -> HttpResponse:
    judge, membership = _judge_for(request, judge_id)
    _owner_only(membership)
    if judge.builtin:
        raise Http404("The built-in judge has no settings")
    form = JudgeConfigForm(request.POST or None, study=judge.study, instance=judge)
    if request.method == "POST" and form.is_valid():
        judge, _ = services.do_save_judge(judge.study, form.cleaned_data, judge=judge, user=request.user)
        messages.success(request, f"Saved; judge {judge.name} is at version {judge.version}.")
        return redirect("judge", judge_id=judge.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "judges/form.html", {"study": judge.study, "form": form, "judge": judge}, status=status)


@login_required
@require_GET
def judge_detail(request: HttpRequest, judge_id: int) -> HttpResponse:
    judge, membership = _judge_for(request, judge_id)
    runs = list(judge.runs.select_related("job", "run").order_by("-created_at", "-pk")[:10])
    failed = (JudgeTraceResult.objects.filter(judge=judge, status=JudgeTraceResult.Status.FAILED)
              .select_related("trace").order_by("trace__trace_id")[:50])
    context = {
        "study": judge.study,
        "judge": judge,
        "membership": membership,
        "runs": [(run, jobs.live_progress(run.job)) for run in runs],
        "failed": failed,
        "n_failed": JudgeTraceResult.objects.filter(judge=judge, status=JudgeTraceResult.Status.FAILED).count(),
        "n_disagreements": services.visible_disagreement_count(judge, membership),
        "run_fields": page_fields("judge", judge.study, without=("judge",)) if membership.is_owner else None,
        "estimate": (services.estimate_run(judge, Trace.objects.of_study(judge.study))
                     if membership.is_owner else None),
    }
    return render(request, "judges/detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def judge_prompt(request: HttpRequest, judge_id: int) -> HttpResponse:
    """Prompt editor: history, the current (or a past) version, and a preview
    on a real trace. Members read; owners preview and save new versions (a preview renders a
    template the user wrote, so it is the owners' as saving is)."""
    judge, membership = _judge_for(request, judge_id)
    if not judge.uses_prompt:
        raise Http404("The mechanistic judge has no prompt")
    history = judge.prompts.select_related("created_by").order_by("-created_at", "-pk")
    shown = history.filter(version=request.GET["version"]).first() if request.GET.get("version") else None
    preview = None
    if request.method == "POST":
        _owner_only(membership)
        form = PromptForm(request.POST)
        if request.POST.get("action") == "save":
            if form.is_valid():
                prompt = services.do_save_prompt(judge, form.cleaned_data["template"], user=request.user,
                                                 note=form.cleaned_data["note"])
                if prompt is None:
                    messages.info(request, "The prompt is unchanged; no new version.")
                else:
                    messages.success(request, f"Saved as prompt version {prompt.version}.")
                return redirect("judge-prompt", judge_id=judge.pk)
        else:
            preview = _preview(judge, form)
    else:
        template = shown.template if shown else (judge.prompt_template or protocol.DEFAULT_TEMPLATE)
        form = PromptForm(initial={"template": template, "trace": request.GET.get("trace", "")})
        if request.GET.get("trace") and membership.is_owner:
            preview = _preview(judge, PromptForm({"template": template, "trace": request.GET["trace"]}))
    context = {"study": judge.study, "judge": judge, "membership": membership, "form": form, "history": history,
               "shown": shown, "preview": preview}
    if request.htmx and request.method == "POST":
        return render(request, "judges/prompt.html#preview", context)
    return render(request, "judges/prompt.html", context, status=400 if form.errors else 200)


def _preview(judge: JudgeConfig, form: PromptForm) -> dict:
    if not form.is_valid():
        return {"error": "; ".join(e for errors in form.errors.values() for e in errors)}
    wanted = form.cleaned_data["trace"].strip()
    traces = Trace.objects.of_study(judge.study)
    if wanted:
        lookup = Q(trace_id=wanted) | Q(pk=int(wanted)) if is_id(wanted) else Q(trace_id=wanted)
        trace = traces.filter(lookup).first()
    else:
        trace = traces.order_by("pk").first()
    if trace is None:
        return {"error": f"no trace {wanted!r} in this study" if wanted else "the study has no traces yet"}
    try:
        return {"trace": trace, "messages": services.preview_prompt(judge, form.cleaned_data["template"], trace)}
    except PromptTemplateError as exc:  # bounded rendering (runs.templating): the template's own error
        return {"error": str(exc)}


@login_required
@require_POST
def judge_run_start(request: HttpRequest, judge_id: int) -> HttpResponse:
    judge, membership = _judge_for(request, judge_id)
    _owner_only(membership)
    return start_from_page(request, judge.study, "judge", {"judge": judge.name}, back=reverse("judge", args=[judge.pk]),
                           to=lambda record: reverse("judge-run", args=[record.pk]))


@login_required
@require_GET
def judge_run(request: HttpRequest, run_id: int) -> HttpResponse:
    run, membership = access.check_object(request.user, JudgeRun.objects.select_related("job", "run", "judge__study"),
                                          run_id, study_path="judge__study_id", what="judge run")
    context = {"run": run, "job": run.job, "judge": run.judge, "study": run.judge.study}
    # Two polled fragments: the figures, and the failed calls at the page the reader is on.
    part = (request.GET.get("part") or "stats") if request.htmx else None
    if part != "stats":
        calls = Paginator(services.failed_calls(run), FAILED_CALLS_PER_PAGE).get_page(request.GET.get("calls"))
        calls.object_list = services.with_trace_ids(calls.object_list)
        context["calls"] = calls
        if part == "calls":
            return render(request, "judges/run.html#calls", context)
    context.update({
        "progress": jobs.live_progress(run.job),
        "failed": run.results.filter(status=JudgeTraceResult.Status.FAILED).select_related("trace")
        .order_by("trace_id")[:50],
        "can_cancel": access.can_cancel_job(request.user, run.job, membership),
    })
    return render(request, "judges/run.html#stats" if part == "stats" else "judges/run.html", context)


@login_required
@require_GET
def judge_disagreements(request: HttpRequest, judge_id: int) -> HttpResponse:
    judge, membership = _judge_for(request, judge_id)
    # The page lists the judge's and every annotator's verdicts: blind mode, as agreement.
    gate.check(membership, "a judge's disagreements page", services.DISAGREEMENT_READS)
    steps = services.disagreements(judge.study, judge).select_related("trace").prefetch_related(
        Prefetch("labels", queryset=StepLabel.objects.filter(kind=StepLabel.Kind.HUMAN).select_related("annotator"),
                 to_attr="human_labels")
    )
    paginator = Paginator(steps, 50)
    # The number of pages from the count the score job stored when current (grouping every judge
    # label otherwise): the same number disagreements().count() gives.
    paginator.count = services.disagreement_count(judge)
    page = paginator.get_page(request.GET.get("page"))
    return render(request, "judges/disagreements.html", {"study": judge.study, "judge": judge, "page": page})
