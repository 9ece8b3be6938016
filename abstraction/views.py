"""Abstraction benchmark pages: the Table-3-style table with the Γ–Δ quadrant chart, the category bars and
the paper's rows as a reference overlay; the paired item view; downloads of the table. Each view starts with
the membership check (404 for non-members) and reads through abstraction.services."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from abstraction import charts, services
from abstraction.core import aggregate as agg
from abstraction.core import generators as gen
from abstraction.models import Benchmark, Item, Result
from annotation import access
from scoring import exports

COLUMNS = [*gen.CATEGORIES, "AVG", "delta_op", "delta_num", "delta_all", "F"]
LABELS = {"delta_op": "Δ_OP", "delta_num": "Δ_NUM", "delta_all": "Δ_ALL", "F": "F(Γ,Δ)"}
DEFAULT_GAMMA, DEFAULT_DELTA = 0.5, 0.1


@cache
def paper_rows() -> tuple[dict[str, Any], ...]:
    data = json.loads((Path(__file__).resolve().parent / "data" / "paper_table3.json").read_text(encoding="utf-8"))
    return tuple(data["rows"])


def _float(value: str | None, default: float, lo: float, hi: float) -> float:
    try:
        out = float(value) if value not in (None, "") else default
    except ValueError:
        return default
    return min(hi, max(lo, out))


def _benchmark(study, name: str | None) -> Benchmark | None:
    if not name:
        return None
    bench = Benchmark.objects.filter(study=study, name=name).first()
    if bench is None:
        raise Http404("no such benchmark")
    return bench


@login_required
@require_GET
def table(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    bench = _benchmark(study, request.GET.get("benchmark"))
    gamma = _float(request.GET.get("gamma"), DEFAULT_GAMMA, 0.0, 1.0)
    delta = _float(request.GET.get("delta"), DEFAULT_DELTA, -1.0, 1.0)
    reference = request.GET.get("reference") == "1"
    # 1,000 resamples cost about 1.5 s per row on the full benchmark: fewer when many rows are shown.
    n_rows = (Result.objects.filter(item__benchmark__study=study, **({"item__benchmark": bench} if bench else {}))
              .values("model", "mode").distinct().count())
    resamples = 1000 if n_rows <= 10 else 200
    rows = services.table(study, benchmark=bench, n_resamples=resamples)
    shown = []
    points = []
    for row in rows:
        s, ci = row.result.stats, row.result.intervals
        cells = [{"key": k, "label": LABELS.get(k, k), "shown": agg.truncate2(s.get(k)), "value": _nan(s.get(k)),
                  "ci": _ci_text(ci.get(k))} for k in COLUMNS]
        badge = ""
        if s["AVG"] == s["AVG"] and s["delta_all"] == s["delta_all"]:
            # Spec §10 A3: the badge uses |Δ| (the proof's reading); the table shows Δ signed.
            badge = ("rule-inductive" if s["AVG"] >= gamma and abs(s["delta_all"]) <= delta
                     else "rule-given" if s["AVG"] >= gamma else "")
        shown.append({"model": row.model, "checker": row.checker, "n_items": row.n_items, "cells": cells,
                      "badge": badge})
        points.append({"group": "this study", "model": row.model, "gamma": _nan(s["AVG"]),
                       "delta": _nan(s["delta_all"]), "gamma_ci": ci.get("AVG"), "delta_ci": ci.get("delta_all")})
    ref = [r | {"shown": [f"{r[k]:.2f}" for k in COLUMNS[:-1]]} for r in paper_rows() if not r["average_row"]] \
        if reference else []
    for r in ref:
        points.append({"group": "paper (Table 3)", "model": r["model"], "gamma": r["AVG"], "delta": r["delta_all"]})
    bars = charts.category_bars([{"model": r.model, **{c: _nan(r.result.stats[c]) for c in gen.CATEGORIES}}
                                 for r in rows])
    benches = list(services.benchmarks_of(study))
    context = {
        "study": study, "membership": membership, "rows": shown, "columns": [LABELS.get(c, c) for c in COLUMNS],
        "benchmarks": benches, "benchmark": bench, "gamma": gamma, "delta": delta, "reference": reference,
        "paper_rows": ref, "quadrant_chart": charts.quadrant(points, gamma, delta), "bars_chart": bars,
        "tasks": gen.PAIRED_TASKS, "query": request.GET.urlencode(), "resamples": resamples,
        "bench_info": [b.describe() | {"counts": b.counts} for b in ([bench] if bench else benches)],
    }
    return render(request, "abstraction/table.html", context)


def _ci_text(ci: list[float] | None) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""


def _nan(v: float | None) -> float | None:
    return None if v is None or v != v else float(v)


@login_required
@require_GET
def items(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    benches = list(services.benchmarks_of(study))
    bench = _benchmark(study, request.GET.get("benchmark")) or (benches[0] if benches else None)
    task = request.GET.get("task") or gen.PAIRED_TASKS[0]
    if task not in gen.PAIRED_TASKS:
        raise Http404("no such paired task")
    try:
        instance = max(0, int(request.GET.get("instance") or 0))
    except ValueError:
        instance = 0
    paired = services.paired_items(study, benchmark=bench, task=task, instance=instance) if bench else None
    instances = []
    if bench is not None:
        instances = sorted(set(Item.objects.filter(benchmark=bench, task=task, variant="raw")
                               .values_list("instance", flat=True)))
    rows = []
    if paired:
        for item in paired["items"]:
            results = paired["by_item"].get(item.pk, {})
            rows.append({"item": item, "cells": [results.get(m) for m in paired["models"]]})
    context = {"study": study, "membership": membership, "benchmarks": benches, "benchmark": bench, "task": task,
               "tasks": gen.PAIRED_TASKS, "instance": instance, "instances": instances[:200],
               "models": paired["models"] if paired else [], "rows": rows}
    return render(request, "abstraction/items.html", context)


@login_required
@require_GET
def download(request: HttpRequest, study_id: int) -> HttpResponse:
    """``format`` = jsonl | csv | parquet: the table (``what=abstraction``) or every checked answer (``what=abstraction-items``) in JSONL, CSV or
    Parquet; ``manifest=1`` gives the manifest that describes it instead."""
    study, membership = access.check_study(request.user, study_id)
    what = request.GET.get("what") or "abstraction"
    if what not in ("abstraction", "abstraction-items"):
        return HttpResponse("what: choose abstraction or abstraction-items", status=400, content_type="text/plain")
    bench = request.GET.get("benchmark") or ""
    _benchmark(study, bench)
    req = exports.ExportRequest(study=study, what=what, membership=membership, extra={"benchmark": bench})
    return exports.download(req, request.GET.get("format") or "csv",
                            manifest_only=request.GET.get("manifest") == "1")
