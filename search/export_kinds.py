"""Export kinds of search (``SearchConfig.export_kinds``): the tables its pages show, as files.

* ``search`` -- the traces a search matches, one row per trace (the query in ``extra["query"]``:
  the search page's URL parameters; ``export --query 'q=wait&model=m1'``);
* ``cohorts`` -- the study's cohorts, one row per cohort (the cohorts page);
* ``cohort-compare`` -- two cohorts side by side, one row per (cohort, measure) with its interval
  (``extra["cohort"]`` and ``extra["versus"]``);
* ``scanners`` -- the study's scanners with their answers' counts (the scanners page);
* ``scanner-validation`` -- a scanner's precision, recall and F1 per split, one row per split;
* ``scanner-answers`` -- a scanner's latest answer per trace, with the person's answer where the
  trace is in the validation sample (not for annotators blinded to others' judgements, as on the page).

Every row is scalar (lists of step numbers are space-separated text); the manifest
(scoring.exports.manifest) adds the study, the parameters, the counts and the code version.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from annotation import gate
from annotation.access import AccessDenied
from annotation.gate import TRACE_ONLY
from annotation.models import Membership, Trace
from reasonlib.ids import is_id
from runs.version import code_version
from scoring.exports import ExportError, ExportForbidden, ExportRequest, Table, register
from search import scanners, services
from search.core.validation import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from search.errors import SearchError
from search.filters import cohort_reads
from search.models import Cohort, ScanLabel, Scanner, ScanResult
from search.scanners import SCANNER_READS

SEARCH_FIELDS = ["trace", "trace_id", "problem_id", "model", "answer_correct", "n_steps", "flagged", "review_url"]
COHORT_FIELDS = ["cohort", "name", "n_traces", "query", "note", "created_by", "created_at"]
COMPARE_FIELDS = ["cohort", "name", "measure", "n", "estimate", "ci_low", "ci_high", "interval", "code_version"]
SCANNER_FIELDS = ["scanner", "name", "question", "judge", "judge_version", "judge_model", "yes", "no", "uncited",
                  "failed"]
VALIDATION_FIELDS = ["scanner", "question", "judge", "judge_version", "judge_model", "split", "traces", "tp", "fp",
                     "fn", "tn", "precision", "precision_low", "precision_high", "recall", "recall_low", "recall_high",
                     "f1", "f1_low", "f1_high", "bootstrap_resamples", "bootstrap_seed", "code_version"]
ANSWER_FIELDS = ["scanner", "trace", "trace_id", "model", "status", "answer", "uncited", "cited_steps",
                 "bad_citations", "explanation", "reason", "cached", "job", "split", "person_answer",
                 "judge_version", "code_version"]


# Filters that read the searching member's own labels or reviews: the command line is no member.
_OWN_FILTERS = ("needs_review",)


def _member(request: ExportRequest, data) -> Membership:
    """The requester's membership. The command line (no membership), run by the server's operator,
    searches with an owner's view of the study but as no member: "mine" means nobody there."""
    if request.membership is not None:
        return request.membership
    own = [k for k in _OWN_FILTERS if data.get(k)] + (["source"] if data.get("source") == "mine" else [])
    if own:
        raise ExportError(f"{own[0]}: the command line searches as no member; give annotator:USERNAME as the source "
                          "instead of your own labels")
    from django.contrib.auth import get_user_model

    # Never saved: it only answers the filter set's "who is asking" (an owner, so nothing is blinded).
    return Membership(study=request.study, user=get_user_model()(username=""), role=Membership.Role.OWNER)


def _id(request: ExportRequest, key: str) -> int:
    value = str(request.extra.get(key) or "").strip()
    if not is_id(value):
        raise ExportError(f"{key}: give an id, not {value!r}" if value else f"{key}: required for --what {request.what}")
    return int(value)


def _cohort(request: ExportRequest, pk: int, key: str) -> Cohort:
    cohort = Cohort.objects.filter(study=request.study, pk=pk).select_related("study").first()
    if cohort is None:
        raise ExportError(f"{key}: no cohort {pk} in this study")
    gate.check(request.membership, f"cohort {cohort.name!r}", cohort_reads(cohort, request.membership))
    return cohort


