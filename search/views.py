"""Web pages of search (docs/search.md): the search page (the API's parameters), cohorts, compare."""

from __future__ import annotations

import re

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation import access
from annotation.middleware import refusals_back_to, refusals_shown_on
from annotation.models import Membership, Trace, Verdict
from annotation.review import queues
from annotation.review.filters import study_models
from annotation.views.base import member_view
from reasonlib.ids import is_id
from reasonlib.refusals import FieldInvalid
from runs import params
from runs.version import code_version
from runs.views import page_fields, start_from_page
from scoring import exports
from search import scanners, services
from search.core.validation import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from search.errors import SearchError
from search.filters import TraceSearchFilter, usable_filters
from search.models import Cohort, Scanner

# Filters shown as fields of the page's form (the rest are still honoured from the URL).
FORM_FIELDS = ("q", "re", "channel", "model", "answer_correct", "flagged", "lucky_guess", "disagreement", "needs_review",
               "source", "verdict", "first_error_min", "first_error_max", "first_error_rel_min",
               "first_error_rel_max", "judge", "human_judge_disagreement", "adjudicated", "review_flag",
               "n_steps_min", "n_steps_max", "chars_min", "chars_max", "regime", "coverage_min", "coverage_max",
               "intervention_changed", "fidelity_failed", "cohort")


# The tables of these pages as files (search.export_kinds), and the parameters each kind reads.
DOWNLOADS = {"search": (), "cohorts": (), "cohort-compare": ("cohort", "versus"), "scanners": (),
             "scanner-validation": ("scanner",), "scanner-answers": ("scanner",)}


def _query(request: HttpRequest) -> str:
    q = request.GET.copy()
    q.pop("page", None)
    return q.urlencode()


