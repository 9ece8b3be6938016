"""Web pages of the fidelity diagnostics: the study's suites and runs with the models side by
side, one report per (model, suite) run, and the side-by-side view of one item. Each view asks
the access helpers first, then the operations of fidelity.suites, running, report and imported."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation import access
from fidelity import charts
from fidelity.core import display
from fidelity.core import variants as V
from fidelity.core.metrics import ITEM_METRICS
from fidelity.imported import pdr, symbolic_accuracy, symbolic_models
from fidelity.models import FidelityRun, Output, Suite
from fidelity.report import report
from fidelity.running import check_run


@login_required
@require_GET
def fidelity_list(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    suites = list(Suite.objects.filter(study=study).order_by("name"))
    runs = list(FidelityRun.objects.filter(suite__study=study).select_related("suite", "subject", "job", "run")
                .order_by("suite__name", "subject__name", "-pk"))
    # Models side by side: the newest finished run of each (suite, model).
    newest: dict[tuple[int, int], FidelityRun] = {}
    for r in runs:
        if r.job.finished and (r.suite_id, r.subject_id) not in newest:
            newest[(r.suite_id, r.subject_id)] = r
    compare = [{"run": r, "summary": report(r).summary} for r in newest.values()]
    # PDR per perturbation type of every model with a run, on imported and generated variants alike.
    pdr_by_model = [(name, rows) for name in sorted({r.subject.name for r in runs})
                    if (rows := pdr(study, name))]
    # GSM-Symbolic: accuracy as a distribution over instance sets, per model and variant (as the paper reports it).
    symbolic = [(name, list(symbolic_accuracy(study, name).items())) for name in symbolic_models(study)]
    return render(request, "fidelity/list.html", {"study": study, "suites": suites, "runs": runs,
                                                  "compare": compare, "pdr": pdr_by_model, "symbolic": symbolic,
                                                  "export_formats": ["csv", "parquet"]})


@login_required
@require_GET
def fidelity_report(request: HttpRequest, run_id: int) -> HttpResponse:
    record, membership = check_run(request.user, run_id)
    rep = report(record)
    context = {
        "study": record.suite.study, "fid_run": record, "job": record.job, "rep": rep,
        "scatter": charts.faithfulness_plausibility(rep), "pert_chart": charts.perturbations(rep),
        "metric_rows": [(k, rep.overall[k]) for k in ITEM_METRICS],
        "export_formats": ["csv", "parquet"],  # Table 1 and Table 2 downloads (export kinds fidelity-table1/2)
        "hop_rows": [(cat, [(k, rep.by_hops[cat][k]) for k in ("em", "faithfulness", "hallucination", "consistency",
                                                              "t_hat")]) for cat in rep.by_hops],
    }
    if request.htmx and not record.job.finished:
        return render(request, "fidelity/report.html#status", context)
    return render(request, "fidelity/report.html", context)


@login_required
@require_GET
def fidelity_item(request: HttpRequest, run_id: int, problem_id: int) -> HttpResponse:
    record, membership = check_run(request.user, run_id)
    rep = report(record)
    item = next((i for i in rep.items if i.problem.pk == problem_id), None)
    if item is None:
        raise Http404("no such item in this run")
    base_text = item.forward.text if item.forward else ""
    rows = []
    for v, out in item.variants:
        old = [V.number_value(c["old"]) for c in v.changes]
        new = [V.number_value(c["new"]) for c in v.changes]
        rows.append({
            "variant": v, "label": V.LABELS.get(v.strategy, v.strategy),
            "question": display.changed_segments(item.problem.statement, v.problem.statement, v.changes),
            "base": display.number_segments(base_text, old),
            "trace": display.number_segments(out.text if out else "", new),
            "output": out, "answer": out.trace.answer if out and out.trace_id and out.trace else None,
        })
    context = {"study": record.suite.study, "fid_run": record, "item": item, "rows": rows,
               "backward": item.backward, "metrics": item.metrics, "Output": Output}
    return render(request, "fidelity/item.html", context)
