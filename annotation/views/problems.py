"""A problem's page, its skeleton versions (save, approve, the live check) and the Markdown preview."""

from __future__ import annotations

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation import access, skeletons
from annotation.forms import parse_skeleton_rows
from annotation.models import Skeleton
from annotation.rendering import has_markup, render_markdown
from annotation.views.base import member_view, problem_for
from reasonlib.ids import is_id

_STEP_FIELD = re.compile(r"^steps\[(\d+)\]\.(\w+)$")  # annotation.skeletons.clean_steps' error paths


@member_view
@require_GET
def problem(request: HttpRequest, problem_id: int) -> HttpResponse:
    problem, membership = problem_for(request, problem_id)
    versions = skeletons.history(problem)
    source = None
    wanted = request.GET.get("from")
    if wanted and is_id(wanted):
        source = next((v for v in versions if v.skeleton.version == int(wanted)), None)
    if source is None:
        source = next((v for v in versions if v.is_current), versions[0] if versions else None)
    rows = [{"text": s.text, "check": s.check_expr} for s in source.steps] if source else []
    return _render_problem(request, problem, membership, versions, rows, source)


def _render_problem(request, problem, membership, versions, rows, source, errors=(), status=200, note=""):
    current = next((v for v in versions if v.is_current), None)
    # An assertion's errors ("steps[i].text", 1-based as the rows) go beside its row; the rest stay in the summary.
    row_errors: dict[int, list[tuple[str, str]]] = {}
    whole_errors = []
    for field, message in errors:
        m = _STEP_FIELD.match(str(field))
        if m and 1 <= int(m.group(1)) <= len(rows):
            row_errors.setdefault(int(m.group(1)), []).append((m.group(2), message))
        else:
            whole_errors.append((field, message))
    traces = problem.traces.order_by("model", "pk")[:200]
    context = {
        "problem": problem, "study": problem.study, "membership": membership, "versions": versions,
        "current": current, "source": source, "can_approve": skeletons.can_approve(membership),
        "editor_rows": [{**r, "html": render_markdown(r["text"]) if has_markup(r["text"]) else "",
                         "check_result": skeletons.validate_check(r["check"]) if r["check"] else None,
                         "errors": row_errors.get(i, [])}
                        for i, r in enumerate(rows, start=1)],
        "spare_j": len(rows) + 1,
        "text_max": skeletons.TEXT_MAX, "change_note_max": skeletons.CHANGE_NOTE_MAX, "guide_min": skeletons.GUIDE_MIN, "guide_max": skeletons.GUIDE_MAX,
        "guide_warning": skeletons.guidance_warning(len(rows)) if rows else "",
        "errors": errors, "whole_errors": whole_errors, "n_rows_with_errors": len(row_errors), "note": note, "traces": traces, "n_traces": problem.traces.count(),
        "statement_html": render_markdown(problem.statement),
    }
    return render(request, "annotation/problem.html", context, status=status)


@member_view
@require_POST
def skeleton_save(request: HttpRequest, problem_id: int) -> HttpResponse:
    problem, membership = problem_for(request, problem_id)
    approve = request.POST.get("action") == "approve"
    if approve:
        access.check_adjudicator(membership, "approving a skeleton")
    rows = parse_skeleton_rows(request.POST)
    note = request.POST.get("note", "")
    try:
        sk = skeletons.do_save_skeleton(problem, request.user, rows, note=note, approve=approve)
    except skeletons.SkeletonError as exc:
        versions = skeletons.history(problem)
        return _render_problem(request, problem, membership, versions, rows, None, errors=exc.errors,
                               status=exc.status, note=note)
    messages.success(request, f"Saved version {sk.version}" + (" and approved it." if approve else " as a draft."))
    return redirect(f"{reverse('problem', args=[problem.pk])}#skeleton")


@member_view
@require_POST
def skeleton_approve(request: HttpRequest, skeleton_id: int) -> HttpResponse:
    sk, membership = access.check_object(request.user, Skeleton.objects.select_related("problem"), skeleton_id,
                                         study_path="problem__study_id", what="skeleton")
    access.check_adjudicator(membership, "approving a skeleton")
    skeletons.do_approve_skeleton(sk, request.user)
    messages.success(request, f"Version {sk.version} is now the approved skeleton (L_gold = {sk.problem.l_gold}).")
    return redirect(f"{reverse('problem', args=[sk.problem_id])}#skeleton")


@login_required
@require_GET
def skeleton_check(request: HttpRequest) -> HttpResponse:
    """Live validation of one check expression (an htmx fragment)."""
    value = next((v for k, v in request.GET.items() if k.startswith("check")), "")
    result = skeletons.validate_check(value[:1000])
    return render(request, "annotation/_skeleton_row.html#check_result", {"r": result})


@login_required
@require_GET
def markdown_preview(request: HttpRequest) -> HttpResponse:
    # The editor's fields are named text-J; take whichever came.
    value = next((v for k, v in request.GET.items() if k.startswith("text")), "")[:5000]
    return HttpResponse(render_markdown(value) if has_markup(value) else "")


# --------------------------------------------------------------------------
