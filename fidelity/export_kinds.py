"""The ``fidelity`` export kind: one row per original and per variant of the newest finished
fidelity run of ``--model`` (any suite; the manifest names the run, suite, seeds, regime,
generator and code versions and the semantic-similarity method)."""

from __future__ import annotations

import json

from fidelity import services
from fidelity.models import FidelityRun
from scoring.exports import ExportError, ExportRequest, Table, register


def _run(request: ExportRequest) -> FidelityRun | None:
    runs = FidelityRun.objects.filter(suite__study=request.study).select_related("suite", "subject", "job", "run")
    if request.model:
        runs = runs.filter(subject__name=request.model)
    return runs.order_by("-pk").first()


@register("fidelity", help="fidelity diagnostics of the newest run of --model (one row per original and variant); "
                           "without a run, the metrics of the imported traces alone")
def fidelity(request: ExportRequest) -> Table:
    run = _run(request)
    if run is None:
        rows = services.imported_rows(request.study, request.model)
        if not rows:
            raise ExportError(f"no fidelity run and no trace{' of ' + request.model if request.model else ''} "
                              "in this study")
        rows = [{**r, "changes": json.dumps(r["changes"])} for r in rows]
        return Table(services.ROW_COLUMNS, rows, meta={
            "fidelity": {"run": None, "note": "imported traces alone: no variants, no backward trace",
                         "semantic_similarity": None, "logical_forms": "heuristic (fidelity.core.logic)"},
            "sources": ["imported traces"]})
    rep = services.report(run)
    rows = [{**r, "changes": json.dumps(r["changes"])} for r in services.item_rows(rep)]
    return Table(services.ROW_COLUMNS, rows,
                 meta={"fidelity": {"run": rep.fid_run.pk, "summary": rep.summary, "provenance": rep.provenance,
                                    "perturbation": [r.to_dict() for r in rep.perturbation]},
                       "sources": [f"fidelity:{rep.fid_run.subject.name}"],
                       "counts": {"originals": len(rep.items), "pairs": rep.summary["pairs"]}})
