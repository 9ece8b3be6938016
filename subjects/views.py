"""Web pages for subject models: the study's list with the model table
(accuracy, pass@k, maj@k, tokens, cost beside the imported models), the
create/edit form, starting a generation run and following it. Each view
starts with an access helper (annotation.access) that returns the objects or
raises, then delegates to subjects.services."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation import access, jobs
from annotation.middleware import refusals_into, refusals_shown_on
from runs.views import start_from_page
from subjects import services
from subjects.forms import GenerationForm, PromptTemplateForm, SubjectModelForm
from subjects.models import GenerationRun, PromptTemplate, SubjectModel


@login_required
@require_GET
def subject_model_list(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    context = {
        "study": study, "membership": membership,
        "subjects": SubjectModel.objects.filter(study=study).select_related("prompt_template").order_by("name"),
        "rows": services.model_table(study),
        "runs": GenerationRun.objects.filter(subject__study=study).select_related("subject", "job")[:20],
        "is_owner": access.has_role(membership, "owner"),
        "run_form": GenerationForm(),
    }
    return render(request, "subjects/list.html", context)


def _save_form(request: HttpRequest, study, subject: SubjectModel | None) -> HttpResponse | None:
    services.ensure_builtin_templates(study)
    form = SubjectModelForm(request.POST or None, study=study, instance=subject or SubjectModel(study=study),
                            initial={} if subject else {"check_server": True})
    if request.method == "POST" and form.is_valid():
        data = {k: v for k, v in form.cleaned_data.items() if k != "check_server"}
        data["stop"] = data.get("stop") or []
        saved, created = None, False
        with refusals_into(form):  # the service's refusals and the model's own validation, under their fields
            fresh = SubjectModel.objects.get(pk=subject.pk) if subject else None
            saved, created = services.do_save_subject(study, data, subject=fresh)
        if saved is not None:
            messages.success(request, f"Subject model {saved.name} {'created' if created else 'saved'} "
                                      f"(version {saved.version}).")
            if form.cleaned_data["check_server"]:
                # A probe job contacts the server, never this request (services.do_check_after_save).
                job = services.do_check_after_save(saved, user=request.user)
                if job is None:
                    messages.warning(request, "The server was not checked: the task queue is down.")
                else:
                    messages.info(request, f"Checking the server in the background (probe job {job.pk}); "
                                           "its model page shows the result.")
            return redirect("subject-model-list", study_id=study.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "subjects/form.html", {"study": study, "form": form, "subject": subject}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def subject_model_create(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    services.check_owner(membership)
    return _save_form(request, study, None)


@login_required
@require_http_methods(["GET", "POST"])
def subject_model_edit(request: HttpRequest, subject_id: int) -> HttpResponse:
    subject, membership = services.check_subject(request.user, subject_id)
    services.check_owner(membership)
    return _save_form(request, subject.study, subject)


@login_required
@require_GET
def subject_model_detail(request: HttpRequest, subject_id: int) -> HttpResponse:
    """The subject model; its continuation card polls (htmx) while a probe job runs."""
    subject, membership = services.check_subject(request.user, subject_id)
    probe = subject.probe_result or None
    probe_job = services.latest_probe_job(subject)
    context = {"subject": subject, "study": subject.study, "probe": probe,
               "probed_at": parse_datetime(probe.get("probed_at") or "") if probe else None,
               "probe_job": probe_job, "probe_progress": jobs.live_progress(probe_job) if probe_job else None,
               "is_owner": access.has_role(membership, "owner"),
               "runs": GenerationRun.objects.filter(subject=subject).select_related("job")[:10]}
    template = "subjects/detail.html#continuation" if request.htmx else "subjects/detail.html"
    return render(request, template, context)


@login_required
@require_POST
def subject_model_probe(request: HttpRequest, subject_id: int) -> HttpResponse:
    """Queue a probe of the server (a Job in a worker, never inside this
    request); the page follows it and shows the result when it ends."""
    subject, membership = services.check_subject(request.user, subject_id)
    services.check_owner(membership)
    services.do_start_probe(subject, user=request.user)  # a conflict or a queue that is down: RefusalMiddleware
    return redirect("subject-model", subject_id=subject.pk)


@login_required
@require_POST
def generation_start(request: HttpRequest, subject_id: int) -> HttpResponse:
    subject, membership = services.check_subject(request.user, subject_id)
    services.check_owner(membership)
    # The generation kind's one serializer (runs.kinds), the model fixed by the row the form sits in.
    return start_from_page(request, subject.study, "generation", {"model": subject.name},
                           back=reverse("subject-model-list", args=[subject.study_id]),
                           to=lambda record: reverse("generation-run", args=[record.pk]))


@login_required
@require_GET
def generation_run(request: HttpRequest, run_id: int) -> HttpResponse:
    record, membership = services.check_generation_run(request.user, run_id)
    context = {"run": record, "job": record.job, "subject": record.subject, "study": record.subject.study,
               "progress": jobs.live_progress(record.job),
               "can_cancel": access.can_cancel_job(request.user, record.job, membership)}
    template = "subjects/run.html#stats" if request.htmx else "subjects/run.html"
    return render(request, template, context)


# --------------------------------------------------------------------------
# Prompt templates: list, editor (a new version on save), preview


def _template_context(request: HttpRequest, study, membership, form: PromptTemplateForm,
                      current: PromptTemplate | None) -> dict:
    return {"study": study, "form": form, "current": current, "versions": services.template_versions(study),
            "is_owner": access.has_role(membership, "owner")}


def _save_template(request: HttpRequest, study, membership, current: PromptTemplate | None) -> HttpResponse:
    form = PromptTemplateForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        with refusals_into(form):  # a refusal stands under its field; the form is shown again
            saved = services.do_save_template(study, data["name"], data["template"], exemplars=data["exemplars"])
            messages.success(request, f"Prompt template {saved.name} v{saved.version} saved.")
            return redirect("prompt-template", template_id=saved.pk)
    return render(request, "subjects/templates.html", _template_context(request, study, membership, form, current),
                  status=400)


@login_required
@require_http_methods(["GET", "POST"])
def prompt_template_list(request: HttpRequest, study_id: int) -> HttpResponse:
    """GET: the study's templates and their versions (members); POST: a new template (owners)."""
    study, membership = access.check_study(request.user, study_id)
    if request.method == "POST":
        services.check_owner(membership)
        return _save_template(request, study, membership, None)
    form = PromptTemplateForm(initial={"template": "{{ problem }}"})
    return render(request, "subjects/templates.html", _template_context(request, study, membership, form, None))