@member_view
@require_GET
def search_page(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    errors: dict[str, list[str]] = {}
    page, hits, notes = None, {}, []
    try:
        s = services.search(study, membership, request.GET)
        page = s.paginator()(s.traces, 50).get_page(request.GET.get("page"))
        hits = services.hits(s, list(page))
        notes = s.notes
    except SearchError as exc:
        errors = exc.by_field
    for t in page or []:
        t.hits = hits.get(t.pk, [])
    context = {
        "study": study, "membership": membership, "page": page, "errors": errors, "notes": notes,
        "f": {k: request.GET.get(k, "") for k in FORM_FIELDS}, "query": _query(request),
        "models": study_models(study), "verdicts": Verdict.values,
        "cohorts": services.readable_cohorts(study, membership),
        "usable": usable_filters(study, membership),
        "searched": any(request.GET.get(k) for k in FORM_FIELDS),
        "filter_help": {name: f.extra.get("help_text", "") for name, f in TraceSearchFilter.base_filters.items()},
    }
    template = "search/search.html#results" if request.htmx else "search/search.html"
    return render(request, template, context, status=400 if errors else 200)


@member_view
@require_GET
def download(request: HttpRequest, study_id: int) -> HttpResponse:
    """``what`` (search by default; see DOWNLOADS) in ``format`` csv | jsonl | parquet, or with
    ``manifest=1`` the manifest describing that file. ``what=search`` reads the rest of the URL as the
    search page does; the other kinds read their own parameters (``cohort`` and ``versus``, ``scanner``)."""
    study, membership = access.check_study(request.user, study_id)
    what = request.GET.get("what") or "search"
    if what not in DOWNLOADS:
        return HttpResponse(f"what: choose one of {', '.join(DOWNLOADS)}", status=400, content_type="text/plain")
    # A search reads the whole URL as the search page does (services.search_params drops the switches).
    extra = {"query": request.GET.urlencode()} if what == "search" else {k: request.GET.get(k, "") for k in DOWNLOADS[what]}
    req = exports.ExportRequest(study=study, what=what, membership=membership, extra=extra)
    return exports.download(req, request.GET.get("format") or "csv",
                            manifest_only=request.GET.get("manifest") == "1")


@member_view
@require_http_methods(["GET", "POST"])
def cohort_list(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    if request.method == "POST":
        params = request.POST.copy()
        for key in ("csrfmiddlewaretoken", "name", "note"):
            params.pop(key, None)
        refusals_back_to(request, reverse("search-cohorts", args=[study.pk]), "Not saved")  # a bad query or name
        cohort = services.do_save_cohort(study, membership, name=request.POST.get("name", ""), data=params,
                                         note=request.POST.get("note", ""))
        messages.success(request, f"Cohort {cohort.name} saved with {cohort.n_traces} traces.")
        return redirect(cohort)
    cohorts = list(Cohort.objects.filter(study=study).select_related("created_by"))
    for c in cohorts:  # a cohort whose query read other sources (annotation.gate) is listed without size or link
        c.readable = services.readable_cohort(c, membership)
    return render(request, "search/cohorts.html", {"study": study, "membership": membership, "cohorts": cohorts})


def _cohort_for(request: HttpRequest, pk: int) -> tuple[Cohort, Membership]:
    return services.check_cohort(request.user, pk)


@member_view
@require_GET
def cohort_detail(request: HttpRequest, pk: int) -> HttpResponse:
    cohort, membership = _cohort_for(request, pk)
    from django.http import QueryDict

    link = QueryDict(mutable=True)
    for key, value in cohort.query.items():
        for v in value if isinstance(value, list) else [value]:
            link.appendlist(key, str(v))
    page = services.cohort_page(cohort, request.GET.get("page"))
    context = {"study": cohort.study, "membership": membership, "cohort": cohort, "page": page,
               "search_link": link.urlencode(), "judges": cohort.study.judges.order_by("name"),
               # The judge run's form: the judge kind's parameters (runs.kinds), the cohort fixed by the page.
               "judge_fields": page_fields("judge", cohort.study, without=("cohort", "model", "domain",
                                                                            "answer_correct", "trace_ids")),
               "members": Membership.objects.filter(study=cohort.study).select_related("user").order_by("user__username"),
               "others": Cohort.objects.filter(study=cohort.study).exclude(pk=cohort.pk).order_by("name"),
               "k_range": queues.ANNOTATORS_PER_TRACE,
               "download_params": urlencode({"what": "search", "cohort": cohort.pk})}
    return render(request, "search/cohort.html", context)


@member_view
@require_POST
def cohort_assign(request: HttpRequest, pk: int) -> HttpResponse:
    cohort, membership = _cohort_for(request, pk)
    access.check_owner(membership)
    users = list(get_user_model().objects.filter(username__in=request.POST.getlist("annotators")))
    refusals_back_to(request, cohort.get_absolute_url(), "Not queued")  # a bad k, no annotator (AssignError)
    n = services.do_assign_cohort(cohort, request.user, users, _whole(request.POST, "k", 1))
    messages.success(request, f"{n} assignments made from cohort {cohort.name}.")
    return redirect(cohort)


@member_view
@require_POST
def cohort_judge(request: HttpRequest, pk: int) -> HttpResponse:

    cohort, membership = _cohort_for(request, pk)
    access.check_owner(membership)
    return start_from_page(request, cohort.study, "judge", {"cohort": str(cohort.pk)}, back=cohort.get_absolute_url())


@member_view
@require_POST
def cohort_delete(request: HttpRequest, pk: int) -> HttpResponse:
    cohort, membership = _cohort_for(request, pk)
    services.do_delete_cohort(cohort, membership)
    messages.success(request, f"Cohort {cohort.name} deleted.")
    return redirect("search-cohorts", cohort.study_id)


@member_view
@require_GET
def cohort_compare(request: HttpRequest, pk: int) -> HttpResponse:
    a, membership = _cohort_for(request, pk)
    other = request.GET.get("b", "")
    context = {"study": a.study, "membership": membership, "cohort": a, "result": None, "sides": [],
               "download_params": urlencode({"what": "cohort-compare", "cohort": a.pk, "versus": other}),
               "profile": a.study.default_profile, "resamples": services.COMPARE_RESAMPLES,
               "seed": services.COMPARE_SEED, "code_version": code_version(),
               "others": Cohort.objects.filter(study=a.study).exclude(pk=a.pk).order_by("name"), "b": other}
    # A refusal (services.CohortError: the cohorts cannot be compared) is shown on this page, as its error.
    refusals_shown_on(request, "search/compare.html", **context)
    if is_id(other):
        b, _m = _cohort_for(request, int(other))
        result = services.compare_cohorts(a, b, membership)
        context.update(result=result, sides=[result["a"], result["b"]])
    elif other:
        raise FieldInvalid("b", "give the other cohort's id")
    return render(request, "search/compare.html", context)


# --------------------------------------------------------------------------
# Scanners


@member_view
@require_http_methods(["GET", "POST"])
def scanner_list(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    if request.method == "POST":
        access.check_owner(membership)
        refusals_back_to(request, reverse("search-scanners", args=[study.pk]), "Not created")  # ScannerError
        scanner = scanners.do_create_scanner(study, name=request.POST.get("name", ""),
                                             question=request.POST.get("question", ""),
                                             judge_name=request.POST.get("judge", ""), user=request.user)
        return redirect(scanner)
    rows = [(s, scanners.visible_counts(s, membership))
            for s in Scanner.objects.filter(study=study).select_related("judge")]
    judges = [j for j in study.judges.order_by("name") if j.uses_prompt]
    return render(request, "search/scanners.html", {"study": study, "membership": membership, "rows": rows,
                                                    "judges": judges})


@member_view
@require_GET
def scanner_detail(request: HttpRequest, pk: int) -> HttpResponse:
    scanner, membership = scanners.check_scanner(request.user, pk)
    pending = scanners.unanswered_by(scanner, request.user).select_related("trace__problem")[:50]  # by this member
    answered = scanners.answered_by(scanner, request.user)[:200]
    context = {"study": scanner.study, "membership": membership, "scanner": scanner,
               "counts": scanners.visible_counts(scanner, membership),
               "report": scanners.visible_validation(scanner, membership),
               "run_fields": page_fields("scanner", scanner.study, without=("scanner",)),
               "runs": scanner.runs.select_related("job", "cohort")[:10], "pending": pending, "answered": answered,
               "cohorts": Cohort.objects.filter(study=scanner.study).order_by("name"),
               "code_version": code_version(),
               "resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED,
               "validation_params": urlencode({"what": "scanner-validation", "scanner": scanner.pk}),
               "answers_params": urlencode({"what": "scanner-answers", "scanner": scanner.pk})}
    return render(request, "search/scanner.html", context)


@member_view
@require_POST
def scanner_run(request: HttpRequest, pk: int) -> HttpResponse:
    scanner, membership = scanners.check_scanner(request.user, pk)
    access.check_owner(membership)
    return start_from_page(request, scanner.study, "scanner", {"scanner": scanner.name},
                           back=scanner.get_absolute_url())


def _whole(data, field: str, default: int) -> int:
    """The posted whole number ``field`` (``default`` when empty), else a refusal naming the field; the
    service checks its range."""
    text = (data.get(field) or "").strip()
    if not text:
        return default
    if not re.fullmatch(r"-?[0-9]{1,18}", text):
        raise FieldInvalid(field, f"must be a whole number, got {text!r}")
    return int(text)


@member_view
@require_POST
def scanner_sample(request: HttpRequest, pk: int) -> HttpResponse:
    scanner, membership = scanners.check_scanner(request.user, pk)
    access.check_adjudicator(membership)
    refusals_back_to(request, scanner.get_absolute_url(), "Not drawn")  # a bad size or seed (ScannerError)
    n = scanners.do_draw_sample(scanner, _whole(request.POST, "size", 0), seed=params.check("seed", _whole(request.POST, "seed", 0)))
    messages.success(request, f"{n} traces added to the validation sample.")
    return redirect(scanner)


@member_view
@require_POST
def scanner_label(request: HttpRequest, pk: int) -> HttpResponse:
    """A member answers the scanner's question on a trace (from the scanner page or the review page)."""
    scanner, _m = scanners.check_scanner(request.user, pk)
    trace = Trace.objects.filter(study_id=scanner.study_id, pk=request.POST.get("trace") or 0).first()
    answer = {"yes": True, "no": False, "": None}.get(request.POST.get("answer", ""), "bad")
    if trace is None or answer == "bad":
        messages.error(request, "Not saved: give a trace of this study and an answer yes or no.")
    else:
        scanners.do_answer(scanner, trace, request.user, answer)
    nxt = request.POST.get("next", "")
    return redirect(nxt if url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()}) and nxt
                    else scanner.get_absolute_url())
