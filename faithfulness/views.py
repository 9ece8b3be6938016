"""Web pages: the study's faithfulness overview (tier per model, SVR/VSR, IFR,
anytime chart and steps-vs-difficulty chart with their tables, halting, runs),
a run page (live progress, its interventions or its Acc(b) table), one
intervention side by side, and the report download (md / tex / json)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation import access, gate, jobs
from faithfulness import charts, stored_evidence
from faithfulness.core import tiers as tier_core
from faithfulness.core import validity as val_core
from faithfulness.evidence import EVIDENCE_READS, FORMATS, evidence, report
from faithfulness.models import FaithfulnessRun, Status
from faithfulness.running import check_frun, check_intervention
from faithfulness.summaries import (
    anytime_summary,
    early_summary,
    ifr_summary,
    latest_runs,
    skipped_reasons,
    thinking_budget_summary,
)

CONTENT = {"md": "text/markdown; charset=utf-8", "tex": "application/x-tex; charset=utf-8",
           "json": "application/json"}


@login_required
@require_GET
def overview(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    gate.check(membership, "the faithfulness evidence", EVIDENCE_READS)
    policy = request.GET.get("policy", val_core.EXCLUDE)
    if policy not in val_core.POLICIES:
        return render(request, "faithfulness/bad_request.html",
                      {"study": study, "error": f"policy: choose {', '.join(val_core.POLICIES)}"}, status=400)
    evs = evidence(study, policy=policy)
    reports = [tier_core.template(ev) for ev in evs]
    curves = [a for ev in evs for a in ev.anytime]
    scatter = stored_evidence.difficulty(study, [ev.model for ev in evs if ev.with_steps])
    context = {
        "study": study, "membership": membership, "policy": policy, "policies": val_core.POLICIES,
        "evidence_status": stored_evidence.status(study),
        "rows": [{"ev": ev, "rep": rep, "tier": rep["tier"]} for ev, rep in zip(evs, reports, strict=True)],
        "curves": curves,
        # One chart per budget unit: token and step budgets never share an axis.
        "anytime_charts": [{"id": f"chart-anytime-{unit}", "unit": unit,
                            "chart": charts.anytime([c for c in curves if c["unit"] == unit])}
                           for unit in dict.fromkeys(c["unit"] for c in curves)],
        "difficulty_chart": charts.steps_vs_difficulty(scatter), "difficulty": charts.difficulty_table(scatter),
        "runs": FaithfulnessRun.objects.filter(subject__study=study).select_related("subject", "job")[:20],
        **_thinking_context(study),
        "formats": FORMATS,
    }
    return render(request, "faithfulness/overview.html", context)


@login_required
@require_GET
def report_download(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    gate.check(membership, "the faithfulness evidence", EVIDENCE_READS)
    fmt = request.GET.get("format", "md")
    # A bad format, model or policy is a refusal naming it (reasonlib.refusals): the middleware's 400 page.
    text = report(study, request.GET.get("model") or None, fmt, policy=request.GET.get("policy", val_core.EXCLUDE))
    response = HttpResponse(text, content_type=CONTENT[fmt])
    if request.GET.get("inline") != "1":
        response["Content-Disposition"] = f'attachment; filename="evidence-report-{study.pk}.{fmt}"'
    return response


@login_required
@require_GET
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    record, membership = check_frun(request.user, run_id)
    context = {"frun": record, "job": record.job, "subject": record.subject, "study": record.subject.study,
               "progress": jobs.live_progress(record.job),
               "can_cancel": access.can_cancel_job(request.user, record.job, membership)}
    if record.kind == FaithfulnessRun.Kind.EARLY:
        summary = early_summary(record)
        context["summary"] = summary
        context["early_chart"] = charts.early_answering([summary], traces=True)
    elif record.kind == FaithfulnessRun.Kind.INTERVENTIONS:
        context["summary"] = ifr_summary(record)
        context["interventions"] = record.interventions.select_related("trace").order_by("trace_id", "step", "kind")[:500]
        context["skipped"] = skipped_reasons(record)
    else:
        summary = anytime_summary(record)
        context["summary"] = summary
        context["curve"] = list(zip(summary["labels"], summary["acc"] or [None] * len(summary["labels"]),
                                    summary["own_answer"], strict=True))
        context["anytime_chart"] = charts.anytime([summary])
        if summary["unit"] == "thinking":
            context["thinking"] = thinking_budget_summary(record)
            context["thinking_chart"] = charts.thinking_budgets([context["thinking"]])
    template = "faithfulness/run.html#stats" if request.htmx else "faithfulness/run.html"
    return render(request, template, context)


@login_required
@require_GET
def intervention_page(request: HttpRequest, pk: int) -> HttpResponse:
    row, _membership = check_intervention(request.user, pk)
    record = row.frun
    context = {"row": row, "frun": record, "study": record.subject.study, "trace": row.trace,
               "done": row.status == Status.OK,
               "neighbours": list(record.interventions.filter(trace_id=row.trace_id).order_by("step", "kind")
                                  .values_list("pk", "kind", "step"))}
    return render(request, "faithfulness/intervention.html", context)


def _thinking_context(study) -> dict:
    """Early answering and thinking budgets of the study's reasoning models (newest run per model and mode)."""
    early = [early_summary(f) for fs in latest_runs(study, FaithfulnessRun.Kind.EARLY).values()
             for f in fs]
    budgets = [thinking_budget_summary(f) for f in FaithfulnessRun.objects.filter(
        subject__study=study, kind=FaithfulnessRun.Kind.ANYTIME, grid__startswith="thinking:")
        .select_related("subject").order_by("-created_at", "-pk")[:10]]
    return {"early": early, "early_chart": charts.early_answering(early) if early else None,
            "budgets": budgets, "budgets_chart": charts.thinking_budgets(budgets) if budgets else None}