@login_required
@require_http_methods(["GET", "POST"])
def prompt_template_detail(request: HttpRequest, template_id: int) -> HttpResponse:
    """GET: one version, the editor filled with it (members read it); POST: save
    the edit as the next version of its name (owners)."""
    template, membership = services.check_template(request.user, template_id)
    if request.method == "POST":
        services.check_owner(membership)
        return _save_template(request, template.study, membership, template)
    form = PromptTemplateForm(initial={"name": template.name, "template": template.template,
                                       "exemplars": json.dumps(template.exemplars, indent=1, ensure_ascii=False)
                                       if template.exemplars else ""})
    return render(request, "subjects/templates.html",
                  _template_context(request, template.study, membership, form, template))


@login_required
@require_POST
def prompt_template_preview(request: HttpRequest, study_id: int) -> HttpResponse:
    """The editor's text rendered on one problem (htmx partial; nothing saved,
    no model called); 400 with the field's error."""
    study, membership = access.check_study(request.user, study_id)
    services.check_owner(membership)
    form = PromptTemplateForm({**request.POST.dict(), "name": request.POST.get("name") or "preview"})
    if not form.is_valid():
        error = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
        return render(request, "subjects/templates.html#preview", {"preview": None, "error": error}, status=400)
    # The service's refusal (TemplateInvalid, "field: message") is shown in the same place, with 400.
    refusals_shown_on(request, "subjects/templates.html#preview", preview=None)
    data = form.cleaned_data
    preview = services.preview_template(study, data["template"], data["exemplars"],
                                        problem_id=data["problem_id"] or None)
    return render(request, "subjects/templates.html#preview", {"preview": preview, "error": ""})
