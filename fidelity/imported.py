"""Diagnostics on imported or generated traces that need no fidelity run: the performance drop
rate (GSM-Plus style), the imported traces alone (spec §12) and GSM-Symbolic accuracy over instance sets.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotation.models import Problem, Study, Trace
from fidelity.core import complexity, instance_sets, pairs
from fidelity.core.metrics import item_metrics
from fidelity.core.text import split_steps
from fidelity.importing import IMPORT_KEY, SYMBOLIC_SOURCE
from fidelity.models import Suite, Variant
from fidelity.suites import gold_paths


def pdr(study: Study, model: str, *, suite: Suite | None = None) -> list[pairs.PdrRow]:
    """Per perturbation type (the variant's strategy): accuracy on the seeds and on the variants of
    ``model``'s traces, PDR = 1 - acc(variant)/acc(original), and the seed-vs-variant confusion
    table. A pair counts when both problems have a trace of the model (the first of each problem
    by id; any source: imported or generated); a trace is correct when its answer was checked right."""
    variants = Variant.objects.filter(suite__study=study)
    if suite is not None:
        variants = variants.filter(suite=suite)
    links = list(variants.values_list("original_id", "problem_id", "strategy"))
    wanted = {pk for o, v, _s in links for pk in (o, v)}
    correct: dict[int, bool] = {}
    # [I] accuracy counts a trace without an extracted answer (answer_correct unknown) as not correct.
    for problem, ok in (Trace.objects.filter(study=study, model=model, problem_id__in=wanted)
                        .order_by("problem_id", "trace_id").values_list("problem_id", "answer_correct")):
        correct.setdefault(problem, ok is True)
    return pairs.pdr_rows((s, correct[o], correct[v]) for o, v, s in links if o in correct and v in correct)


def imported_rows(study: Study, model: str = "", limit: int | None = None) -> list[dict[str, Any]]:
    """Per-trace metrics of the study's traces (of ``model``, or every model) with no run at all:
    hops, EM/F1/BLEU, CoT-EM and step similarity against the skeleton, F, P, hallucination,
    confidence and T̂ of the forward trace. No consistency (it needs a backward trace)."""
    traces = Trace.objects.filter(study=study).select_related("problem").order_by("model", "problem__problem_id", "pk")
    if model:
        traces = traces.filter(model=model)
    if limit:
        traces = traces[:limit]
    traces = list(traces)
    paths = gold_paths(sorted({t.problem_id for t in traces}))
    rows = []
    for t in traces:
        p = t.problem
        hops = complexity.hops((p.meta or {}).get("question") or p.statement, (p.meta or {}).get("time_scope"))
        gsteps = tuple(paths.get(p.pk, []))
        out = pairs.Output(t.raw, t.answer or None, tuple(split_steps(t.raw)), p.gold_answer or None, gsteps)
        m = item_metrics(p.statement, p.gold_answer, gsteps, out, None, hops)
        rows.append({"run": None, "suite": "", "subject_model": t.model, "subject_model_version": None,
                     "role": "imported", "problem_id": p.problem_id, "original_id": p.problem_id, "axis": "",
                     "strategy": "", "magnitude": "", "hop_category": hops.category, "hop_graded": hops.graded,
                     "gold": p.gold_answer, "gold_status": "given", "answer": t.answer or None,
                     **{k: m.get(k) for k in ("em", "f1", "bleu", "cot_em", "step_sim", "faithfulness", "plausibility",
                                              "hallucination", "confidence", "consistency", "t_hat", "forward_steps",
                                              "backward_steps")},
                     "changes": [], "question": p.statement, "text": t.raw})
    return rows


def _symbolic_problems(study: Study) -> dict[int, dict[str, Any]]:
    """pk -> ``meta.fidelity_import`` of the study's imported GSM-Symbolic problems."""
    return {pk: meta[IMPORT_KEY] for pk, meta in Problem.objects.filter(
        study=study, meta__has_key=IMPORT_KEY).values_list("pk", "meta")
        if (meta or {}).get(IMPORT_KEY, {}).get("source") == SYMBOLIC_SOURCE}


def symbolic_models(study: Study) -> list[str]:
    """The models with a trace of an imported GSM-Symbolic problem."""
    return sorted(set(Trace.objects.filter(study=study, problem_id__in=list(_symbolic_problems(study)))
                      .values_list("model", flat=True)))


def symbolic_accuracy(study: Study, model: str) -> dict[str, instance_sets.Distribution]:
    """Per GSM-Symbolic variant (symbolic, p1, p2): the distribution of ``model``'s accuracy over the
    instance sets (fidelity.core.instance_sets), from the first trace of each imported instance (by
    trace id; a trace without a checked answer counts as wrong, as in ``pdr``)."""
    problems = _symbolic_problems(study)
    first: dict[int, bool] = {}
    for problem, ok in (Trace.objects.filter(study=study, model=model, problem_id__in=list(problems))
                        .order_by("problem_id", "trace_id").values_list("problem_id", "answer_correct")):
        first.setdefault(problem, ok is True)
    by_variant: dict[str, list[tuple[str, int, bool]]] = defaultdict(list)
    for pk, ok in first.items():
        info = problems[pk]
        by_variant[str(info.get("strategy"))].append((str(info.get("template")), int(info.get("instance", 0)), ok))
    return {v: instance_sets.distribution(rows) for v, rows in sorted(by_variant.items())}
