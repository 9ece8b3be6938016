"""The review page's step-importance panel (registered in annotation.review.panels): a heat map of one measure
over the thought's steps (toggle the measure and the source), the top anchors with the function tags the
member may read, and the steps each depends on where the source says. Values are the trace's (a run's
measurements or a published analysis's); tags follow the gate (anchors.summaries.readable_tags)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.template.loader import render_to_string

from anchors import summaries
from anchors.core.measures import MEASURES
from anchors.models import StepImportance
from annotation.models import Membership, Step, Trace

TOP_ANCHORS = 5
DEFAULT_MEASURE = "counterfactual_importance_kl"


def sources_of(trace: Trace) -> dict[str, list[StepImportance]]:
    """{source name: rows} of the trace: each run's rows (newest run first), then each import's."""
    out: dict[str, list[StepImportance]] = {}
    for row in StepImportance.objects.filter(trace=trace).select_related("step").order_by("source", "-irun_id",
                                                                                        "origin", "step__index"):
        out.setdefault(row.source_name, []).append(row)
    return out


def panel_context(trace: Trace, membership: Membership | None, *, measure: str = "", source: str = "") -> dict[str, Any] | None:
    sources = sources_of(trace)
    if not sources:
        return None
    source = source if source in sources else next(iter(sources))
    measure = measure if measure in MEASURES else DEFAULT_MEASURE
    rows = {r.step.index: r for r in sources[source]}
    steps = list(Step.objects.filter(trace=trace, channel=Step.Channel.THOUGHT).order_by("index").values_list(
        "index", "text"))
    values = {i: getattr(r, measure) for i, r in rows.items()}
    scale = max((abs(v) for v in values.values() if v is not None), default=0.0) or 1.0
    cells = []
    for index, text in steps:
        v = values.get(index)
        cells.append({"index": index, "value": v, "text": text[:160],
                      "alpha": round(min(1.0, abs(v) / scale), 3) if v is not None else None,
                      "negative": v is not None and v < 0})
    ranked = sorted((r for r in rows.values() if getattr(r, measure) is not None),
                    key=lambda r: abs(getattr(r, measure)), reverse=True)[:TOP_ANCHORS]
    tags = summaries.readable_tags([r.step_id for r in ranked], membership)
    top = [{"index": r.step.index, "text": r.step.text[:300], "value": getattr(r, measure),
            "interval": r.intervals.get(measure), "n": r.n, "depends_on": r.depends_on,
            "tags": tags.get(r.step_id, [])} for r in ranked]
    return {"trace": trace, "measure": measure, "measures": summaries.MEASURE_CHOICES, "source": source,
            "sources": list(sources), "cells": cells, "top": top, "measured": len(rows)}


def review_panel(request: HttpRequest, trace: Trace, membership: Membership) -> str:
    context = panel_context(trace, membership)
    if context is None:
        return ""
    return render_to_string("anchors/panel.html#panel", context, request=request)
