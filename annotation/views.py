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
import math
from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth import get_user_model, update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.core.paginator import Paginator
from django.db import IntegrityError
from django.db.models import Case, Count, Exists, F, OuterRef, Prefetch, Q, TextField, Value, When
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.text import capfirst
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh

from annotation import access, errors, jobs, members, services, skeletons, study_summary
from annotation.forms import AccountForm, AssignForm, ImportForm, MemberForm, StudyForm, parse_skeleton_rows
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
from annotation.review.adjudication import disagreement_steps, do_adjudicate
from annotation.review.base import UNSET, VIA_WEB, Conflict, ReviewError
from annotation.review.filters import filter_traces, study_models, visible_trace_filters
from annotation.review.labels import LabelIn, do_flag, do_save_labels, do_skip
from annotation.review.progress import study_progress, visible_annotator_progress, visible_progress
from annotation.review.queues import AssignError, do_assign, do_clear_assignments, next_trace_id
from annotation.review.visibility import is_revealed, sees_everything, source_name, visible_label_rows
from reasonlib.ids import is_id

OWNER, ADJUDICATOR, ANNOTATOR = Membership.Role.OWNER, Membership.Role.ADJUDICATOR, Membership.Role.ANNOTATOR


def member_view(view):
    """login_required; refusals (annotation.access.AccessDenied) are rendered
    by ``permission_denied`` below, the same way on every page."""
    return login_required(view)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler403`` of the project: an outsider's refusal is a plain 404 (a
    study's existence is not revealed), a member's a 403 naming the role."""
    if isinstance(exception, access.AccessDenied) and exception.outsider:
        return errors.page_not_found(request, Http404(str(exception)))
    reason = str(exception) if isinstance(exception, access.AccessDenied) else "you may not do this"
    return errors.render_error(request, 403, capfirst(reason))  # a sentence: "Adjudication is for owners ..."


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
        Problem.objects.filter(study__in=[m.study_id for m in memberships]).own().values("study")
        .annotate(n=Count("pk")).values_list("study", "n")
    )
    progress = study_progress([m.study_id for m in memberships], request.user)
    rows = [{"m": m, "n_problems": problems.get(m.study_id, 0), **visible_progress(progress[m.study_id], m)}
            for m in memberships]
    return render(request, "annotation/studies.html", {"rows": rows, "memberships": memberships,
                                                       "invitations": members.pending_invitations(request.user)})


@member_view
@require_POST
def invitation_respond(request: HttpRequest, invitation_id: int) -> HttpResponse:
    """Accept or decline one of my invitations (``action=accept|decline``); another's answers 404."""
    accept = request.POST.get("action") == "accept"
    m = members.do_respond(request.user, invitation_id, accept)
    if m is not None:
        messages.success(request, f"You joined {m.study.name} as {m.role}.")
        return redirect("study", study_id=m.study_id)
    messages.success(request, "Invitation declined." if not accept else "You are a member already.")
    return redirect("studies")


