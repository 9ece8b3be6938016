"""The ``fidelity`` export kind: one row per original and per variant of the newest finished
fidelity run of ``--model`` (any suite; the manifest names the run, suite, seeds, regime,
generator and code versions and the semantic-similarity method)."""

from __future__ import annotations

import json

from annotation.gate import TRACE_ONLY
from fidelity.imported import imported_rows, symbolic_accuracy, symbolic_models
from fidelity.models import FidelityRun
from fidelity.report import ROW_COLUMNS, item_rows, report
from reasonlib.ids import is_id
from scoring.exports import ExportError, ExportRequest, Table, register


def _run(request: ExportRequest) -> FidelityRun | None:
    runs = FidelityRun.objects.filter(suite__study=request.study).select_related("suite", "subject", "job", "run")
    if request.model:
        runs = runs.filter(subject__name=request.model)
    return runs.order_by("-pk").first()


@register("fidelity", reads=TRACE_ONLY, suites=True, help="fidelity diagnostics of the newest run of --model (one row per original and variant); "
                           "without a run, the metrics of the imported traces alone")
def fidelity(request: ExportRequest) -> Table:
    run = _run(request)
    if run is None:
        rows = imported_rows(request.study, request.model)
        if not rows:
            raise ExportError(f"no fidelity run and no trace{' of ' + request.model if request.model else ''} "
                              "in this study")
        rows = [{**r, "changes": json.dumps(r["changes"])} for r in rows]
        return Table(ROW_COLUMNS, rows, meta={
            "fidelity": {"run": None, "note": "imported traces alone: no variants, no backward trace",
                         "semantic_similarity": None, "logical_forms": "heuristic (fidelity.core.logic)"},
            "sources": ["imported traces"]})
    rep = report(run)
    rows = [{**r, "changes": json.dumps(r["changes"])} for r in item_rows(rep)]
    return Table(ROW_COLUMNS, rows,
                 meta={"fidelity": {"run": rep.fid_run.pk, "summary": rep.summary, "provenance": rep.provenance,
                                    "perturbation": [r.to_dict() for r in rep.perturbation]},
                       "sources": [f"fidelity:{rep.fid_run.subject.name}"],
                       "counts": {"originals": len(rep.items), "pairs": rep.summary["pairs"]}})


# The page's two tables, each downloadable with the page's numbers (issue 23 item 10): the same Report
# the page renders, one row per table row, scalar columns.
TABLE1_COLUMNS = ["run", "subject", "suite", "rank", "strategy", "n", "bl_em", "var_em", "bl_cot", "var_cot",
                  "em_drop", "cot_drop", "sem", "reason", "conf_drop", "robustness"]
TABLE2_COLUMNS = ["run", "subject", "suite", "grouping", "group", "n", "cp_value", "cp_diff", "ra", "aa",
                  "aa_strict_n", "sc", "difficulty"]


def _report(request: ExportRequest):
    run_id = request.extra.get("run")
    runs = FidelityRun.objects.filter(suite__study=request.study).select_related("suite", "subject", "job", "run")
    if run_id:
        run = runs.filter(pk=int(run_id) if is_id(str(run_id)) else -1).first()
        if run is None:
            raise ExportError(f"--run: no fidelity run {run_id!r} in this study")
    else:
        run = _run(request)
    return None if run is None else report(run)


def _head(rep) -> dict:
    return {"run": rep.fid_run.pk, "subject": rep.fid_run.subject.name, "suite": rep.fid_run.suite.name}


def _empty(columns: list[str]) -> Table:
    # No run yet: an empty table (with its manifest) rather than an error, as the page shows none.
    return Table(columns, [], meta={"fidelity": {"run": None, "note": "no fidelity run in this study"},
                                    "sources": [], "applied": ["model", "run"]})


@register("fidelity-table1", reads=TRACE_ONLY, suites=True, help="the report's Table 1 (perturbations ranked by robustness) of --run, else the "
                                  "newest run of --model: one row per perturbation, as the page shows it")
def fidelity_table1(request: ExportRequest) -> Table:
    rep = _report(request)
    if rep is None:
        return _empty(TABLE1_COLUMNS)
    head = _head(rep)
    rows = [{**head, "rank": k, **r.to_dict()} for k, r in enumerate(rep.perturbation, start=1)]
    return Table(TABLE1_COLUMNS, rows, meta={"fidelity": {"run": rep.fid_run.pk, "provenance": rep.provenance},
                                             "sources": [f"fidelity:{rep.fid_run.subject.name}"],
                                             "applied": ["model", "run"]})


@register("fidelity-table2", reads=TRACE_ONLY, suites=True, help="the report's Table 2 (counterfactuals) of --run, else the newest run of --model: "
                                  "one row per group (all, by strategy, by magnitude, by complexity), long format")
def fidelity_table2(request: ExportRequest) -> Table:
    rep = _report(request)
    if rep is None:
        return _empty(TABLE2_COLUMNS)
    head = _head(rep)
    t = rep.counterfactual
    rows = []
    if t is not None:
        rows.append({**head, "grouping": "all", **t.overall.to_dict()})
        for grouping, part in (("strategy", t.by_strategy), ("magnitude", t.by_magnitude),
                               ("complexity", t.by_complexity)):
            rows += [{**head, "grouping": grouping, **r.to_dict()} for r in part]
    return Table(TABLE2_COLUMNS, rows, meta={"fidelity": {"run": rep.fid_run.pk, "provenance": rep.provenance},
                                             "sources": [f"fidelity:{rep.fid_run.subject.name}"],
                                             "applied": ["model", "run"]})


SYMBOLIC_COLUMNS = ["model", "variant", "level", "key", "n", "correct", "accuracy"]


@register("gsm-symbolic", reads=TRACE_ONLY, suites=True, help="GSM-Symbolic accuracy of --model (else every model) as the paper reports it, long "
                               "format: per variant one row per instance set (level set), per template (level "
                               "template), and the mean and sd over the sets (level mean, sd)")
def gsm_symbolic(request: ExportRequest) -> Table:
    models = [request.model] if request.model else symbolic_models(request.study)
    rows: list[dict] = []
    for model in models:
        for variant, d in symbolic_accuracy(request.study, model).items():
            head = {"model": model, "variant": variant}
            rows += [{**head, "level": "set", "key": str(s.index), "n": s.n, "correct": s.correct,
                      "accuracy": s.accuracy} for s in d.sets]
            rows += [{**head, "level": "template", "key": t, "n": n, "correct": c, "accuracy": c / n}
                     for t, (c, n) in d.per_template.items()]
            rows += [{**head, "level": "mean", "key": "", "n": len(d.sets), "correct": None, "accuracy": d.mean},
                     {**head, "level": "sd", "key": "", "n": len(d.sets), "correct": None, "accuracy": d.sd}]
    return Table(SYMBOLIC_COLUMNS, rows, schema={"model": "string", "variant": "string", "level": "string",
                                                 "key": "string", "n": "int64", "correct": "float64",
                                                 "accuracy": "float64"},
                 meta={"gsm_symbolic": {"sd": "population standard deviation over the instance sets (ddof=0)",
                                        "note": "a trace without a checked answer counts as wrong"},
                       "sources": [f"gsm-symbolic:{m}" for m in models], "applied": ["model"]})
