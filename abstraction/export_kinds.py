"""Export kinds of the abstraction benchmark (registered in scoring.exports through
AbstractionConfig.export_kinds): ``abstraction`` -- the Table-3-style table, one row per (model, prompting
mode) with every Γ, Δ, F and their 95% bootstrap intervals at full precision -- and ``abstraction-items``,
one row per checked answer. The manifest names the benchmark versions (generator version, seed, remap
and SMA modes), the checkers, the inference regimes and the code version."""

from __future__ import annotations

from collections.abc import Iterator

from abstraction import services
from abstraction.core import aggregate as agg
from abstraction.models import Benchmark, Result
from annotation.gate import TRACE_ONLY
from runs.version import code_version
from scoring.exports import ExportError, ExportRequest, Table, register

STAT_COLUMNS = list(agg.STATS)
TABLE_COLUMNS = ["model", "checker", "n_items", *STAT_COLUMNS, *[f"{s}_low" for s in STAT_COLUMNS],
                 *[f"{s}_high" for s in STAT_COLUMNS], "sub_datasets"]
ITEM_COLUMNS = ["benchmark", "category", "sub_dataset", "task", "variant", "instance", "model", "mode", "gold",
                "extracted", "correct", "checker", "det_correct", "llm_correct", "imported_correct", "trace_id",
                "output"]


def _benchmark(request: ExportRequest) -> Benchmark | None:
    name = request.extra.get("benchmark")
    if not name:
        return None
    bench = Benchmark.objects.filter(study=request.study, name=name).first()
    if bench is None:
        raise ExportError(f"no abstraction benchmark named {name!r} in this study")
    return bench


@register("abstraction", reads=TRACE_ONLY, suites=True, help="the abstraction benchmark's table: Γ per category, AVG, Δ_OP/NUM/ALL, F, intervals")
def table(request: ExportRequest) -> Table:
    bench = _benchmark(request)
    rows = services.table(request.study, benchmark=bench, n_resamples=int(request.extra.get("resamples") or 1000))
    out = []
    for row in rows:
        d = row.result.as_dict()
        rec = {"model": row.model, "checker": row.checker, "n_items": row.n_items,
               "sub_datasets": services.dumps(d["sub_datasets"])}
        for s in STAT_COLUMNS:
            rec[s] = d.get(s)
            interval = row.result.intervals.get(s)
            rec[f"{s}_low"], rec[f"{s}_high"] = (interval or [None, None])
        out.append(rec)
    schema = {c: "float64" for c in TABLE_COLUMNS}
    schema.update(model="string", checker="string", n_items="int64", sub_datasets="string")
    meta = services.manifest(request.study, bench, rows, code_version())
    meta.pop("study", None)
    return Table(columns=TABLE_COLUMNS, rows=out, schema=schema, meta={"abstraction": meta})


@register("abstraction-items", reads=TRACE_ONLY, suites=True, help="every checked answer of the abstraction benchmark with all its verdicts")
def items(request: ExportRequest) -> Table:
    bench = _benchmark(request)
    qs = Result.objects.filter(item__benchmark__study=request.study).select_related("item__benchmark")
    if bench is not None:
        qs = qs.filter(item__benchmark=bench)

    def rows() -> Iterator[dict]:
        for r in qs.order_by("item__benchmark__name", "item__sub_dataset", "item__instance", "model", "mode") \
                .iterator(chunk_size=2000):
            i = r.item
            yield {"benchmark": i.benchmark.name, "category": i.category, "sub_dataset": i.sub_dataset,
                   "task": i.task, "variant": i.variant, "instance": i.instance, "model": r.model, "mode": r.mode,
                   "gold": i.answer, "extracted": r.extracted, "correct": r.correct, "checker": r.checker,
                   "det_correct": r.det_correct, "llm_correct": r.llm_correct, "imported_correct": r.imported_correct,
                   "trace_id": r.trace_id, "output": r.output}
    schema = {c: "string" for c in ITEM_COLUMNS}
    schema.update(instance="int64", correct="bool", det_correct="bool", llm_correct="bool", imported_correct="bool",
                  trace_id="int64")
    meta = services.manifest(request.study, bench, [], code_version())
    meta.pop("study", None)
    return Table(columns=ITEM_COLUMNS, rows=rows(), schema=schema, meta={"abstraction": meta})


LONG_COLUMNS = ["model", "checker", "n_items", "statistic", "group", "value", "low", "high"]


@register("abstraction-long", reads=TRACE_ONLY, suites=True, help="the abstraction table in long format: one row per (model, statistic) with its "
                                   "95% interval, and one per (model, sub-dataset) Γ_d -- the page's numbers")
def table_long(request: ExportRequest) -> Table:
    bench = _benchmark(request)
    rows = services.table(request.study, benchmark=bench, n_resamples=int(request.extra.get("resamples") or 1000))
    out = []
    for row in rows:
        d = row.result.as_dict()
        head = {"model": row.model, "checker": row.checker, "n_items": row.n_items}
        for s in STAT_COLUMNS:
            low, high = row.result.intervals.get(s) or [None, None]
            out.append({**head, "statistic": s, "group": "", "value": d.get(s), "low": low, "high": high})
        for sub, value in sorted(d["sub_datasets"].items()):
            out.append({**head, "statistic": "gamma_d", "group": sub, "value": value, "low": None, "high": None})
    schema = {"model": "string", "checker": "string", "n_items": "int64", "statistic": "string", "group": "string",
              "value": "float64", "low": "float64", "high": "float64"}
    meta = services.manifest(request.study, bench, rows, code_version())
    meta.pop("study", None)
    return Table(columns=LONG_COLUMNS, rows=out, schema=schema, meta={"abstraction": meta})