@member_view
@require_GET
def study(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    return render(request, "annotation/study.html", _study_context(request, study, membership))


def _study_context(request: HttpRequest, study: Study, membership: Membership,
                   import_form: ImportForm | None = None) -> dict:
    # Stored by the score job with the review progress when current (annotation.study_summary).
    stored = study_summary.stored_counts(study)  # read once for the table and the progress
    counts = stored["by_model"] if stored is not None else study_summary.by_model(study)
    model_rows = []
    for row in counts["models"]:
        row["accuracy"] = row["correct"] / row["traces"] if row["traces"] else None
        model_rows.append(row)
    recent_jobs = Job.objects.filter(study=study).order_by("-created_at")[:10]
    return {
        "study": study,
        "membership": membership,
        "model_rows": model_rows,
        "n_problems": counts["problems"],
        "progress": visible_progress(study_summary.study_progress(
            [study.pk], request.user, stored={study.pk: stored} if stored is not None else {})[study.pk], membership),
        "jobs": [(job, jobs.live_progress(job)) for job in recent_jobs],
        "import_form": (import_form or ImportForm()) if membership.is_owner else None,
    }


@member_view
@require_http_methods(["GET", "POST"])
def study_create(request: HttpRequest) -> HttpResponse:
    """Any signed-in user may start a study; they become its owner (as with ``POST /api/v1/studies/``)."""
    form = StudyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            study = services.do_create_study(data["name"], owner=request.user, description=data["description"],
                                             blind=data["blind"], segmenter=data["segmenter"],
                                             # Not given (an older client's post): the model's default.
                                             **({"thought_segmenter": data["thought_segmenter"]}
                                                if data.get("thought_segmenter") else {}))
        except IntegrityError:  # lost a race with another request for the same name
            form.add_error("name", "A study with this name already exists.")
        else:
            messages.success(request, f"Created the study {study.name}; you are its owner.")
            return redirect("study", study_id=study.pk)
    return render(request, "annotation/study_form.html", {"form": form},
                  status=400 if form.is_bound and form.errors else 200)


@member_view
@require_http_methods(["GET", "POST"])
def study_members(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    form, account_form = MemberForm(), AccountForm()
    status = 200
    created: dict | None = None  # the new account's secret, shown in this one response only
    if request.method == "POST":
        access.check_owner(membership, "managing members")
        action = request.POST.get("action", "set")
        try:
            if action == "remove":
                members.do_remove_member(study, request.POST.get("username", ""))
                messages.success(request, f"Removed {request.POST.get('username')}.")
                return redirect("study-members", study_id=study.pk)
            if action == "create":
                if not members.creates_accounts(request.user):  # the card is not shown to them: a page says why
                    return errors.render_error(request, 400, members.CREATE_ACCOUNTS_REFUSAL,
                                               back=reverse("study-members", args=[study.pk]),
                                               back_label="Back to the members")
                account_form = AccountForm(request.POST)
                if account_form.is_valid():
                    data = account_form.cleaned_data
                    try:
                        m, secret = members.do_create_account(study, data["username"], data["role"],
                                                              handover=data["handover"], by=request.user)
                    except members.MemberError as exc:
                        account_form.add_error("username", str(exc))
                    else:
                        created = {"username": m.user.username, "role": m.role, "handover": data["handover"],
                                   "secret": secret if data["handover"] == members.HANDOVER_PASSWORD
                                   else request.build_absolute_uri(secret)}
                        account_form = AccountForm()
                if not created:
                    status = 400
            else:
                form = MemberForm(request.POST)
                if form.is_valid():
                    name, role = form.cleaned_data["username"], form.cleaned_data["role"]
                    m = members.do_invite(study, name, role, by=request.user)
                    messages.success(request, f"{m.user.username} is now {m.role}." if m is not None
                                     else members.invited_message(name, role))
                    return redirect("study-members", study_id=study.pk)
                status = 400
        except members.MemberError as exc:
            form.add_error(None, str(exc))
            status = 400
    rows = Membership.objects.filter(study=study).select_related("user").order_by("role", "user__username")
    response = render(request, "annotation/members.html",
                      {"study": study, "membership": membership, "rows": rows, "form": form,
                       "account_form": account_form, "created": created, "roles": Membership.Role.values},
                      status=status)
    if created:
        response["Cache-Control"] = "no-store"  # the one-time password must not stay in a cache
    return response


NEW_KEY_SESSION = "profile-new-api-key"


@member_view
@require_http_methods(["GET", "POST"])
def profile(request: HttpRequest) -> HttpResponse:
    """The signed-in user's own account: their API token (made and revoked here, the key shown once) and
    their password."""
    # A new key is shown once, on the GET after the POST that made it (post/redirect/get): rendered in the POST's
    # answer, a reload re-sent the POST and silently replaced the token just copied.
    new_key = request.session.pop(NEW_KEY_SESSION, "") if request.method == "GET" else ""
    password_form = PasswordChangeForm(request.user)
    status = 200
    if request.method == "POST":
        action = request.POST.get("action", "")
        if action == "token-create":
            request.session[NEW_KEY_SESSION] = services.do_create_api_token(request.user)
            return redirect("profile")
        elif action == "token-revoke":
            if services.do_revoke_api_token(request.user):
                messages.success(request, "Your API token is revoked; requests with it are refused from now on.")
            return redirect("profile")
        elif action == "password":
            password_form = PasswordChangeForm(request.user, request.POST)
            if password_form.is_valid():
                user = password_form.save()
                update_session_auth_hash(request, user)  # stay signed in on this browser
                messages.success(request, "Your password is changed.")
                return redirect("profile")
            status = 400
        else:
            return errors.render_error(request, 400, f"action: unknown value {action!r}", back=reverse("profile"),
                                       back_label="Back to your profile")
    token = services.api_token_of(request.user)
    memberships = Membership.objects.filter(user=request.user).select_related("study").order_by("study__name")
    response = render(request, "annotation/profile.html",
                      {"token": token, "new_key": new_key, "password_form": password_form,
                       "memberships": memberships}, status=status)
    if new_key:
        response["Cache-Control"] = "no-store"
    return response


@member_view
@require_http_methods(["GET", "POST"])
def study_import(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    if request.method == "GET":
        # A refused upload answers on this URL; reloading it, or coming back to it, is the upload form again
        # (it answered 405, a dead end for a researcher who had just been told what to fix).
        return redirect(reverse("study", args=[study.pk]) + "#upload")
    access.check_owner(membership, "importing traces")
    form = ImportForm(request.POST, request.FILES)
    if form.is_valid():
        data = form.cleaned_data
        try:
            job = services.do_queue_import(study, data["file"], fmt=data["format"], skip_invalid=data["skip_invalid"],
                                           user=request.user, results=data.get("results"),
                                           model=data.get("model", "").strip(),
                                           options={k: data[k] for k in ("instances", "seed")
                                                    if data.get(k) is not None},
                                           thought_segmenter=data.get("thought_segmenter", ""))
        except ValueError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("job", job_id=job.pk)
    if request.htmx:
        return render(request, "annotation/import_form.html", {"study": study, "import_form": form}, status=400)
    # A plain form post gets the whole study page back, the form showing its errors in place.
    return render(request, "annotation/study.html", _study_context(request, study, membership, form), status=400)


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


def _trace_filter_context(request: HttpRequest, study: Study, membership: Membership) -> dict:
    return {
        "models": study_models(study),
        "f": {k: request.GET.get(k, "") for k in ("model", "domain", "answer_correct", "flagged", "lucky_guess",
                                                  "disagreement", "needs_review", "status")},
        # The filters the visibility gate lets this member use (lucky_guess only once scoring registered it).
        "usable": visible_trace_filters(membership),
    }


@member_view
@require_GET
def trace_list(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    # Suite variants' traces show only when asked for (?suites=1).
    suites = request.GET.get("suites") == "1"
    qs = Trace.objects.filter(study=study).in_scope(suites).select_related("problem") \
        .order_by("problem_id", "model", "pk")
    qs = filter_traces(qs, request.GET, study, membership)
    page = Paginator(qs, 50).get_page(request.GET.get("page"))
    mine = {
        r.trace_id: r for r in TraceReview.objects.filter(annotator=request.user, trace__in=[t.pk for t in page])
    }
    for t in page:
        t.my_review = mine.get(t.pk)
    context = {"study": study, "membership": membership, "page": page, "query": _page_query(request),
               **_trace_filter_context(request, study, membership)}
    template = "annotation/trace_list.html#rows" if request.htmx else "annotation/trace_list.html"
    return render(request, template, context)


@member_view
@require_GET
def problem_list(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    f = {k: request.GET.get(k, "") for k in ("domain", "tag", "skeleton", "q", "suites")}
    # Fidelity variants belong to their suite: listed only with ?suites=1.
    qs = Problem.objects.filter(study=study).in_scope(f["suites"] == "1").order_by("problem_id")
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
    if wanted and is_id(wanted):
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


#: Thought steps per collapsible block of the review page; a thought longer than one block is
#: shown in blocks whose rows htmx loads when they come into view (docs/review.md, "Long thoughts").
THOUGHT_BLOCK = 100


def _labels_by_step(trace: Trace, user, revealed: bool) -> tuple[dict[int, dict], dict[int, list[dict]]]:
    """My labels and the others' visible ones, by step pk (one query)."""
    mine: dict[int, dict] = {}
    others: dict[int, list[dict]] = {}
    for lab in visible_label_rows(trace, user, revealed):
        if lab["kind"] == StepLabel.Kind.HUMAN and lab["annotator_id"] == user.pk:
            mine[lab["step_id"]] = lab
        else:
            others.setdefault(lab["step_id"], []).append({
                "kind": lab["kind"], "source": lab["source"], "verdict": lab["verdict"],
                "refs": lab["skeleton_refs"] or [], "reason": lab["reason"], "confidence": lab["confidence"],
            })
    return mine, others


def _review_rows(steps, mine: dict[int, dict], others: dict[int, list[dict]], *, posted=None) -> list[dict]:
    """One dict per step (index, channel, text, my verdict/refs/note, the others' labels) in reading order."""
    rows = []
    for pk, index, text, _, _, channel in steps:
        if posted is not None and index in posted:
            verdict, refs, note = posted[index]
        else:
            lab = mine.get(pk)
            verdict, refs, note = (lab["verdict"], lab["skeleton_refs"] or [], lab["reason"]) if lab else ("", [], "")
        theirs = others.get(pk, [])
        rows.append({"index": index, "channel": channel, "text": text, "verdict": verdict, "refs": refs,
                     "note": note, "others": theirs,
                     "disagree": bool(verdict and any(o["verdict"] != verdict for o in theirs)),
                     # any two visible verdicts differ (mine or a judge's): "next disagreement" stops here
                     "conflict": _conflict(verdict, theirs)})
    return rows


def _conflict(verdict: str, theirs: list[dict]) -> bool:
    """Two visible verdicts of a step differ (mine, if any, and the others')."""
    first = verdict
    for o in theirs:
        if not first:
            first = o["verdict"]
        elif o["verdict"] != first:
            return True
    return False


def thought_blocks(steps, mine: dict[int, dict], others: dict[int, list[dict]], *, posted=None,
                   size: int = THOUGHT_BLOCK) -> list[dict]:
    """The label summary of each block of ``size`` thought steps (what a collapsed block shows), with
    no per-step objects: a 5,000-step thought must cost little more than a short trace."""
    blocks: list[dict] = []
    for n, (pk, index, *_rest) in enumerate(steps):
        if n % size == 0:
            blocks.append({"number": len(blocks) + 1, "first": index, "last": index, "n": 0, "labelled": 0,
                           "counts": dict.fromkeys(Verdict.values, 0), "first_invalid": 0, "conflicts": 0})
        b = blocks[-1]
        if posted is not None and index in posted:
            verdict = posted[index][0]
        else:
            lab = mine.get(pk)
            verdict = lab["verdict"] if lab else ""
        b["last"] = index
        b["n"] += 1
        if verdict in b["counts"]:
            b["counts"][verdict] += 1
            b["labelled"] += 1
            if verdict == Verdict.INVALID and not b["first_invalid"]:
                b["first_invalid"] = index
        theirs = others.get(pk)
        if theirs and _conflict(verdict, theirs):
            b["conflicts"] += 1
    for b in blocks:
        b["unlabelled"] = b["n"] - b["labelled"]
    return blocks


def _my_choice(pk: int, index: int, mine: dict[int, dict], posted) -> tuple[str, list[int] | tuple[()]]:
    if posted is not None and index in posted:
        return posted[index][0], posted[index][1]
    lab = mine.get(pk)
    return (lab["verdict"], lab["skeleton_refs"] or ()) if lab else ("", ())


def _review_context(request: HttpRequest, trace: Trace, membership: Membership, *, posted=None) -> dict:
    """Everything the review page shows, in a fixed number of queries."""
    user = request.user
    my_review = TraceReview.objects.filter(trace=trace, annotator=user).first()
    revealed = is_revealed(membership, my_review)
    skeleton_steps = (
        list(SkeletonStep.objects.filter(skeleton_id=trace.problem.approved_skeleton_id).order_by("position"))
        if trace.problem.approved_skeleton_id else []
    )
    # A long thought is shown in blocks loaded on demand; the answer's rows are always on the page.
    windowed = trace.n_thought_steps > THOUGHT_BLOCK
    steps_qs = trace.steps.order_by("index")
    if windowed:  # the blocks' texts come with the blocks: not read here
        steps_qs = steps_qs.annotate(shown=Case(When(channel=Step.Channel.THOUGHT, then=Value("")), default=F("text"),
                                                output_field=TextField()))
    steps = list(steps_qs.values_list("pk", "index", "shown" if windowed else "text", "start", "end", "channel"))
    mine, others = _labels_by_step(trace, user, revealed)
    thought_steps = [s for s in steps if s[5] == Step.Channel.THOUGHT]
    answer_steps = [s for s in steps if s[5] != Step.Channel.THOUGHT]
    # The rows on the page: all of them, or the answer's when the thought comes in blocks.
    rows = _review_rows(answer_steps if windowed else steps, mine, others, posted=posted)
    blocks = thought_blocks(thought_steps, mine, others, posted=posted) if windowed else []
    first_error = None
    covered: set[int] = set()
    labelled = 0
    # Over every step, from the rows; a windowed thought from my labels (posted ones after a refused save).
    if not windowed:
        verdicts = ((r["index"], r["verdict"], r["refs"]) for r in rows)
    elif posted is None:
        index_of = {pk: index for pk, index, *_ in steps}
        verdicts = sorted((index_of[pk], lab["verdict"], lab["skeleton_refs"] or ()) for pk, lab in mine.items()
                          if pk in index_of)
    else:
        verdicts = ((index, *_my_choice(pk, index, mine, posted)) for pk, index, *_ in steps)
    for index, verdict, refs in verdicts:
        if verdict:
            labelled += 1
        if verdict == Verdict.INVALID and first_error is None:
            first_error = index
        if verdict == Verdict.VALID:
            covered.update(refs)
    positions = [k.position for k in skeleton_steps]
    page_rows = [r for r in rows if r["channel"] != Step.Channel.THOUGHT]
    return {
        "trace": trace, "study": trace.study, "problem": trace.problem, "membership": membership,
        "review": my_review, "version": my_review.version if my_review else 0, "revealed": revealed,
        "blind_hidden": not revealed, "sees_everything": sees_everything(membership),
        "skeleton": [{"position": k.position, "html": render_inline(k.text), "covered": k.position in covered}
                     for k in skeleton_steps],
        "positions": positions, "rows": rows, "n_rows": len(steps), "labelled": labelled, "first_error": first_error,
        "rows_html": step_rows_html(page_rows, positions, first_error),
        "windowed": windowed, "blocks": blocks, "n_thought": trace.n_thought_steps,
        "block_url": reverse("trace-thought", args=[trace.pk]),
        "thought_rows_html": (step_rows_html([r for r in rows if r["channel"] == Step.Channel.THOUGHT], positions,
                                             first_error) if trace.n_thought_steps and not windowed else ""),
        "coverage": len(covered & set(positions)),
        "statement_html": render_markdown(trace.problem.statement),
        "raw_html": raw_with_boundaries(trace.raw, [(index, start, end) for _, index, _, start, end, _ in answer_steps]),
        "has_offsets": any(start is not None for _, _, _, start, _, _ in answer_steps),
        # The separate reasoning field with its thought steps marked (all of them loaded only when not windowed).
        "thought_raw_html": raw_with_boundaries(trace.thought, [(i, a, b) for _, i, _, a, b, _ in thought_steps])
        if trace.n_thought_steps and not windowed else "",
        "regime_rows": regime_rows(trace.regime or {}),
        "verdicts": Verdict.values, "flags": [f for f in TraceReview.Flag.choices if f[0]],
        "ratings": range(11),
    }


@member_view
@require_GET
def trace_thought(request: HttpRequest, trace_id: int) -> HttpResponse:
    """The rows of one block of a long thought (``?block=k``, the review page's htmx loads), or with
    ``?q=text`` the steps of both channels whose text contains it (JSON: the page's search)."""
    trace, membership = _trace_for(request, trace_id)
    query = request.GET.get("q")
    if query is not None:
        query = query.strip()
        if not query:
            return JsonResponse({"q": "", "steps": []})
        hits = list(trace.steps.filter(text__icontains=query).order_by("index").values_list("index", flat=True)[:5000])
        return JsonResponse({"q": query, "steps": hits})
    try:
        block = int(request.GET.get("block", ""))
    except ValueError:
        return HttpResponse("block: give the block's number (1, 2, ...)", status=400, content_type="text/plain")
    first = (block - 1) * THOUGHT_BLOCK + 1
    last = min(trace.n_thought_steps, block * THOUGHT_BLOCK)
    if block < 1 or first > trace.n_thought_steps:
        return HttpResponse(f"block: this thought has {math.ceil(trace.n_thought_steps / THOUGHT_BLOCK)} block(s)",
                            status=404, content_type="text/plain")
    my_review = TraceReview.objects.filter(trace=trace, annotator=request.user).first()
    revealed = is_revealed(membership, my_review)
    steps = list(trace.steps.filter(index__gte=first, index__lte=last).order_by("index")
                 .values_list("pk", "index", "text", "start", "end", "channel"))
    mine, others = _labels_by_step(trace, request.user, revealed)
    rows = _review_rows(steps, mine, others)
    positions = list(SkeletonStep.objects.filter(skeleton_id=trace.problem.approved_skeleton_id)
                     .order_by("position").values_list("position", flat=True)) if trace.problem.approved_skeleton_id else []
    first_error = next((r["index"] for r in rows if r["verdict"] == Verdict.INVALID), None)
    return HttpResponse(step_rows_html(rows, positions, first_error))


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


def _posted_labels(request: HttpRequest, trace: Trace) -> tuple[dict, list[LabelIn], list[tuple[str, str]]]:
    posted: dict[int, tuple[str, list[int], str]] = {}
    labels: list[LabelIn] = []
    errors: list[tuple[str, str]] = []
    # A page that shows a long thought in blocks posts only the blocks it loaded: the steps it did
    # not show keep my labels as they are (every shown step posts its verdict radio, even "none").
    windowed = request.POST.get("windowed") == "1"
    kept: dict[int, tuple[str, list[int], str]] = {}
    if windowed:
        kept = {index: (verdict, list(refs or []), reason or "") for index, verdict, refs, reason in StepLabel.objects.filter(
            step__trace=trace, kind=StepLabel.Kind.HUMAN, annotator=request.user,
        ).values_list("step__index", "verdict", "skeleton_refs", "reason")}
    for i in range(1, trace.n_steps + 1):
        if windowed and f"v{i}" not in request.POST:
            if i in kept:
                verdict, refs, note = kept[i]
                labels.append(LabelIn(i, verdict, refs, note))
            continue
        verdict = request.POST.get(f"v{i}", "")
        refs = []
        for r in request.POST.getlist(f"r{i}"):
            if is_id(r):
                refs.append(int(r))
        note = request.POST.get(f"n{i}", "")
        posted[i] = (verdict, refs, note)
        if verdict:
            labels.append(LabelIn(i, verdict, refs, note))
        elif note.strip():
            errors.append((f"step {i}", "has a note but no verdict"))
    return posted, labels, errors


_REVIEW_ACTIONS = {"save", "next", "skip", *(f"flag:{v}" for v in TraceReview.Flag.values)}


def _answer_choice(value: str):
    return {"correct": True, "wrong": False, "auto": None}.get(value, UNSET)


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
            result = do_save_labels(
                trace, request.user, version=version, labels=labels, rating=rating,
                answer_correct=_answer_choice(request.POST.get("answer", "")), via=VIA_WEB,
            )
        except ReviewError as exc:
            errors = exc.errors
        except Conflict as exc:
            message, status = str(exc), 409
    if errors:
        message, status = "Not saved: " + "; ".join(f"{f} {m}" if f.startswith("step") else f"{f}: {m}"
                                                   for f, m in errors), 400
    if status == 200:
        if action == "skip":
            do_skip(trace, request.user, True)
        elif action.startswith("flag:"):
            do_flag(trace, request.user, action[5:])
        if action in ("next", "skip"):
            nxt = next_trace_id(trace.study, request.user, after=trace)
            url = reverse("trace", args=[nxt]) if nxt else reverse("queue", args=[trace.study_id]) + "?done=1"
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
        if request.htmx and result and result.became_complete and not sees_everything(membership):
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
    qs = filter_traces(qs, request.GET, study, membership, prefix="trace__")
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
        "progress": visible_annotator_progress(study, membership), "assign_form": form, "has_assignments": has_assignments,
        "next_id": next_trace_id(study, user), "query": _page_query(request),
        "status_choices": [("todo", "to do"), ("done", "done"), ("skipped", "skipped"), ("all", "all")],
        **_trace_filter_context(request, study, membership),
    }
    template = "annotation/queue.html#rows" if request.htmx else "annotation/queue.html"
    return render(request, template, context)


@member_view
@require_POST
def queue_assign(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    access.check_owner(membership, "assigning traces")
    if request.POST.get("action") == "clear":
        n = do_clear_assignments(study)
        messages.success(request, f"Removed {n} assignments (labels are kept).")
        return redirect("queue", study_id=study.pk)
    members_qs = list(Membership.objects.filter(study=study).select_related("user").order_by("user__username"))
    form = AssignForm(request.POST, members=members_qs)
    if form.is_valid():
        users = list(get_user_model().objects.filter(pk__in=form.cleaned_data["annotators"]).order_by("username"))
        try:
            n = do_assign(study, request.user, users, form.cleaned_data["k"],
                                 stratify=form.cleaned_data["stratify"],
                                 only_unassigned=form.cleaned_data["only_unassigned"])
            messages.success(request, f"Made {n} assignments.")
        except AssignError as exc:
            messages.error(request, str(exc))
    else:
        messages.error(request, "Check the assignment form: " + "; ".join(
            f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
    return redirect("queue", study_id=study.pk)


# --------------------------------------------------------------------------
# Adjudication


#: The adjudication page's "Show" filter (?status=): the words the page shows; "resolved" is the older name.
ADJUDICATION_SHOW = {"open": "open", "settled": "resolved", "resolved": "resolved", "all": "all"}


@member_view
@require_GET
def adjudication(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    access.check_adjudicator(membership, "adjudication")
    return _adjudication_page(request, study, membership)


def _adjudication_page(request: HttpRequest, study: Study, membership: Membership, *, failed: dict | None = None,
                       status: int = 200, next_url: str = "") -> HttpResponse:
    """The page of disagreements, filtered by the query string (``status``, ``model``, ``page``). ``failed``
    re-shows one item as it was posted, with its error, when a plain (non-htmx) post was refused."""
    show = request.GET.get("status", "open")
    if show not in ADJUDICATION_SHOW:
        show = "open"
    qs = disagreement_steps(study, ADJUDICATION_SHOW[show])
    if request.GET.get("model"):
        qs = qs.filter(trace__model=request.GET["model"])
    qs = qs.select_related("trace__problem__approved_skeleton").prefetch_related(
        Prefetch("labels", queryset=StepLabel.objects.select_related("annotator", "judge").order_by("kind", "pk"))
    )
    page = Paginator(qs, 20).get_page(request.GET.get("page"))
    items = []
    for step in page:
        if failed and failed["step"] == step.pk:
            items.append(_adjudication_item(step, study, failed["error"], failed["level"], posted=failed["posted"]))
            failed = None
        else:
            items.append(_adjudication_item(step, study))
    if failed:  # the refused step is not on this page of the filter: show it first, so the error is seen
        step = qs.model.objects.select_related("trace__problem").prefetch_related(
            Prefetch("labels", queryset=StepLabel.objects.select_related("annotator", "judge").order_by("kind", "pk"))
        ).get(pk=failed["step"])
        items.insert(0, _adjudication_item(step, study, failed["error"], failed["level"], posted=failed["posted"]))
    _add_steps_before(items)
    context = {"study": study, "membership": membership, "page": page, "items": items, "status": show,
               "query": _page_query(request), "models": study_models(study), "model": request.GET.get("model", ""),
               "next_url": next_url or request.get_full_path()}
    return render(request, "annotation/adjudication.html", context, status=status)


#: How many steps before a disputed step its adjudication item shows (a claim often rests on the step before it).
STEPS_BEFORE = 3


def _add_steps_before(items: list[dict]) -> None:
    """Each item's ``before``: the disputed step's last STEPS_BEFORE predecessors in its trace, read for the whole
    page in one query (a thought can have thousands of steps: never the whole prefix)."""
    if not items:
        return
    wanted = Q()
    for item in items:
        step = item["step"]
        wanted |= Q(trace_id=step.trace_id, index__gte=step.index - STEPS_BEFORE, index__lt=step.index)
    before: dict[int, list[Step]] = {}
    for s in Step.objects.filter(wanted).only("pk", "trace_id", "index", "text", "channel").order_by("trace_id", "index"):
        before.setdefault(s.trace_id, []).append(s)
    for item in items:
        step = item["step"]
        item["before"] = [s for s in before.get(step.trace_id, []) if step.index - STEPS_BEFORE <= s.index < step.index]


def _adjudication_item(step: Step, study: Study, error: str = "", level: str = "", *, posted: dict | None = None) -> dict:
    """One disagreement. ``posted`` (verdict, refs, reason) is what a refused post sent: the form shows it
    again rather than the stored decision, so nothing typed is lost (issue 23 #11)."""
    labels = list(step.labels.all())
    final = next((lab for lab in labels if lab.kind == StepLabel.Kind.ADJUDICATION), None)
    shown = [
        {"source": source_name(lab), "kind": lab.kind, "verdict": lab.verdict, "refs": lab.skeleton_refs or [],
         "reason_html": render_markdown(lab.reason), "confidence": lab.confidence,
         "primary": lab.kind == StepLabel.Kind.JUDGE and lab.judge_id == study.primary_judge_id}
        for lab in labels if lab.kind != StepLabel.Kind.ADJUDICATION
    ]
    return {"step": step, "trace": step.trace, "labels": shown, "final": final,
            "final_reason_html": render_markdown(final.reason) if final else "",
            "version": final.version if final else 0, "l_gold": step.trace.problem.l_gold,
            "positions": range(1, step.trace.problem.l_gold + 1), "error": error, "level": level,
            "form": posted or {"verdict": final.verdict if final else "",
                               "refs": (final.skeleton_refs or []) if final else [],
                               "reason": final.reason if final else ""},
            "refused": bool(posted)}


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
    refs = [int(r) for r in request.POST.getlist("refs") if is_id(r)]
    error, level, status = "", "ok", 200
    try:
        do_adjudicate(step, request.user, version=version, verdict=request.POST.get("verdict", ""),
                             skeleton_refs=refs, reason=request.POST.get("reason", ""), via=VIA_WEB)
        error = "Final verdict saved."
    except ReviewError as exc:
        error, level, status = "; ".join(f"{f}: {m}" for f, m in exc.errors), "error", 400
    except Conflict as exc:
        error, level, status = str(exc), "conflict", 409
    posted = {"verdict": request.POST.get("verdict", ""), "refs": refs, "reason": request.POST.get("reason", "")}
    back = safe_next(request, reverse("adjudication", args=[study.pk]))
    if not request.htmx:
        if status == 200:
            messages.success(request, error)
            return redirect(back)
        if status == 400:
            # The page again, at the filters it was posted from, with this item as it was typed.
            request.GET = QueryDict(urlsplit(back).query)
            return _adjudication_page(request, study, membership, status=400, next_url=back,
                                      failed={"step": step.pk, "error": error, "level": level, "posted": posted})
        messages.error(request, error)
        return redirect(back)
    step = Step.objects.select_related("trace__problem").prefetch_related(
        Prefetch("labels", queryset=StepLabel.objects.select_related("annotator", "judge").order_by("kind", "pk"))
    ).get(pk=step.pk)
    item = _adjudication_item(step, study, error, level, posted=posted if status == 400 else None)
    _add_steps_before([item])
    return render(request, "annotation/adjudication.html#item", {"item": item, "study": study, "next_url": back},
                  status=status)
