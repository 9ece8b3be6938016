"""Studies, their members, the signed-in user's profile, imports and jobs."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.forms import PasswordChangeForm
from django.db import IntegrityError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation import access, errors, jobs, members, services, study_summary
from annotation.forms import AccountForm, ImportForm, MemberForm, StudyForm
from annotation.middleware import refusals_into
from annotation.models import Job, Membership, Problem, Study
from annotation.review.progress import study_progress, visible_progress
from annotation.views.base import member_view, study_for


@member_view
@require_GET
def studies(request: HttpRequest) -> HttpResponse:
    memberships = list(Membership.objects.filter(user=request.user).select_related("study").order_by("study__name"))
    problems = dict(
        Problem.objects.filter(study__in=[m.study_id for m in memberships]).own().values("study")
        .annotate(n=Count("pk")).values_list("study", "n")
    )
    progress = study_progress([m.study_id for m in memberships], request.user)
    stale = study_summary.status([m.study_id for m in memberships])  # counts the score job is recomputing
    rows = [{"m": m, "n_problems": problems.get(m.study_id, 0), "stale": stale.get(m.study_id),
             **visible_progress(progress[m.study_id], m)} for m in memberships]
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
    study, membership = study_for(request, study_id)
    return render(request, "annotation/study.html", _study_context(request, study, membership))


def _study_context(request: HttpRequest, study: Study, membership: Membership,
                   import_form: ImportForm | None = None) -> dict:
    # Stored by the score job with the review progress when current (annotation.study_summary).
    summary = study_summary.stored(study)  # read once for the table, progress and note
    stored = summary.counts if summary is not None else None
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
        "summary_status": summary.status if summary is not None else None,
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
    study, membership = study_for(request, study_id)
    form, account_form = MemberForm(), AccountForm()
    status = 200
    created: dict | None = None  # the new account's secret, shown in this one response only
    if request.method == "POST":
        access.check_owner(membership, "managing members")
        action = request.POST.get("action", "set")
        with refusals_into(form):  # a MemberError (an unknown user or role, the last owner) under its field
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
                    m = None
                    with refusals_into(account_form):
                        m, secret = members.do_create_account(study, data["username"], data["role"],
                                                              handover=data["handover"], by=request.user)
                    if m is not None:
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
        if form.errors:  # refused above
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
    study, membership = study_for(request, study_id)
    if request.method == "GET":
        # A refused upload answers on this URL; reloading it, or coming back to it, is the upload form again
        # (it answered 405, a dead end for a researcher who had just been told what to fix).
        return redirect(reverse("study", args=[study.pk]) + "#upload")
    access.check_owner(membership, "importing traces")
    form = ImportForm(request.POST, request.FILES)
    if form.is_valid():
        data = form.cleaned_data
        job = None
        with refusals_into(form):  # the import's refusal (a format, an option) under its field
            job = services.do_queue_import(study, data["file"], fmt=data["format"], skip_invalid=data["skip_invalid"],
                                           user=request.user, results=data.get("results"),
                                           model=data.get("model", "").strip(),
                                           options={k: data[k] for k in ("instances", "seed")
                                                    if data.get(k) is not None},
                                           thought_segmenter=data.get("thought_segmenter", ""))
        if job is not None:
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
