"""Agreement pages (one pair of sources, the annotators) and export jobs on
the web. Each view starts with the membership check (404 for non-members)
and the blind-mode rule of agreement (403 for annotators of a blind study),
keeps its selection in the URL, and reads through agreement.services;
htmx requests get the page's partial."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agreement import charts as agreement_charts
from agreement import services as svc
from agreement.core import processbench
from agreement.models import CalibrationStudy
from agreement.tags import tag_report
from annotation import access, jobs
from annotation.middleware import refusals_shown_on
from annotation.models import Job, Membership, Study, Trace
from scoring import exports
from scoring.export_jobs import check_download, do_queue_export, open_download

AGREEMENT_PAGES = [
    ("scoring-agreement", "Judge vs reference"),
    ("scoring-annotators", "Annotators"),
    ("scoring-calibrations", "Calibration studies"),
]
#: The metrics table: key, label, format, the count it is over, the interval key.
METRICS = [
    ("percent_agreement", "Percent agreement (steps)", "pct", "steps_compared", "percent_agreement_ci"),
    ("kappa", "Cohen's κ, 3 classes", "num", "steps_compared", "kappa_ci"),
    ("kappa_binary", "Cohen's κ, invalid vs not", "num", "steps_compared", "kappa_binary_ci"),
    ("first_error_exact", "First error: same step", "pct", "traces_compared", "first_error_exact_ci"),
    ("first_error_within_1", "First error: within one step", "pct", "traces_compared", "first_error_within_1_ci"),
    ("pb_error_acc", "ProcessBench: erroneous traces", "pct", "pb_error_traces", "pb_error_acc_ci"),
    ("pb_correct_acc", "ProcessBench: correct traces", "pct", "pb_correct_traces", "pb_correct_acc_ci"),
    ("pb_f1", "ProcessBench F1", "num", "traces_compared", "pb_f1_ci"),
    ("pearson_r", "Pearson r of P", "num", "traces_compared", "pearson_ci"),
    ("spearman_rho", "Spearman ρ of P", "num", "traces_compared", "spearman_ci"),
    ("ece", "Expected calibration error", "num", "steps_calibrated", "ece_ci"),
    ("brier", "Brier score", "num", "steps_calibrated", "brier_ci"),
]
DISAGREEMENTS_PER_PAGE = 50


def metric_rows(m: dict[str, Any]) -> list[dict[str, Any]]:
    undefined = m.get("undefined", {})
    rows = []
    for key, label, fmt, n, ci in METRICS:
        rows.append({"key": key, "label": label, "fmt": fmt, "value": m.get(key), "ci": m.get(ci), "n": m.get(n),
                     "n_name": n.replace("_", " "), "why": undefined.get(key)})
        if key == "pb_f1":
            rows.extend(_split_rows(m, undefined))
    return rows


def _split_rows(m: dict[str, Any], undefined: dict[str, str]) -> list[dict[str, Any]]:
    """With ProcessBench items of several splits: each split's F1 and the paper's Average (the
    unweighted mean of the split F1s), which is what ProcessBench reports, not the pooled F1 above."""
    per = m.get("pb_splits") or {}
    if len(per) < 2:
        return []
    rows = [{"key": f"pb_splits.{name}.pb_f1", "label": f"ProcessBench F1, {processbench.SPLIT_NAMES[name]} split",
             "fmt": "num", "value": sm.get("pb_f1"), "ci": None, "n": sm.get("traces_compared"),
             "n_name": "traces compared", "why": undefined.get(f"pb_splits.{name}.pb_f1")}
            for name, sm in per.items()]
    rows.append({"key": "pb_average_f1", "label": f"ProcessBench Average F1 (mean of the {len(per)} split F1s)",
                 "fmt": "num", "value": m.get("pb_average_f1"), "ci": None, "n": m.get("traces_compared"),
                 "n_name": "traces compared", "why": undefined.get("pb_average_f1")})
    return rows


def study_for(request: HttpRequest, study_id: int) -> tuple[Study, Membership]:
    """The study and my membership; refused (annotation.access) to non-members
    and, in a blind study, to annotators."""
    study, membership = access.check_study(request.user, study_id)
    svc.check_view(membership)
    return study, membership


def export_forms(study: Study, membership: Membership, params: dict[str, str], kinds: list[str]) -> dict[str, Any]:
    """What the export forms of a page need (owners and adjudicators only)."""
    return {"can_export": svc.can_export(membership), "export_kinds": kinds, "export_params": params,
            "formats": exports.FORMATS}


def page_disagreements(rows: list[list], page_number, params: dict[str, str]) -> dict[str, Any]:
    """One page of disagreements with their traces (one query)."""
    page = Paginator(rows, DISAGREEMENTS_PER_PAGE).get_page(page_number)
    traces = {t.pk: t for t in Trace.objects.filter(pk__in=[r[0] for r in page.object_list])
              .only("pk", "trace_id", "model")}
    items = [{"trace": traces.get(r[0]), "trace_pk": r[0], "step": r[1], "reference": r[2], "candidate": r[3],
              "confidence": r[4]} for r in page.object_list]
    return {"page": page, "items": items, "query": urlencode(params)}


def _render(request: HttpRequest, template: str, context: dict) -> HttpResponse:
    return render(request, f"{template}#body" if request.htmx else template, context)


@login_required
@require_GET
def agreement(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = study_for(request, study_id)
    refusals_shown_on(request, "scoring/bad_filter.html", study=study, pages=[])  # a selection naming nothing
    sel = svc.select(study, request.GET)
    report, stored = svc.agreement_report_status(sel)
    m = report["metrics"]
    params = sel.params()
    context = {
        "study": study, "membership": membership, "sel": sel, "m": m, "pages": AGREEMENT_PAGES, "stored": stored,
        "page_name": "scoring-agreement", "query": urlencode(params),
        "calibrations": list(CalibrationStudy.objects.filter(study=study).order_by("name").values("pk", "name")),
        "metrics": metric_rows(m),
        "verdicts": ["valid", "invalid", "neutral"],
        "position_chart": agreement_charts.position_lines({sel.candidate: m["by_position"]}),
        "reliability_chart": agreement_charts.reliability({sel.candidate: m["reliability"]}),
        "disagreements": page_disagreements(report["disagreements"], request.GET.get("page"), params),
        **export_forms(study, membership, params, ["agreement", "agreement-steps", "agreement-traces", "labels",
                                                   "prm-training", "traces"]),
    }
    return _render(request, "agreement/agreement.html", context)


@login_required
@require_GET
def annotators(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = study_for(request, study_id)
    refusals_shown_on(request, "scoring/bad_filter.html", study=study, pages=[])  # a calibration naming nothing
    cal = svc._calibration(study, request.GET["calibration"]) if request.GET.get("calibration") else None
    report, stored = svc.annotator_report_status(study, cal)
    params = {"calibration": str(cal.pk)} if cal else {}
    context = {
        "study": study, "membership": membership, "r": report, "calibration": cal, "pages": AGREEMENT_PAGES,
        "stored": stored,
        "page_name": "scoring-annotators", "query": urlencode(params),
        "calibrations": list(CalibrationStudy.objects.filter(study=study).order_by("name").values("pk", "name")),
        "heatmap": agreement_charts.kappa_heatmap(report["overall"]["pairwise_kappa"]),
        "bars": agreement_charts.annotator_bars(report["annotators"]),
        "tags": tag_report(study, svc.calibration_scope(cal) if cal else None),
        **export_forms(study, membership, params, ["labels", "agreement-steps", "tag-agreement", "tag-confusion"]),
    }
    return _render(request, "agreement/annotators.html", context)


# ---------------------------------------------------------------------------
# Export jobs on the web
# ---------------------------------------------------------------------------
@login_required
@require_POST
def export_create(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    job = do_queue_export(study, membership, request.POST, user=request.user,
                          base_url=request.build_absolute_uri("/"))
    return redirect("scoring-export-job", study_id=study.pk, job_id=job.pk)


def _export_job(request: HttpRequest, study_id: int, job_id: int) -> tuple[Study, Membership, Job]:
    job, membership = access.check_job(request.user, job_id, kinds=(Job.Kind.EXPORT,), study_id=study_id)
    return membership.study, membership, job


@login_required
@require_http_methods(["GET", "POST"])
def export_job(request: HttpRequest, study_id: int, job_id: int) -> HttpResponse:
    study, membership, job = _export_job(request, study_id, job_id)
    if request.method == "POST":
        access.check_cancel_job(request.user, job, membership)
        job = jobs.cancel(job)
    manifest = job.result.get("manifest") if job.result else None
    context = {"study": study, "membership": membership, "job": job, "progress": jobs.live_progress(job),
               "can_cancel": access.can_cancel_job(request.user, job, membership),
               "manifest_text": json.dumps(manifest, indent=2) if manifest else ""}
    template = "agreement/export_job.html#progress" if request.htmx else "agreement/export_job.html"
    return render(request, template, context)


@login_required
@require_GET
def export_download(request: HttpRequest, study_id: int, job_id: int) -> HttpResponse:
    study, membership, job = _export_job(request, study_id, job_id)
    job = check_download(request.user, job.pk)
    fh, name, ctype = open_download(job, manifest=request.GET.get("manifest") == "1")
    return FileResponse(fh, as_attachment=True, filename=name, content_type=ctype)
