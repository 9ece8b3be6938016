"""The trace and problem lists of a study (filtered, paginated; htmx gets the rows)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.models import Membership, Problem, Study, Trace, TraceReview
from annotation.review.filters import filter_traces, study_models, visible_trace_filters
from annotation.views.base import member_view, page_query, study_for


def trace_filter_context(request: HttpRequest, study: Study, membership: Membership) -> dict:
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
    study, membership = study_for(request, study_id)
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
    context = {"study": study, "membership": membership, "page": page, "query": page_query(request),
               **trace_filter_context(request, study, membership)}
    template = "annotation/trace_list.html#rows" if request.htmx else "annotation/trace_list.html"
    return render(request, template, context)


@member_view
@require_GET
def problem_list(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = study_for(request, study_id)
    f = {k: request.GET.get(k, "") for k in ("domain", "tag", "skeleton", "q", "suites")}
    # Fidelity variants belong to their suite: listed only with ?suites=1.
    qs = Problem.objects.filter(study=study).in_scope(f["suites"] == "1").order_by("problem_id")
    if f["domain"]:
        qs = qs.filter(domain=f["domain"])
    if f["tag"]:
        qs = qs.with_tag(f["tag"])
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
    domains = Problem.objects.of_study(study, suites=f["suites"] == "1").exclude(domain="").values_list("domain", flat=True).distinct().order_by("domain")
    context = {"study": study, "membership": membership, "page": page, "f": f, "domains": domains,
               "query": page_query(request)}
    template = "annotation/problem_list.html#rows" if request.htmx else "annotation/problem_list.html"
    return render(request, template, context)