def _scanner(request: ExportRequest) -> Scanner:
    value = str(request.extra.get("scanner") or "").strip()
    scanners_ = Scanner.objects.filter(study=request.study).select_related("judge")
    found = scanners_.filter(pk=int(value)).first() if is_id(value) else None
    found = found or scanners_.filter(name=value).first()
    if found is None:
        raise ExportError(f"scanner: no scanner {value!r} in this study" if value
                          else f"scanner: required for --what {request.what}")
    return found


@register("search", reads=TRACE_ONLY, help="the traces a search matches (--query 'q=wait&model=m1', the search page's URL "
                         "parameters), one row per trace")
def search_table(request: ExportRequest) -> Table:
    from django.http import QueryDict
    from django.urls import reverse
    from django.utils.http import urlencode

    # The filters only: a submitted form's empty fields and the page's switches are not parameters.
    params = services.search_params(QueryDict(request.extra.get("query") or ""))
    if request.extra.get("cohort"):
        params.setdefault("cohort", str(request.extra["cohort"]))  # export --cohort ID: the search's cohort filter
    request.extra["query"] = urlencode(params, doseq=True)  # the manifest names what was read
    try:
        found = services.search(request.study, _member(request, params), params)
    except SearchError as exc:
        raise ExportError(str(exc)) from None
    except AccessDenied as exc:
        raise ExportForbidden(str(exc)) from None
    rows = found.traces.values_list("pk", "trace_id", "problem__problem_id", "model", "answer_correct", "n_steps",
                                    "flagged")
    base = reverse("trace", args=[0]).removesuffix("0/")  # the review page's path without its id, reversed once

    def iterate() -> Iterator[dict[str, Any]]:
        for pk, trace_id, problem_id, model, correct, n_steps, flagged in rows.iterator(chunk_size=2000):
            yield {"trace": pk, "trace_id": trace_id, "problem_id": problem_id, "model": model,
                   "answer_correct": correct, "n_steps": n_steps, "flagged": flagged, "review_url": f"{base}{pk}/"}

    schema = {"trace": "int64", "trace_id": "string", "problem_id": "string", "model": "string",
              "answer_correct": "bool", "n_steps": "int64", "flagged": "bool", "review_url": "string"}
    return Table(columns=SEARCH_FIELDS, rows=iterate(), schema=schema,
                 meta={"applied": ["query", "cohort"], "sources": []})


@register("cohorts", reads=TRACE_ONLY, help="the study's saved cohorts, one row per cohort (its query as JSON text)")
def cohorts_table(request: ExportRequest) -> Table:
    import json

    # A cohort whose query read what the member may not (annotation.gate) is listed without its size.
    rows = [{"cohort": c.pk, "name": c.name,
             "n_traces": c.n_traces if services.readable_cohort(c, request.membership) else None, "query": json.dumps(c.query, sort_keys=True),
             "note": c.note, "created_by": c.created_by.username if c.created_by else "",
             "created_at": c.created_at.isoformat()}
            for c in Cohort.objects.filter(study=request.study).select_related("created_by").order_by("name")]
    return Table(columns=COHORT_FIELDS, rows=rows, meta={"applied": [], "sources": []})


def _measure(side: dict[str, Any], measure: str, n: int | None, estimate: float | None,
             ci: tuple[float, float] | None = None, interval: str = "") -> dict[str, Any]:
    """One row of a comparison: a cohort's measure, its interval as two columns and how it was made."""
    return {"cohort": side["id"], "name": side["name"], "measure": measure, "n": n, "estimate": estimate,
            "ci_low": ci[0] if ci else None, "ci_high": ci[1] if ci else None, "interval": interval if ci else "",
            "code_version": code_version()}


@register("cohort-compare", reads=TRACE_ONLY, help="two cohorts side by side (--cohort A --versus B): one row per (cohort, measure): "
                                 "traces, answer accuracy (Wilson 95%), mean process/holistic/PRM score (bootstrap 95%)")
