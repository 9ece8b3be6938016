"""An annotator's queue and the owner's assignment of traces."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation import access
from annotation.forms import AssignForm
from annotation.middleware import refusals_back_to
from annotation.models import Assignment, Membership
from annotation.review.filters import filter_traces
from annotation.review.progress import visible_annotator_progress
from annotation.review.queues import (
    do_assign,
    do_clear_assignments,
    my_assignments,
    next_trace_id,
    with_status,
)
from annotation.views.base import member_view, page_query, study_for
from annotation.views.lists import trace_filter_context


@member_view
@require_GET
def queue(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = study_for(request, study_id)
    form = None
    if membership.is_owner:
        members_qs = Membership.objects.filter(study=study).select_related("user").order_by("user__username")
        form = AssignForm(members=list(members_qs))
    return _queue_page(request, study, membership, form)


def _queue_page(request: HttpRequest, study, membership: Membership, form: AssignForm | None,
                status_code: int = 200) -> HttpResponse:
    """The queue page; ``form`` is the owner's assignment form (bound, with its errors, after a refused POST)."""
    user = request.user
    qs = filter_traces(my_assignments(study, user), request.GET, study, membership, prefix="trace__")
    status = request.GET.get("status", "todo")
    page = Paginator(with_status(qs, status), 50).get_page(request.GET.get("page"))
    has_assignments = Assignment.objects.filter(study=study, annotator=user).exists()
    context = {
        "study": study, "membership": membership, "page": page, "status": status,
        "progress": visible_annotator_progress(study, membership), "assign_form": form, "has_assignments": has_assignments,
        "next_id": next_trace_id(study, user), "query": page_query(request),
        "status_choices": [("todo", "to do"), ("done", "done"), ("skipped", "skipped"), ("all", "all")],
        **trace_filter_context(request, study, membership),
    }
    template = "annotation/queue.html#rows" if request.htmx else "annotation/queue.html"
    return render(request, template, context, status=status_code)


@member_view
@require_POST
def queue_assign(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = study_for(request, study_id)
    access.check_owner(membership, "assigning traces")
    if request.POST.get("action") == "clear":
        n = do_clear_assignments(study)
        messages.success(request, f"Removed {n} assignments (labels are kept).")
        return redirect("queue", study_id=study.pk)
    members_qs = list(Membership.objects.filter(study=study).select_related("user").order_by("user__username"))
    form = AssignForm(request.POST, members=members_qs)
    if form.is_valid():
        users = list(get_user_model().objects.filter(pk__in=form.cleaned_data["annotators"]).order_by("username"))
        refusals_back_to(request, reverse("queue", args=[study.pk]))  # an AssignError, flashed on the queue
        n = do_assign(study, request.user, users, form.cleaned_data["k"], stratify=form.cleaned_data["stratify"],
                      only_unassigned=form.cleaned_data["only_unassigned"])
        messages.success(request, f"Made {n} assignments.")
    else:
        # The page again with the form as typed: each error under its field, not a banner over a reset form.
        return _queue_page(request, study, membership, form, status_code=400)
    return redirect("queue", study_id=study.pk)


# --------------------------------------------------------------------------
# Adjudication
