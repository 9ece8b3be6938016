"""Analytics and profile pages. Each view starts with the membership check
(annotation.access: 404 for non-members), parses the filters kept in the URL, and reads stored
scores through ``scoring.analytics``; htmx requests get the page's partial."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation import access
from annotation.middleware import refusals_into, refusals_shown_on
from annotation.models import Job, Membership, Study
from scoring import analytics, charts, exports, services
from scoring.forms import ProfileForm
from scoring.models import ScoringProfile, TraceScore

PAGES = [
    ("scoring-leaderboard", "Leaderboard"),
    ("scoring-hazard", "Hazard & survival"),
    ("scoring-distributions", "Distributions"),
    ("scoring-lucky", "Lucky guesses"),
    ("scoring-ablations", "Ablations"),
    ("scoring-profiles", "Profiles"),
]
LUCKY_SORTS = {
    "process": "process", "-process": "-process", "holistic": "holistic", "-holistic": "-holistic",
    "model": "trace__model", "-model": "-trace__model", "first_error": "first_error", "-first_error": "-first_error",
    "n_steps": "n_steps", "-n_steps": "-n_steps", "trace": "trace__trace_id", "-trace": "-trace__trace_id",
}

LUCKY_COLUMNS = [("trace", "Trace", False), ("model", "Model", False), ("n_steps", "Steps", True),
                 ("first_error", "First error", True), ("process", "Process", True), ("holistic", "Holistic", True)]
METRICS = [("process", "process"), ("holistic", "holistic"), ("s_hcrs", "HCRS")]


def _study_for(request: HttpRequest, study_id: int) -> tuple[Study, Membership]:
    return access.check_study(request.user, study_id)


def _export_links(study: Study, sel: analytics.Selection, what: str, **extra: str) -> list[tuple[str, str]]:
    base = reverse("scoring-export", args=[study.pk])
    return [(fmt, f"{base}?{urlencode({'what': what, 'format': fmt, **sel.params(**extra)})}")
            for fmt in exports.FORMATS]


def _context(request: HttpRequest, study: Study, membership: Membership, sel: analytics.Selection,
             page: str, counts) -> dict:
    last_job = Job.objects.filter(study=study, kind=Job.Kind.SCORE).order_by("-created_at").first()
    return {
        "study": study,
        "membership": membership,
        "sel": sel,
        "page": page,
        "pages": PAGES,
        "query": urlencode(sel.params()),
        "choices": analytics.choices(counts),
        "score_set": sel.score_set,
        "last_job": last_job,
        "tau": sel.profile.as_profile().tau,
    }


def _render(request: HttpRequest, template: str, context: dict) -> HttpResponse:
    return render(request, f"{template}#body" if request.htmx else template, context)


def _selection(request: HttpRequest, study: Study, membership: Membership) -> analytics.Selection:
    """The page's filters; a filter that names nothing (analytics.BadFilter) is shown on the analytics'
    error page (400) by the refusal middleware."""
    refusals_shown_on(request, "scoring/bad_filter.html", study=study, pages=PAGES)
    return analytics.select(study, request.GET, membership)


@login_required
@require_GET
def leaderboard(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    sel = _selection(request, study, membership)
    counts = analytics.trace_counts(study)
    rows = analytics.leaderboard(sel, counts)
    model_rows = rows if sel.group == "model" else analytics.leaderboard(sel, counts, group="model")
    context = _context(request, study, membership, sel, "scoring-leaderboard", counts)
    context.update(
        rows=rows,
        hcrs_is_process=analytics.hcrs_is_process(rows),
        tiers=analytics.evidence_tiers(model_rows, study),
        headline=charts.headline(rows, sel.group),
        exports=_export_links(study, sel, "leaderboard"),
    )
    return _render(request, "scoring/leaderboard.html", context)


@login_required
@require_GET
def hazard(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    sel = _selection(request, study, membership)
    counts = analytics.trace_counts(study)
    context = _context(request, study, membership, sel, "scoring-hazard", counts)
    data = analytics.summary(sel.score_set, sel.model, sel.domain, context["tau"]) if sel.score_set else None
    by_model = data["hazard"] if data else {}
    colors = charts.palette(context["choices"]["models"])
    context.update(
        by_model=by_model,
        overall=data["hazard_all"] if data else [],
        histogram=data["histogram"] if data else [],
        hazard_chart=charts.hazard_curves(by_model, "hazard", "Hazard of the first error", "hazard h(t)", colors),
        survival_chart=charts.hazard_curves(by_model, "survival", "Survival: no error yet", "S(t)", colors),
        histogram_chart=charts.first_error_histogram(data["histogram"] if data else [], colors),
        hazard_exports=_export_links(study, sel, "hazard"),
        score_exports=_export_links(study, sel, "scores"),
        relative=data["relative_hazard"] if data else {},
        relative_chart=charts.relative_hazard_curves(data["relative_hazard"] if data else {}, colors),
        relative_exports=_export_links(study, sel, "relative-hazard"),
        recovery=data["recovery"] if data else [],
        # The thought-error section is about thoughts: without any in the selection it says so in one line.
        any_thought=any(r["traces_with_thought"] for r in (data["recovery"] if data else [])),
        recovery_chart=charts.recovery_bars(data["recovery"] if data else [], colors),
        recovery_exports=_export_links(study, sel, "recovery"),
        channels=sel.profile.as_profile().channels,
    )
    return _render(request, "scoring/hazard.html", context)


@login_required
@require_GET
def distributions(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    sel = _selection(request, study, membership)
    counts = analytics.trace_counts(study)
    context = _context(request, study, membership, sel, "scoring-distributions", counts)
    data = analytics.summary(sel.score_set, sel.model, sel.domain, context["tau"]) if sel.score_set else None
    dist = data["distributions"] if data else {}
    colors = charts.palette(context["choices"]["models"])
    context.update(
        distributions=dist,
        metrics=METRICS,
        quadrants=data["quadrants"] if data else {},
        scatter=data["scatter"] if data else {"shown": 0, "points": {}},
        n_scored=data["n"] if data else 0,
        process_chart=charts.boxes(dist, "process", "Process score per model", colors),
        holistic_chart=charts.boxes(dist, "holistic", "Holistic score per model", colors),
        scatter_chart=charts.lucky_scatter(data["scatter"] if data else {"points": {}}, context["tau"], colors),
        score_exports=_export_links(study, sel, "scores"),
        lucky_exports=_export_links(study, sel, "lucky-guesses"),
    )
    return _render(request, "scoring/distributions.html", context)


@login_required
@require_GET
def lucky_guesses(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    sel = _selection(request, study, membership)
    counts = analytics.trace_counts(study)
    context = _context(request, study, membership, sel, "scoring-lucky", counts)
    sort = request.GET.get("sort", "process")
    if sort not in LUCKY_SORTS:
        sort = "process"
    qs = TraceScore.objects.none()
    if sel.score_set:
        qs = (
            TraceScore.objects.filter(score_set=sel.score_set, lucky_guess=True)
            .select_related("trace__problem")
            .order_by(LUCKY_SORTS[sort], "trace_id")
        )
        if sel.model:
            qs = qs.filter(trace__model=sel.model)
        if sel.domain:
            qs = qs.filter(trace__problem__domain=sel.domain)
        if sel.restricted_user is not None:
            qs = qs.filter(trace__reviews__annotator=sel.restricted_user, trace__reviews__complete=True)
    page = Paginator(qs, 50).get_page(request.GET.get("page"))
    headers = []
    for key, label, numeric in LUCKY_COLUMNS:
        target = f"-{key}" if sort == key else key
        arrow = "▲" if sort == key else ("▼" if sort == f"-{key}" else "")
        headers.append({"label": label, "numeric": numeric, "arrow": arrow,
                        "query": urlencode({**sel.params(), "sort": target})})
    context.update(
        page_obj=page,
        sort=sort,
        headers=headers,
        sort_hidden={"sort": sort},
        page_query=urlencode({**sel.params(), "sort": sort}),
        restricted=sel.restricted_user is not None,
        channels=sel.profile.as_profile().channels,
        alpha=sel.profile.as_profile().alpha,
        exports=_export_links(study, sel, "lucky-guesses"),
    )
    return _render(request, "scoring/lucky_guesses.html", context)


@login_required
@require_GET
def ablations(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    sel = _selection(request, study, membership)
    counts = analytics.trace_counts(study)
    context = _context(request, study, membership, sel, "scoring-ablations", counts)
    profiles = analytics.ablation_profiles(sel)
    sel.prefetch_score_sets(profiles)
    columns = []
    models: list[str] = []
    for profile in profiles:
        score_set = sel.score_set_for(sel.source, profile)
        rows = analytics.leaderboard(sel, counts, score_set=score_set, group="model")
        models = models or [r["model"] for r in rows]
        columns.append({"name": profile.name, "profile": profile, "computed": score_set is not None,
                        "rows": {r["model"]: r for r in rows},
                        "exports": _export_links(study, sel, "leaderboard", profile=profile.name)})
    table = [{"model": m, "cells": [c["rows"].get(m, {}) for c in columns]} for m in models]
    same = all(analytics.hcrs_is_process(list(c["rows"].values())) for c in columns)
    context.update(columns=columns, table=table, chart=charts.ablation_bars(models, columns), hcrs_is_process=same)
    return _render(request, "scoring/ablations.html", context)


@login_required
@require_GET
def export(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    fmt = request.GET.get("format", "csv")
    what = request.GET.get("what", "")
    req = exports.ExportRequest(
        study=study, what=what, source=request.GET.get("source"), profile=request.GET.get("profile"),
        model=request.GET.get("model", ""), domain=request.GET.get("domain", ""), membership=membership,
        # run (a fidelity run's tables), benchmark (an abstraction benchmark): the pages' own tables
        extra={"group": request.GET.get("group", "model"), "run": request.GET.get("run", ""),
               "benchmark": request.GET.get("benchmark", "")},
    )
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in study.name)[:60]
    return exports.download(req, fmt, manifest_only=request.GET.get("manifest") == "1",
                            filename=f"{safe}-{what}.{fmt}")


# ---------------------------------------------------------------------------
# Profiles
# ---------------------------------------------------------------------------
@login_required
@require_http_methods(["GET", "POST"])
def profiles(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    current = services.ensure_profiles(study)
    default = services.default_profile(study, current)
    forms = {}
    status = 200
    if request.method == "POST":
        access.check_owner(membership, "editing scoring profiles")
        name = request.POST.get("name", "").strip()
        form = ProfileForm(request.POST, creating=name not in current)
        if form.is_valid():
            with refusals_into(form):  # a refusal of the service (a taken name) under its field
                if name in current:
                    profile, changed = services.do_edit_profile(study, name, form.params(), user=request.user)
                    messages.success(request, f"{name}: saved as version {profile.version}; scores are being recomputed."
                                     if changed else f"{name}: nothing changed.")
                else:
                    services.do_create_profile(study, name, form.params(), user=request.user)
                    messages.success(request, f"{name}: created; scores are being computed.")
                return redirect(reverse("scoring-profiles", args=[study.pk]) + f"#profile-{name}")
        forms[name if name in current else ""] = form
        status = 400
    history = ScoringProfile.objects.filter(study=study).select_related("created_by").order_by("name", "-version")
    rows = []
    for name, profile in current.items():
        form = forms.get(name) or ProfileForm(initial=ProfileForm.initial_from(profile), creating=False)
        rows.append({"profile": profile, "form": form, "is_default": profile.pk == default.pk})
    context = {
        "study": study,
        "membership": membership,
        "rows": rows,
        "history": history,
        "new_form": forms.get("") or ProfileForm(initial={**ProfileForm.initial_from(default), "name": ""},
                                                 creating=True),
        "pages": PAGES,
        "page": "scoring-profiles",
        "last_job": Job.objects.filter(study=study, kind=Job.Kind.SCORE).order_by("-created_at").first(),
    }
    return render(request, "scoring/profiles.html", context, status=status)


@login_required
@require_POST
def recompute(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = _study_for(request, study_id)
    access.check_owner(membership, "recomputing scores")
    name = request.POST.get("profile") or None
    job = services.request_recompute(study, reason="requested on the web", user=request.user,
                                     profiles=[name] if name else None)
    return redirect("job", job_id=job.pk)
