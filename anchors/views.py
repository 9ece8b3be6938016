"""Web pages of step importance: a run's page (progress, configuration, its measured steps) and the study's
page (importance by function tag per model, chart, downloads). The review page's heat map is a panel
(anchors.panels)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from anchors import summaries
from anchors.models import ImportanceRun, StepImportance
from annotation import access, gate, jobs


def check_irun(user, run_id: int) -> tuple[ImportanceRun, object]:
    return access.check_object(user, ImportanceRun.objects.select_related("subject__study", "job", "run"), run_id,
                               study_path="subject__study_id", what="step-importance run")


@login_required
@require_GET
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    record, membership = check_irun(request.user, run_id)
    rows = (StepImportance.objects.filter(irun=record).select_related("trace", "step")
            .order_by("trace__trace_id", "step__index"))
    context = {"irun": record, "job": record.job, "subject": record.subject, "study": record.subject.study,
               "progress": jobs.live_progress(record.job), "rows": rows[:2000],
               "measures": summaries.MEASURE_CHOICES,
               "can_cancel": access.can_cancel_job(request.user, record.job, membership)}
    template = "anchors/run.html#stats" if request.htmx else "anchors/run.html"
    return render(request, template, context)


@login_required
@require_GET
def study_page(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    choice = summaries.parse_choice(study, request.GET, membership)
    gate.check(membership, "step importance by function tag", summaries.reads(choice))
    table = summaries.by_tag(study, choice, membership)
    context = {"study": study, "membership": membership, "choice": choice, "table": table,
               "chart": summaries.chart(table, choice.measure), "measures": summaries.MEASURE_CHOICES,
               "tag_sources": summaries.tag_sources(study, membership),
               "value_sources": summaries.value_sources(study),
               "runs": ImportanceRun.objects.filter(subject__study=study).select_related("subject", "job")[:20]}
    return render(request, "anchors/study.html", context)


@login_required
@require_GET
def export(request: HttpRequest, study_id: int) -> HttpResponse:
    """The study page's tables as files (csv, parquet, ...; ``manifest=1``: the manifest of that file)."""
    from scoring import exports

    study, membership = access.check_study(request.user, study_id)
    what = request.GET.get("what", "step-importance-by-tag")
    if what not in ("step-importance", "step-importance-by-tag"):
        raise exports.ExportError("what: choose step-importance or step-importance-by-tag")
    fmt = request.GET.get("format", "csv")
    extra = {k: request.GET.get(k, "") for k in ("measure", "tags", "values", "run")}
    req = exports.ExportRequest(study=study, what=what, model=request.GET.get("model", ""), membership=membership,
                                extra=extra)
    return exports.download(req, fmt, manifest_only=request.GET.get("manifest") == "1",
                            filename=f"study-{study.pk}-{what}.{fmt}")


@login_required
@require_GET
def trace_panel(request: HttpRequest, trace_id: int) -> HttpResponse:
    """The review page's step-importance panel of one trace, for another measure or source (htmx)."""
    from anchors.panels import panel_context

    trace, membership = access.check_trace(request.user, trace_id)
    context = panel_context(trace, membership, measure=request.GET.get("measure", ""),
                            source=request.GET.get("source", "")) or {"trace": trace, "empty": True}
    return render(request, "anchors/panel.html#panel", context)
