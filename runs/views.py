"""The runs page of a study: every run of every kind (status, live progress, items, requests, cost,
who started it; cancel, retry what failed) and a form that starts any declared kind (runs.kinds),
validated by the kind's own serializer -- the one its REST endpoint uses."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from rest_framework.exceptions import ValidationError

from annotation import access, jobs
from annotation.api.errors import serializer_refusal
from annotation.models import Membership, Study
from reasonlib.refusals import Invalid
from runs import kinds
from runs.clients import client_for
from runs.engine import ACTIVE
from runs.models import Run

PAGE_SIZE = 50


def _rows(study: Study, user, membership: Membership, page_number: Any) -> tuple[Any, list[dict[str, Any]]]:
    """One page of the study's runs, newest first, with what the table shows of each (three queries
    whatever the page holds, plus one cache read per run still active)."""
    qs = (Run.objects.listed().filter(job__study=study)
          .select_related("job__created_by").order_by("-created_at", "-pk"))
    page = Paginator(qs, PAGE_SIZE).get_page(page_number)
    rows = []
    for run in page:
        job = run.job
        try:
            client = client_for(run.kind)
        except LookupError:
            client = None
        rows.append({
            "run": run, "job": job, "kind": client.label_for(run) if client else run.kind,
            "noun": client.noun if client else "item", "progress": jobs.live_progress(job),
            "page": client.page(run) if client else None,
            "can_cancel": not job.finished and access.can_cancel_job(user, job, membership),
            "can_retry": job.finished and job.failed > 0 and membership.role == Membership.Role.OWNER
                         and kinds.can_retry(run),
        })
    return page, rows


def _context(request: HttpRequest, study: Study, membership: Membership, *, kind: str,
             values: dict[str, Any] | None = None, errors: dict[str, list[str]] | None = None) -> dict[str, Any]:
    page, rows = _rows(study, request.user, membership, request.GET.get("page"))
    starters = kinds.all_kinds()
    # Without a choice, the judge: every study has the built-in verifier, while the first kind of the registry
    # (generation) opened on an empty, required subject-model menu.
    default = next((s for s in starters if s.name == "judge"), starters[0] if starters else None)
    chosen = next((s for s in starters if s.name == kind), default)
    fields = kinds.form_fields(chosen, study, values) if chosen else []
    errors = errors or {}
    for f in fields:
        f["errors"] = errors.get(f["name"], [])
    # An error of no field on the form (the kind itself, a refusal of the service) is shown above it.
    shown = {f["name"] for f in fields if f["type"] != "list"}
    general = [m for k, msgs in errors.items() if k not in shown for m in
               (msgs if k == "non_field_errors" else [f"{k}: {m}" for m in msgs])]
    return {
        "study": study, "page": page, "rows": rows, "active": any(not r["job"].finished for r in rows),
        "starters": starters, "chosen": chosen, "is_owner": membership.role == Membership.Role.OWNER,
        "fields": fields,
        "errors": errors, "non_field_errors": general,
    }


@login_required
@require_http_methods(["GET", "POST"])
def study_runs(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    if request.method == "POST":
        access.check_owner(membership, "starting runs")
        kind = request.POST.get("kind", "")
        try:
            row = kinds.start(kind, study, request.POST, request.user)
        except ValidationError as exc:
            # The refusal's (field, message) pairs, as every door reads them (annotation.api.errors), by field.
            errors: dict[str, list[str]] = {}
            for field, message in serializer_refusal(exc).errors:
                errors.setdefault(field or "non_field_errors", []).append(message)
            context = _context(request, study, membership, kind=kind, values=request.POST.dict(), errors=errors)
            template = "runs/study_runs.html#start" if request.htmx else "runs/study_runs.html"
            return render(request, template, context, status=400)
        return redirect(reverse("job", args=[kinds.job_of(row).pk]))
    context = _context(request, study, membership, kind=request.GET.get("kind", ""))
    if request.htmx and request.GET.get("part") == "table":
        return render(request, "runs/study_runs.html#table", context)
    if request.htmx and request.GET.get("part") == "start":
        return render(request, "runs/study_runs.html#start", context)
    return render(request, "runs/study_runs.html", context)


def page_fields(kind: str, study: Study, *, without: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The inputs of a kind's parameters for a form on another page (templates/runs/_params.html), without
    those the page fixes (the judge page's judge, a scanner page's scanner, a cohort page's cohort) or leaves
    to the runs page."""
    return [f for f in kinds.form_fields(kinds.get(kind), study) if f["name"] not in without]


def start_from_page(request: HttpRequest, study: Study, kind: str, fixed: dict[str, str], *, back: str,
                    to: Any = None) -> HttpResponse:
    """Start a run from a form on another page than the runs page (a judge's, a scanner's, a cohort's, the
    subject models'): the posted parameters and those the page fixes, validated by the kind's one serializer
    (runs.kinds), so a refusal is the runs page's and the API's; it goes back to ``back`` with the message,
    naming the field by its label. ``to(row)``: where a started run leads (default: its job)."""
    data = request.POST.copy()
    for name, value in fixed.items():
        data[name] = value
    try:
        row = kinds.start(kind, study, data, request.user)
    except ValidationError as exc:
        fields = {f["name"]: f["label"] for f in kinds.form_fields(kinds.get(kind), study)}
        said = [f"{fields[name]}: {m}" if name in fields else m for name, m in serializer_refusal(exc).errors]
        messages.error(request, f"Not started: {'; '.join(said)}")
        return redirect(back)
    return redirect(to(row) if to is not None else reverse("job", args=[row.job_id]))


def _run_for(request: HttpRequest, study_id: int, run_id: int) -> tuple[Run, Membership]:
    study, membership = access.check_study(request.user, study_id)
    run = Run.objects.filter(pk=run_id, job__study=study).select_related("job").first()
    if run is None:
        raise access.not_found("run")
    return run, membership


@login_required
@require_POST
def run_cancel(request: HttpRequest, study_id: int, run_id: int) -> HttpResponse:
    run, membership = _run_for(request, study_id, run_id)
    access.check_cancel_job(request.user, run.job, membership)
    jobs.cancel(run.job)
    return redirect(reverse("study-runs", args=[study_id]))


@login_required
@require_POST
def run_retry(request: HttpRequest, study_id: int, run_id: int) -> HttpResponse:
    """Start the same configuration again over what failed. A refusal (nothing to retry, stored parameters
    the kind's serializer no longer takes: 400; a RunConflict while one runs: 409) is the middleware's: a
    flash on the runs page the button was on."""
    run, membership = _run_for(request, study_id, run_id)
    access.check_owner(membership, "starting runs")
    if not kinds.can_retry(run) or run.job.status in ACTIVE:
        raise Invalid(f"run {run.pk} has nothing to retry: it is still active or its kind cannot retry")
    row = kinds.retry(run, request.user)
    return redirect(reverse("job", args=[kinds.job_of(row).pk]))
