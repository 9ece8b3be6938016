"""Web pages. Each view starts with an access helper that returns the object or
raises 404 (not a member) / 403 (a member without the role), then delegates
to the domain modules (services, review, skeletons, members); htmx requests
get the page's partial.

Roles: annotators review, author skeleton drafts and see their queue;
adjudicators also approve skeletons and settle disagreements; owners also
manage members and queues. A non-member gets 404 everywhere.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Exists, OuterRef, Prefetch, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.defaults import page_not_found
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh

from annotation import access, jobs, members, review, services, skeletons
from annotation.forms import AssignForm, ImportForm, MemberForm, parse_skeleton_rows
from annotation.importing.regime import REGIME_KEYS
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
    Verdict,
)
from annotation.rendering import has_markup, raw_with_boundaries, render_inline, render_markdown, step_rows_html

OWNER, ADJUDICATOR, ANNOTATOR = Membership.Role.OWNER, Membership.Role.ADJUDICATOR, Membership.Role.ANNOTATOR


def member_view(view):
    """login_required; refusals (annotation.access.AccessDenied) are rendered
    by ``permission_denied`` below, the same way on every page."""
    return login_required(view)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler403`` of the project: an outsider's refusal is a plain 404 (a
    study's existence is not revealed), a member's a 403 naming the role."""
    if isinstance(exception, access.AccessDenied) and exception.outsider:
        return page_not_found(request, Http404(str(exception)))
    reason = str(exception) if isinstance(exception, access.AccessDenied) else "you may not do this"
    return render(request, "annotation/forbidden.html", {"reason": reason}, status=403)


def _study_for(request: HttpRequest, study_id: int) -> tuple[Study, Membership]:
    return access.check_study(request.user, study_id)


def _trace_for(request: HttpRequest, trace_id: int) -> tuple[Trace, Membership]:
    return access.check_trace(request.user, trace_id)


def _problem_for(request: HttpRequest, problem_id: int) -> tuple[Problem, Membership]:
    return access.check_object(request.user, Problem.objects.select_related("study", "approved_skeleton"),
                               problem_id, study_path="study_id", what="problem")


def safe_next(request: HttpRequest, fallback: str) -> str:
    """The posted ``next`` when it stays on this site, else ``fallback``: a
    form must never send the browser to another host (an open redirect)."""
    wanted = request.POST.get("next") or request.GET.get("next") or ""
    if wanted and url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return wanted
    return fallback


def _page_query(request: HttpRequest, drop=("page",)) -> str:
    q = request.GET.copy()
    for key in drop:
        q.pop(key, None)
    return q.urlencode()


# --------------------------------------------------------------------------
# Studies and members


@member_view
@require_GET
def studies(request: HttpRequest) -> HttpResponse:
    memberships = list(Membership.objects.filter(user=request.user).select_related("study").order_by("study__name"))
    problems = dict(
        Problem.objects.filter(study__in=[m.study_id for m in memberships]).values("study")
        .annotate(n=Count("pk")).values_list("study", "n")
    )
    progress = review.study_progress([m.study_id for m in memberships], request.user)
    rows = [{"m": m, "n_problems": problems.get(m.study_id, 0), **progress[m.study_id]} for m in memberships]
    return render(request, "annotation/studies.html", {"rows": rows, "memberships": memberships})


@member_view
@require_GET
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
        "progress": review.study_progress([study.pk], request.user)[study.pk],
        "jobs": [(job, jobs.live_progress(job)) for job in recent_jobs],
        "import_form": ImportForm() if membership.is_owner else None,
    }
    return render(request, "annotation/study.html", context)