def compare_table(request: ExportRequest) -> Table:
    a = _cohort(request, _id(request, "cohort"), "cohort")
    b = _cohort(request, _id(request, "versus"), "versus")
    result = services.compare_cohorts(a, b, request.membership)
    bootstrap = f"percentile bootstrap 95%, {services.COMPARE_RESAMPLES} resamples, seed {services.COMPARE_SEED}"
    rows: list[dict[str, Any]] = []
    for side in (result["a"], result["b"]):
        rows.append(_measure(side, "traces", side["n_traces"], side["n_traces"]))
        rows.append(_measure(side, "shared_traces", result["shared"], result["shared"]))
        rows.append(_measure(side, "answer_accuracy", side["n_answer_judged"], side["accuracy"], side["accuracy_ci"],
                             "wilson 95%"))
        for name in ("process", "holistic", "s_prm") if side["scores"] is not None else ():
            s = side["scores"][name]
            rows.append(_measure(side, f"mean_{name}", s["n"], s["mean"], s["ci"], bootstrap))
        for model, n in side["models"].items():
            rows.append(_measure(side, f"traces_of_model:{model}", n, n))
    profile = a.study.default_profile
    return Table(columns=COMPARE_FIELDS, rows=rows,
                 meta={"applied": ["cohort", "versus"], "sources": ["final"],
                       "profile": {"name": profile.name, "version": profile.version} if profile else None})


@register("scanners", reads=SCANNER_READS, help="the study's scanners, one row per scanner with its answers' counts (as the scanners page)")
def scanners_table(request: ExportRequest) -> Table:
    rows = [{"scanner": s.pk, "name": s.name, "question": s.question, "judge": s.judge.name,
             "judge_version": s.judge.version, "judge_model": s.judge.model, **scanners.counts(s)}
            for s in Scanner.objects.filter(study=request.study).select_related("judge").order_by("name")]
    return Table(columns=SCANNER_FIELDS, rows=rows, meta={"applied": [], "sources": ["scanner"]})


@register("scanner-validation", reads=scanners.VALIDATION_READS, help="a scanner's precision, recall (Wilson 95%) and F1 (bootstrap 95%) against "
                                     "people's answers, one row per split (--scanner NAME or id)")
def validation_table(request: ExportRequest) -> Table:
    scanner = _scanner(request)
    report = scanners.validation_report(scanner)
    judge = scanner.judge
    version = code_version()
    rows = []
    for split in ScanLabel.Split.values:
        v = report[split]
        rows.append({
            "scanner": scanner.name, "question": scanner.question, "judge": judge.name, "judge_version": judge.version,
            "judge_model": judge.model, "split": split, "traces": v.n, "tp": v.tp, "fp": v.fp, "fn": v.fn, "tn": v.tn,
            "precision": v.precision, "precision_low": _end(v.precision_ci, 0), "precision_high": _end(v.precision_ci, 1),
            "recall": v.recall, "recall_low": _end(v.recall_ci, 0), "recall_high": _end(v.recall_ci, 1),
            "f1": v.f1, "f1_low": _end(v.f1_ci, 0), "f1_high": _end(v.f1_ci, 1),
            "bootstrap_resamples": BOOTSTRAP_RESAMPLES, "bootstrap_seed": BOOTSTRAP_SEED, "code_version": version,
        })
    return Table(columns=VALIDATION_FIELDS, rows=rows,
                 meta={"applied": ["scanner"], "sources": ["scanner", "people's answers"],
                       "counts": {"pending": report["pending"], "unscanned": report["unscanned"]}})


def _end(ci: tuple[float, float] | None, i: int) -> float | None:
    return ci[i] if ci else None


@register("scanner-answers", reads=SCANNER_READS,
          help="a scanner's latest answer per trace with its cited steps, and the person's answer where the trace is "
               "in the validation sample (--scanner NAME or id)")
def answers_table(request: ExportRequest) -> Table:
    scanner = _scanner(request)
    people = scanners.people_answers(scanner)
    results = (ScanResult.objects.filter(scanner=scanner)
               .select_related("trace", "scanner_run").order_by("trace_id"))
    version, judge_version = code_version(), scanner.judge.version

    def iterate() -> Iterator[dict[str, Any]]:
        for r in results.iterator(chunk_size=2000):
            trace: Trace = r.trace
            split, person = people.get(r.trace_id, ("", None))
            yield {"scanner": scanner.name, "trace": r.trace_id, "trace_id": trace.trace_id, "model": trace.model,
                   "status": r.status, "answer": r.answer, "uncited": r.uncited,
                   "cited_steps": " ".join(str(n) for n in r.cited),
                   "bad_citations": " ".join(str(n) for n in r.bad_citations), "explanation": r.explanation,
                   "reason": r.reason, "cached": r.cached,
                   "job": r.scanner_run.job_id if r.scanner_run else None, "split": split, "person_answer": person,
                   "judge_version": judge_version, "code_version": version}

    return Table(columns=ANSWER_FIELDS, rows=iterate(), meta={"applied": ["scanner"], "sources": ["scanner"]})
