"""The ``fidelity`` export kind: one row per original and per variant of the newest finished
fidelity run of ``--model`` (any suite; the manifest names the run, suite, seeds, regime,
generator and code versions and the semantic-similarity method)."""

from __future__ import annotations

import json

from fidelity import services
from fidelity.models import FidelityRun
from scoring.exports import ExportError, ExportRequest, Table, register


def _run(request: ExportRequest) -> FidelityRun:
    runs = FidelityRun.objects.filter(suite__study=request.study).select_related("suite", "subject", "job", "run")
    if request.model:
        runs = runs.filter(subject__name=request.model)
    run = runs.order_by("-pk").first()
    if run is None:
        raise ExportError(f"no fidelity run{' of ' + request.model if request.model else ''} in this study")
    return run


@register("fidelity", help="fidelity diagnostics of the newest run (--model): one row per original and variant",
          check=lambda r: _run(r) and None)
def fidelity(request: ExportRequest) -> Table:
    rep = services.report(_run(request))
    rows = [{**r, "changes": json.dumps(r["changes"])} for r in services.item_rows(rep)]
    return Table(services.ROW_COLUMNS, rows,
                 meta={"fidelity": {"run": rep.fid_run.pk, "summary": rep.summary, "provenance": rep.provenance,
                                    "perturbation": [r.to_dict() for r in rep.perturbation]},
                       "sources": [f"fidelity:{rep.fid_run.subject.name}"],
                       "counts": {"originals": len(rep.items), "pairs": rep.summary["pairs"]}})
