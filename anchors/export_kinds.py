"""Export kinds of step importance (``export --what ...``): ``step-importance`` (one row per trace, step and
source) and ``step-importance-by-tag`` (the study page's table). The manifest names each run's regime: model,
N, temperature, seed, continuation mode, similarity method and code version."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from anchors import summaries
from anchors.core.measures import MEASURES
from anchors.models import StepImportance
from annotation.gate import TRACE_ONLY
from scoring.exports import ExportError, ExportRequest, Table, register

FIELDS = ["trace_id", "model", "step", "channel", "source", "run", "text", *MEASURES, "n", "intervals", "depends_on",
          "tags", "samples", "temperature", "seed", "code_version"]
BY_TAG_FIELDS = ["model", "tag", "steps", "measure", "mean", "ci_low", "ci_high", "values", "tags"]


@register("step-importance", reads=TRACE_ONLY,
          help="one row per trace, thought step and source (a step-importance run, or an imported analysis): "
               "accuracy, every importance measure, n, intervals, dependencies and the function tags you may read")
def step_importance(request: ExportRequest) -> Table:
    qs = StepImportance.objects.filter(trace__study=request.study).select_related("trace", "step", "irun")
    if request.model:
        qs = qs.filter(trace__model=request.model)
    run = request.extra.get("run")
    if run:
        try:
            qs = qs.filter(irun_id=int(run))
        except ValueError:
            raise ExportError(f"--run: not a run id: {run!r}") from None
    rows_list = list(qs.order_by("trace__trace_id", "step__index", "source", "irun_id", "origin"))
    tags = summaries.readable_tags([r.step_id for r in rows_list], request.membership)

    def rows() -> Iterator[dict[str, Any]]:
        for r in rows_list:
            p = r.irun.params if r.irun is not None else {}
            yield {"trace_id": r.trace.trace_id, "model": r.trace.model, "step": r.step.index,
                   "channel": r.step.channel, "source": r.source_name, "run": r.irun_id, "text": r.step.text,
                   **{m: getattr(r, m) for m in MEASURES}, "n": r.n, "intervals": r.intervals,
                   "depends_on": r.depends_on,
                   "tags": "; ".join(f"{source}:{tag}" for source, tag in tags.get(r.step_id, [])),
                   "samples": p.get("samples"),
                   "temperature": p.get("temperature") if p.get("temperature") is not None
                   else (p.get("decoding") or {}).get("temperature"),
                   "seed": p.get("seed"), "code_version": p.get("code_version", "")}

    schema = {"trace_id": "string", "model": "string", "step": "int64", "channel": "string", "source": "string",
              "run": "int64", "text": "string", **{m: "float64" for m in MEASURES}, "n": "int64", "intervals": "json",
              "depends_on": "json", "tags": "string", "samples": "int64", "temperature": "float64", "seed": "int64",
              "code_version": "string"}
    return Table(FIELDS, rows(), schema=schema, meta=summaries.manifest_meta(request.study, summaries.RUNS))


def _by_tag_reads_checked(request: ExportRequest) -> summaries.Choice:
    from annotation import gate

    choice = summaries.parse_choice(request.study, {k: str(v) for k, v in request.extra.items()}, request.membership)
    gate.check(request.membership, "step importance by function tag", summaries.reads(choice))
    return choice


@register("step-importance-by-tag", reads=TRACE_ONLY,
          help="mean importance per model and function tag with its bootstrap interval (the step-importance page's "
               "table; options measure, tags, values)")
def step_importance_by_tag(request: ExportRequest) -> Table:
    choice = _by_tag_reads_checked(request)
    table = summaries.by_tag(request.study, choice, request.membership)
    return Table(BY_TAG_FIELDS, table, meta={**summaries.manifest_meta(request.study, choice.values),
                                             "measure": choice.measure, "tag_source": choice.tags,
                                             "value_source": choice.values})