@member_view
@require_http_methods(["GET", "POST"])
def study_members(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    form = MemberForm()
    status = 200
    if request.method == "POST":
        access.check_owner(membership, "managing members")
        action = request.POST.get("action", "set")
        try:
            if action == "remove":
                members.do_remove_member(study, request.POST.get("username", ""))
                messages.success(request, f"Removed {request.POST.get('username')}.")
                return redirect("study-members", study_id=study.pk)
            form = MemberForm(request.POST)
            if form.is_valid():
                m, created = members.do_set_role(study, form.cleaned_data["username"], form.cleaned_data["role"])
                messages.success(request, f"{m.user.username} is {'now' if not created else 'added as'} {m.role}.")
                return redirect("study-members", study_id=study.pk)
            status = 400
        except members.MemberError as exc:
            form.add_error(None, str(exc))
            status = 400
    rows = Membership.objects.filter(study=study).select_related("user").order_by("role", "user__username")
    return render(request, "annotation/members.html",
                  {"study": study, "membership": membership, "rows": rows, "form": form, "roles": Membership.Role.values},
                  status=status)


@member_view
@require_POST
def study_import(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    access.check_owner(membership, "importing traces")
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, "annotation/import_form.html", {"study": study, "import_form": form}, status=400)
    job = services.do_queue_import(
        study, form.cleaned_data["file"], fmt=form.cleaned_data["format"],
        skip_invalid=form.cleaned_data["skip_invalid"], user=request.user,
    )
    return redirect("job", job_id=job.pk)


@member_view
@require_http_methods(["GET", "POST"])
def job(request: HttpRequest, job_id: int) -> HttpResponse:
    job, membership = access.check_job(request.user, job_id)
    if request.method == "POST":
        access.check_cancel_job(request.user, job, membership)
        job = jobs.cancel(job)
    context = {"job": job, "progress": jobs.live_progress(job), "study": job.study,
               "can_cancel": access.can_cancel_job(request.user, job, membership),
               "details": jobs.details_link(job)}
    template = "annotation/job.html#progress" if request.htmx else "annotation/job.html"
    return render(request, template, context)


# --------------------------------------------------------------------------
# Lists


def _trace_filter_context(request: HttpRequest, study: Study) -> dict:
    return {
        "models": review.study_models(study),
        "f": {k: request.GET.get(k, "") for k in ("model", "domain", "answer_correct", "flagged", "lucky_guess",
                                                  "disagreement", "needs_review", "status")},
        "lucky_available": review.lucky_guess_available(),
    }


@member_view
@require_GET
def trace_list(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    qs = Trace.objects.filter(study=study).select_related("problem").order_by("problem_id", "model", "pk")
    qs = review.filter_traces(qs, request.GET, study, membership)
    page = Paginator(qs, 50).get_page(request.GET.get("page"))
    mine = {
        r.trace_id: r for r in TraceReview.objects.filter(annotator=request.user, trace__in=[t.pk for t in page])
    }
    for t in page:
        t.my_review = mine.get(t.pk)
    context = {"study": study, "membership": membership, "page": page, "query": _page_query(request),
               **_trace_filter_context(request, study)}
    template = "annotation/trace_list.html#rows" if request.htmx else "annotation/trace_list.html"
    return render(request, template, context)


@member_view
@require_GET
def problem_list(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    qs = Problem.objects.filter(study=study).order_by("problem_id")
    f = {k: request.GET.get(k, "") for k in ("domain", "tag", "skeleton", "q")}
    if f["domain"]:
        qs = qs.filter(domain=f["domain"])
    if f["tag"]:
        qs = _filter_tag(qs, f["tag"])
    if f["skeleton"] in ("yes", "no"):
        qs = qs.filter(approved_skeleton__isnull=f["skeleton"] == "no")
    if f["q"]:
        qs = qs.filter(Q(problem_id__icontains=f["q"]) | Q(statement__icontains=f["q"]))
    page = Paginator(qs, 50).get_page(request.GET.get("page"))
    counts = dict(
        Trace.objects.filter(problem__in=[p.pk for p in page]).values("problem").annotate(n=Count("pk"))
        .values_list("problem", "n")
    )
    for p in page:
        p.n_traces = counts.get(p.pk, 0)
    domains = Problem.objects.filter(study=study).exclude(domain="").values_list("domain", flat=True).distinct().order_by("domain")
    context = {"study": study, "membership": membership, "page": page, "f": f, "domains": domains,
               "query": _page_query(request)}
    template = "annotation/problem_list.html#rows" if request.htmx else "annotation/problem_list.html"
    return render(request, template, context)


def _filter_tag(qs, tag: str):
    from django.db import connection

    if connection.features.supports_json_field_contains:
        return qs.filter(tags__contains=[tag])
    # SQLite: match the JSON text of the list, quotes included, so "alg" is not "algebra".
    import json

    return qs.filter(tags__icontains=json.dumps(tag))


# --------------------------------------------------------------------------
# Problems and skeletons


@member_view
@require_GET
def problem(request: HttpRequest, problem_id: int) -> HttpResponse:
    problem, membership = _problem_for(request, problem_id)
    versions = skeletons.history(problem)
    source = None
    wanted = request.GET.get("from")
    if wanted and wanted.isdigit():
        source = next((v for v in versions if v.skeleton.version == int(wanted)), None)
    if source is None:
        source = next((v for v in versions if v.is_current), versions[0] if versions else None)
    rows = [{"text": s.text, "check": s.check_expr} for s in source.steps] if source else []
    return _render_problem(request, problem, membership, versions, rows, source)


def _render_problem(request, problem, membership, versions, rows, source, errors=(), status=200, note=""):
    current = next((v for v in versions if v.is_current), None)
    traces = problem.traces.order_by("model", "pk")[:200]
    context = {
        "problem": problem, "study": problem.study, "membership": membership, "versions": versions,
        "current": current, "source": source, "can_approve": skeletons.can_approve(membership),
        "editor_rows": [{**r, "html": render_markdown(r["text"]) if has_markup(r["text"]) else "",
                         "check_result": skeletons.validate_check(r["check"]) if r["check"] else None}
                        for r in rows],
        "spare_j": len(rows) + 1,
        "guide_min": skeletons.GUIDE_MIN, "guide_max": skeletons.GUIDE_MAX,
        "guide_warning": skeletons.guidance_warning(len(rows)) if rows else "",
        "errors": errors, "note": note, "traces": traces, "n_traces": problem.traces.count(),
        "statement_html": render_markdown(problem.statement),
    }
    return render(request, "annotation/problem.html", context, status=status)


@member_view
@require_POST
def skeleton_save(request: HttpRequest, problem_id: int) -> HttpResponse:
    problem, membership = _problem_for(request, problem_id)
    approve = request.POST.get("action") == "approve"
    if approve:
        access.check_adjudicator(membership, "approving a skeleton")
    rows = parse_skeleton_rows(request.POST)
    note = request.POST.get("note", "")
    try:
        sk = skeletons.do_save_skeleton(problem, request.user, rows, note=note, approve=approve)
    except skeletons.SkeletonError as exc:
        versions = skeletons.history(problem)
        return _render_problem(request, problem, membership, versions, rows, None, errors=exc.errors, status=400,
                               note=note)
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
# The review page


def _review_context(request: HttpRequest, trace: Trace, membership: Membership, *, posted=None) -> dict:
    """Everything the review page shows, in a fixed number of queries."""
    user = request.user
    my_review = TraceReview.objects.filter(trace=trace, annotator=user).first()
    revealed = review.is_revealed(membership, my_review)
    skeleton_steps = (
        list(SkeletonStep.objects.filter(skeleton_id=trace.problem.approved_skeleton_id).order_by("position"))
        if trace.problem.approved_skeleton_id else []
    )
    steps = list(trace.steps.order_by("index").values_list("pk", "index", "text", "start", "end"))
    mine: dict[int, dict] = {}
    others: dict[int, list[dict]] = {}
    for lab in review.visible_label_rows(trace, user, revealed):
        if lab["kind"] == StepLabel.Kind.HUMAN and lab["annotator_id"] == user.pk:
            mine[lab["step_id"]] = lab
        else:
            others.setdefault(lab["step_id"], []).append({
                "kind": lab["kind"], "source": lab["source"], "verdict": lab["verdict"],
                "refs": lab["skeleton_refs"] or [], "reason": lab["reason"], "confidence": lab["confidence"],
            })
    rows = []
    first_error = None
    covered: set[int] = set()
    for pk, index, text, _, _ in steps:
        if posted is not None:
            verdict, refs, note = posted.get(index, ("", [], ""))
        else:
            lab = mine.get(pk)
            verdict, refs, note = (lab["verdict"], lab["skeleton_refs"] or [], lab["reason"]) if lab else ("", [], "")
        if verdict == Verdict.INVALID and first_error is None:
            first_error = index
        if verdict == Verdict.VALID:
            covered.update(refs)
        theirs = others.get(pk, [])
        rows.append({"index": index, "text": text, "verdict": verdict, "refs": refs, "note": note,
                     "others": theirs, "disagree": bool(verdict and any(o["verdict"] != verdict for o in theirs))})
    positions = [k.position for k in skeleton_steps]
    labelled = sum(1 for r in rows if r["verdict"])
    return {
        "trace": trace, "study": trace.study, "problem": trace.problem, "membership": membership,
        "review": my_review, "version": my_review.version if my_review else 0, "revealed": revealed,
        "blind_hidden": not revealed, "sees_everything": review.sees_everything(membership),
        "skeleton": [{"position": k.position, "html": render_inline(k.text), "covered": k.position in covered}
                     for k in skeleton_steps],
        "positions": positions, "rows": rows, "labelled": labelled, "first_error": first_error,
        "rows_html": step_rows_html(rows, positions, first_error),
        "coverage": len(covered & set(positions)),
        "statement_html": render_markdown(trace.problem.statement),
        "raw_html": raw_with_boundaries(trace.raw, [(index, start, end) for _, index, _, start, end in steps]),
        "has_offsets": any(start is not None for _, _, _, start, _ in steps),
        "regime_rows": regime_rows(trace.regime or {}),
        "verdicts": Verdict.values, "flags": [f for f in TraceReview.Flag.choices if f[0]],
        "ratings": range(11),
    }


def regime_rows(values: dict) -> list[tuple[str, str | None]]:
    """The regime's keys in the spec's order (PostgreSQL's jsonb keeps no order), then the source's own;
    lists and numbers as JSON (["Question:"], 0.0), not Python's repr; None stays None ("not recorded")."""
    keys = [k for k in REGIME_KEYS if k in values] + sorted(k for k in values if k not in REGIME_KEYS)
    return [(k, values[k] if isinstance(values[k], str) or values[k] is None else json.dumps(values[k])) for k in keys]


@member_view
@require_GET
def trace(request: HttpRequest, trace_id: int) -> HttpResponse:
    trace, membership = _trace_for(request, trace_id)
    return render(request, "annotation/review.html", _review_context(request, trace, membership))


def _posted_labels(request: HttpRequest, trace: Trace) -> tuple[dict, list[review.LabelIn], list[tuple[str, str]]]:
    posted: dict[int, tuple[str, list[int], str]] = {}
    labels: list[review.LabelIn] = []
    errors: list[tuple[str, str]] = []
    for i in range(1, trace.n_steps + 1):
        verdict = request.POST.get(f"v{i}", "")
        refs = []
        for r in request.POST.getlist(f"r{i}"):
            if r.isdigit():
                refs.append(int(r))
        note = request.POST.get(f"n{i}", "")
        posted[i] = (verdict, refs, note)
        if verdict:
            labels.append(review.LabelIn(i, verdict, refs, note))
        elif note.strip():
            errors.append((f"step {i}", "has a note but no verdict"))
    return posted, labels, errors


_REVIEW_ACTIONS = {"save", "next", "skip", *(f"flag:{v}" for v in TraceReview.Flag.values)}


def _answer_choice(value: str):
    return {"correct": True, "wrong": False, "auto": None}.get(value, review.UNSET)


@member_view
@require_POST
def trace_review(request: HttpRequest, trace_id: int) -> HttpResponse:
    """Save my labels (htmx or plain form), then stay, go to the next trace,
    skip, or flag. Answers 409 when the page's version is stale."""
    trace, membership = _trace_for(request, trace_id)
    action = request.POST.get("action", "save")
    if action not in _REVIEW_ACTIONS:
        action = "save"
    posted, labels, errors = _posted_labels(request, trace)
    try:
        version = int(request.POST.get("version", "0"))
    except ValueError:
        version = -1
    rating_raw = request.POST.get("rating", "").strip()
    try:
        rating = float(rating_raw) if rating_raw else None
    except ValueError:
        errors.append(("rating", "a rating is a number from 0 to 10"))
        rating = None
    message, status, result = "", 200, None
    if not errors:
        try:
            result = review.do_save_labels(
                trace, request.user, version=version, labels=labels, rating=rating,
                answer_correct=_answer_choice(request.POST.get("answer", "")), via=review.VIA_WEB,
            )
        except review.ReviewError as exc:
            errors = exc.errors
        except review.Conflict as exc:
            message, status = str(exc), 409
    if errors:
        message, status = "Not saved: " + "; ".join(f"{f} {m}" if f.startswith("step") else f"{f}: {m}"
                                                   for f, m in errors), 400
    if status == 200:
        if action == "skip":
            review.do_skip(trace, request.user, True)
        elif action.startswith("flag:"):
            review.do_flag(trace, request.user, action[5:])
        if action in ("next", "skip"):
            nxt = review.next_trace_id(trace.study, request.user, after=trace)
            url = reverse("trace", args=[nxt]) if nxt else reverse("queue", args=[trace.study_id]) + "?done=1"
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
        if request.htmx and result and result.became_complete and not review.sees_everything(membership):
            # The others' labels are now visible: reload the page to show them.
            messages.success(request, "Trace complete: the other labels are now shown beside yours.")
            return HttpResponseClientRefresh()
        rev = result.review if result else None
        saved = rev.version if rev else version
        if action.startswith("flag:"):
            message = "Flag cleared." if action == "flag:" else f"Flagged: {dict(TraceReview.Flag.choices)[action[5:]]}."
        elif result and result.changed_labels == 0 and rev is None:
            message = "Nothing to save yet."
        else:
            message = f"Saved (version {saved}) · {len(labels)}/{trace.n_steps} steps labelled" + (
                " · complete" if rev and rev.complete else "")
        if not request.htmx:
            messages.success(request, message)
            return redirect("trace", trace_id=trace.pk)
        return render(request, "annotation/review.html#status",
                      {"message": message, "level": "ok", "version": saved, "oob": True})
    # 400 or 409
    if request.htmx:
        return render(request, "annotation/review.html#status",
                      {"message": message, "level": "conflict" if status == 409 else "error",
                       "reload_url": reverse("trace", args=[trace.pk]) if status == 409 else ""},
                      status=status)
    context = _review_context(request, trace, membership, posted=None if status == 409 else posted)
    context.update({"message": message, "level": "conflict" if status == 409 else "error"})
    return render(request, "annotation/review.html", context, status=status)


# --------------------------------------------------------------------------
# Queues


@member_view
@require_GET
def queue(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    user = request.user
    mine = TraceReview.objects.filter(trace=OuterRef("trace"), annotator=user)
    qs = (
        Assignment.objects.filter(study=study, annotator=user)
        .select_related("trace__problem")
        .annotate(done=Exists(mine.filter(complete=True)), skipped=Exists(mine.filter(skipped=True, complete=False)),
                  started=Exists(mine.filter(version__gt=0)))
        .order_by("position")
    )
    qs = review.filter_traces(qs, request.GET, study, membership, prefix="trace__")
    status = request.GET.get("status", "todo")
    if status == "todo":
        qs = qs.filter(done=False, skipped=False)
    elif status == "done":
        qs = qs.filter(done=True)
    elif status == "skipped":
        qs = qs.filter(skipped=True)
    page = Paginator(qs, 50).get_page(request.GET.get("page"))
    form = None
    if membership.is_owner:
        members_qs = Membership.objects.filter(study=study).select_related("user").order_by("user__username")
        form = AssignForm(members=list(members_qs))
    has_assignments = Assignment.objects.filter(study=study, annotator=user).exists()
    context = {
        "study": study, "membership": membership, "page": page, "status": status,
        "progress": review.annotator_progress(study), "assign_form": form, "has_assignments": has_assignments,
        "next_id": review.next_trace_id(study, user), "query": _page_query(request),
        "status_choices": [("todo", "to do"), ("done", "done"), ("skipped", "skipped"), ("all", "all")],
        **_trace_filter_context(request, study),
    }
    template = "annotation/queue.html#rows" if request.htmx else "annotation/queue.html"
    return render(request, template, context)


@member_view
@require_POST
def queue_assign(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    access.check_owner(membership, "assigning traces")
    if request.POST.get("action") == "clear":
        n = review.do_clear_assignments(study)
        messages.success(request, f"Removed {n} assignments (labels are kept).")
        return redirect("queue", study_id=study.pk)
    members_qs = list(Membership.objects.filter(study=study).select_related("user").order_by("user__username"))
    form = AssignForm(request.POST, members=members_qs)
    if form.is_valid():
        users = list(get_user_model().objects.filter(pk__in=form.cleaned_data["annotators"]).order_by("username"))
        try:
            n = review.do_assign(study, request.user, users, form.cleaned_data["k"],
                                 stratify=form.cleaned_data["stratify"],
                                 only_unassigned=form.cleaned_data["only_unassigned"])
            messages.success(request, f"Made {n} assignments.")
        except review.AssignError as exc:
            messages.error(request, str(exc))
    else:
        messages.error(request, "Check the assignment form: " + "; ".join(
            f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
    return redirect("queue", study_id=study.pk)


# --------------------------------------------------------------------------
# Adjudication


@member_view
@require_GET
def adjudication(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    access.check_adjudicator(membership, "adjudication")
    status = request.GET.get("status", "open")
    if status not in ("open", "resolved", "all"):
        status = "open"
    qs = review.disagreement_steps(study, status)
    if request.GET.get("model"):
        qs = qs.filter(trace__model=request.GET["model"])
    qs = qs.select_related("trace__problem__approved_skeleton").prefetch_related(
        Prefetch("labels", queryset=StepLabel.objects.select_related("annotator", "judge").order_by("kind", "pk"))
    )
    page = Paginator(qs, 20).get_page(request.GET.get("page"))
    items = [_adjudication_item(step, study) for step in page]
    context = {"study": study, "membership": membership, "page": page, "items": items, "status": status,
               "query": _page_query(request), "models": review.study_models(study), "model": request.GET.get("model", "")}
    return render(request, "annotation/adjudication.html", context)


def _adjudication_item(step: Step, study: Study, error: str = "", level: str = "") -> dict:
    labels = list(step.labels.all())
    final = next((lab for lab in labels if lab.kind == StepLabel.Kind.ADJUDICATION), None)
    shown = [
        {"source": review.source_name(lab), "kind": lab.kind, "verdict": lab.verdict, "refs": lab.skeleton_refs or [],
         "reason_html": render_markdown(lab.reason), "confidence": lab.confidence,
         "primary": lab.kind == StepLabel.Kind.JUDGE and lab.judge_id == study.primary_judge_id}
        for lab in labels if lab.kind != StepLabel.Kind.ADJUDICATION
    ]
    return {"step": step, "trace": step.trace, "labels": shown, "final": final,
            "final_reason_html": render_markdown(final.reason) if final else "",
            "version": final.version if final else 0, "l_gold": step.trace.problem.l_gold,
            "positions": range(1, step.trace.problem.l_gold + 1), "error": error, "level": level}


@member_view
@require_POST
def adjudicate(request: HttpRequest, step_id: int) -> HttpResponse:
    step, membership = access.check_object(request.user, Step.objects.select_related("trace__problem", "trace__study"),
                                           step_id, study_path="trace__study_id", what="step")
    study = membership.study
    access.check_adjudicator(membership, "adjudication")
    try:
        version = int(request.POST.get("version", "0"))
    except ValueError:
        version = -1
    refs = [int(r) for r in request.POST.getlist("refs") if r.isdigit()]
    error, level, status = "", "ok", 200
    try:
        review.do_adjudicate(step, request.user, version=version, verdict=request.POST.get("verdict", ""),
                             skeleton_refs=refs, reason=request.POST.get("reason", ""), via=review.VIA_WEB)
        error = "Final verdict saved."
    except review.ReviewError as exc:
        error, level, status = "; ".join(f"{f}: {m}" for f, m in exc.errors), "error", 400
    except review.Conflict as exc:
        error, level, status = str(exc), "conflict", 409
    if not request.htmx:
        if status == 200:
            messages.success(request, error)
        else:
            messages.error(request, error)
        return redirect(safe_next(request, reverse("adjudication", args=[study.pk])))
    step = Step.objects.select_related("trace__problem").prefetch_related(
        Prefetch("labels", queryset=StepLabel.objects.select_related("annotator", "judge").order_by("kind", "pk"))
    ).get(pk=step.pk)
    item = _adjudication_item(step, study, error, level)
    return render(request, "annotation/adjudication.html#item", {"item": item, "study": study}, status=status)
