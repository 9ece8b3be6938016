"""Export kinds of the faithfulness app (``export --what ...``): interventions,
ifr, anytime, anytime-curve, early-answering, evidence. Each row names its run, mode and code
version; the manifest (scoring.exports.write_file) adds study, counts and time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from annotation.gate import TRACE_ONLY
from faithfulness.core import early as early_core
from faithfulness.core import tiers as tier_core
from faithfulness.evidence import EVIDENCE_READS
from faithfulness.evidence import evidence as study_evidence
from faithfulness.models import AnytimePoint, FaithfulnessRun, Intervention
from faithfulness.summaries import anytime_summary, early_curves, ifr_summary
from scoring.exports import ExportError, ExportRequest, Table, register

INTERVENTION_FIELDS = ["run", "model", "mode", "trace_id", "problem_id", "kind", "step", "why", "old_value",
                       "new_value", "implied", "status", "reason", "original_answer", "original_correct", "new_answer",
                       "new_correct", "strict", "strict_computed", "lenient", "monotone", "invariant", "edited_step",
                       "original_step", "continuation", "forced", "forced_answer", "seed", "code_version"]
IFR_FIELDS = ["run", "model", "kind", "mode", "interventions", "traces", "criterion", "value", "ci_low", "ci_high",
              "n_traces", "n_interventions", "forced", "no_answer", "code_version"]
POINT_FIELDS = ["run", "model", "mode", "grid", "trace_id", "budget", "within", "used", "prefix_chars", "status",
                "answer", "correct", "code_version"]
CURVE_FIELDS = ["run", "model", "mode", "grid", "budget", "acc", "own_answer", "n", "auc_any", "code_version"]
EVIDENCE_FIELDS = ["model", "tier", "level", "complete", "qualifier", "badges", "accuracy", "svr", "vsr",
                   "ifr_lenient", "auc_any", "auc_think", "early_aoc", "decision_fraction", "after_share",
                   "false_stop_rate", "late_stop_rate", "missing", "code_version"]


def _runs(request: ExportRequest, kind: str) -> list[FaithfulnessRun]:
    qs = FaithfulnessRun.objects.filter(subject__study=request.study, kind=kind).select_related("subject")
    if request.model:
        qs = qs.filter(subject__name=request.model)
    run = request.extra.get("run")
    if run:
        try:
            qs = qs.filter(pk=int(run))
        except ValueError:
            raise ExportError(f"--run: not a run id: {run!r}") from None
        return list(qs)
    # The newest run per subject model, continuation mode and grid, as the study's page and the report read them.
    latest: dict[tuple[str, str, str], FaithfulnessRun] = {}
    for record in qs.order_by("-created_at", "-pk"):
        latest.setdefault((record.subject.name, record.mode, record.grid), record)
    return list(latest.values())


@register("interventions", reads=TRACE_ONLY, help="one row per intervention of the newest run per subject model and mode (or --run)")
def interventions(request: ExportRequest) -> Table:
    runs = _runs(request, FaithfulnessRun.Kind.INTERVENTIONS)

    def rows() -> Iterator[dict[str, Any]]:
        for record in runs:
            for i in Intervention.objects.filter(frun=record).select_related("trace__problem").order_by("pk"):
                yield {"run": record.pk, "model": record.subject.name, "mode": record.mode, "trace_id": i.trace.trace_id,
                       "problem_id": i.trace.problem.problem_id, "kind": i.kind, "step": i.step, "why": i.why,
                       "old_value": i.old_value, "new_value": i.new_value, "implied": i.implied, "status": i.status,
                       "reason": i.reason, "original_answer": i.original_answer,
                       "original_correct": i.original_correct, "new_answer": i.new_answer,
                       "new_correct": i.new_correct, "strict": i.strict, "strict_computed": i.strict_computed,
                       "lenient": i.lenient, "monotone": i.monotone, "invariant": i.invariant,
                       "edited_step": i.edited_step, "original_step": i.original_step,
                       "continuation": i.continuation, "forced": i.forced,
                       "forced_answer": (i.result.get("forced") or {}).get("text", ""), "seed": record.params.get("seed"),
                       "code_version": record.params.get("code_version", "")}

    return Table(INTERVENTION_FIELDS, rows(), meta={"runs": [f.pk for f in runs]})


@register("ifr", reads=TRACE_ONLY, help="IFR per model, kind and continuation mode (strict, lenient, monotone; paraphrase invariance)")
def ifr(request: ExportRequest) -> Table:
    runs = _runs(request, FaithfulnessRun.Kind.INTERVENTIONS)
    out = []
    for record in runs:
        summary = ifr_summary(record)
        for r in summary["rows"]:
            for criterion in ("strict", "lenient", "monotone", "invariance"):
                if criterion not in r:
                    continue
                rate = r[criterion]
                ci = rate["ci"] or [None, None]
                out.append({"run": record.pk, "model": r["model"], "kind": r["kind"], "mode": r["mode"],
                            "interventions": r["interventions"], "traces": r["traces"], "criterion": criterion,
                            "value": rate["value"], "ci_low": ci[0], "ci_high": ci[1], "n_traces": rate["traces"],
                            "n_interventions": rate["interventions"], "forced": r.get("forced", 0),
                            "no_answer": r["no_answer"], "code_version": summary["code_version"]})
    return Table(IFR_FIELDS, out, meta={"runs": [f.pk for f in runs]})


@register("anytime", reads=TRACE_ONLY, help="one row per (trace, budget) of the newest anytime run per subject model, mode and grid")
def anytime(request: ExportRequest) -> Table:
    runs = _runs(request, FaithfulnessRun.Kind.ANYTIME)

    def rows() -> Iterator[dict[str, Any]]:
        for record in runs:
            for p in AnytimePoint.objects.filter(frun=record).select_related("trace").order_by("pk"):
                yield {"run": record.pk, "model": record.subject.name, "mode": record.mode, "grid": record.grid,
                       "trace_id": p.trace.trace_id, "budget": "full" if p.budget is None else p.budget,
                       "within": p.within, "used": p.used, "prefix_chars": p.prefix_chars, "status": p.status,
                       "answer": p.answer, "correct": p.correct, "code_version": record.params.get("code_version", "")}

    return Table(POINT_FIELDS, rows(), meta={"runs": [f.pk for f in runs]})


@register("anytime-curve", reads=TRACE_ONLY, help="Acc(b) per budget and AUC_any (the table behind the anytime chart)")
def anytime_curve(request: ExportRequest) -> Table:
    runs = _runs(request, FaithfulnessRun.Kind.ANYTIME)
    out = []
    for record in runs:
        s = anytime_summary(record)
        for label, acc, own in zip(s["labels"], s["acc"] or [None] * len(s["labels"]), s["own_answer"], strict=True):
            out.append({"run": record.pk, "model": s["model"], "mode": s["mode"], "grid": s["grid"], "budget": label,
                        "acc": acc, "own_answer": own, "n": s["n"], "auc_any": s["auc"],
                        "code_version": s["code_version"]})
    return Table(CURVE_FIELDS, out, meta={"runs": [f.pk for f in runs]})


EARLY_FIELDS = ["run", "model", "mode", "grid", "trace_id", "steps", "k", "fraction", "forced_answer",
                "final_answer", "same", "importance", "aoc", "decision_point", "after_share", "code_version"]


@register("early-answering", reads=TRACE_ONLY, help="one row per (trace, cut point k) of the newest early-answering run per subject "
                                  "model and mode: the forced answer, whether it is the final one, and the trace's "
                                  "AOC, decision point and share of thought after it")
def early_answering(request: ExportRequest) -> Table:
    runs = _runs(request, FaithfulnessRun.Kind.EARLY)

    def rows() -> Iterator[dict[str, Any]]:
        for record in runs:
            for tid, c, _ends in early_curves(record):
                aoc, d, share = early_core.aoc(c), early_core.decision_point(c), early_core.after_share(c)
                importance = dict(early_core.importance(c))
                for k, x, answer, same in zip(c.ks, c.fractions, c.answers, c.matches, strict=True):
                    yield {"run": record.pk, "model": record.subject.name, "mode": record.mode, "grid": record.grid,
                           "trace_id": tid, "steps": c.n_steps, "k": k, "fraction": x, "forced_answer": answer,
                           "final_answer": c.final, "same": same, "importance": importance.get(k), "aoc": aoc,
                           "decision_point": d, "after_share": share,
                           "code_version": record.params.get("code_version", "")}

    return Table(EARLY_FIELDS, rows(), meta={"runs": [f.pk for f in runs]})


@register("evidence", reads=EVIDENCE_READS, help="the evidence tier and headline numbers per model, with the missing report items")
def evidence(request: ExportRequest) -> Table:
    out = []
    for ev in study_evidence(request.study, request.model or None):
        rep = tier_core.template(ev)
        t, h = rep["tier"], rep["headline"]
        out.append({"model": ev.model, "tier": t["label"], "level": t["level"], "complete": t["complete"],
                    "qualifier": t["qualifier"], "badges": ", ".join(t["badges"]), "accuracy": h["accuracy"],
                    "svr": h["svr"], "vsr": h["vsr"], "ifr_lenient": h["ifr_lenient"], "auc_any": h["auc"],
                    "auc_think": h["auc_think"], "early_aoc": h["early_aoc"],
                    "decision_fraction": h["decision_fraction"], "after_share": h["after_share"],
                    "false_stop_rate": h["false_stop_rate"], "late_stop_rate": h["late_stop_rate"],
                    "missing": "; ".join(rep["missing"]), "code_version": rep["code_version"]})
    return Table(EVIDENCE_FIELDS, out)
