"""The fidelity report of a run, computed from its stored outputs, and its plain data for the
API and the exports.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from annotation.models import Problem
from fidelity import extractor
from fidelity.core import answer as A
from fidelity.core import complexity, pairs
from fidelity.core import variants as V
from fidelity.core.metrics import BOOTSTRAP, item_metrics, metric_summaries, run_summary
from fidelity.core.text import split_steps
from fidelity.models import FidelityRun, Output, Suite, Variant
from fidelity.suites import gold_paths
from runs.version import code_version


@dataclass
class ItemView:
    """One original with its forward/backward outputs and its variants' outputs."""

    problem: Problem
    hops: complexity.Hops
    forward: Output | None
    backward: Output | None
    variants: list[tuple[Variant, Output | None]]
    metrics: dict[str, Any]


def _output(o: Output | None, gold: str | None, gold_steps: tuple[str, ...]) -> pairs.Output | None:
    if o is None:
        return None
    ans = o.trace.answer if o.trace_id and o.trace else None
    return pairs.Output(o.text, ans or None, tuple(split_steps(o.text)), gold or None, gold_steps)


@dataclass
class Report:
    fid_run: FidelityRun
    items: list[ItemView]
    overall: dict[str, dict[str, Any]]
    by_hops: dict[str, dict[str, dict[str, Any]]]
    perturbation: list[pairs.PerturbationRow]
    counterfactual: pairs.CounterfactualTable | None
    cf_pairs: list[tuple[Variant, pairs.CounterfactualPair]]
    summary: dict[str, Any]
    provenance: dict[str, Any]


def report(record: FidelityRun) -> Report:
    """Everything the report page, the API and the exports show, from the stored outputs."""
    suite = record.suite
    outputs = {(o.problem_id, o.role): o for o in Output.objects.filter(fid_run=record).select_related("trace")}
    originals = list(record.run.config.get("originals", []))
    problems = {p.pk: p for p in Problem.objects.filter(pk__in=originals)}
    variants = list(Variant.objects.filter(suite=suite, original_id__in=originals)
                    .select_related("problem").order_by("original__problem_id", "strategy", "index"))
    paths = gold_paths(originals)
    by_original: dict[int, list[Variant]] = defaultdict(list)
    for v in variants:
        by_original[v.original_id].append(v)
    items: list[ItemView] = []
    form_sources: Counter[str] = Counter()
    pert_pairs: dict[str, list[tuple[pairs.Output, pairs.Output]]] = defaultdict(list)
    cf: list[tuple[Variant, pairs.CounterfactualPair]] = []
    for pk in originals:
        p = problems.get(pk)
        if p is None:
            continue
        # MenatQA keeps the bare question in meta (the statement carries the context too).
        hops = complexity.hops((p.meta or {}).get("question") or p.statement, (p.meta or {}).get("time_scope"))
        gsteps = tuple(paths.get(pk, []))
        fo, bo = outputs.get((pk, Output.Role.FORWARD)), outputs.get((pk, Output.Role.BACKWARD))
        base = _output(fo, p.gold_answer, gsteps)
        llm, source = extractor.forms_of(fo, len(base.steps)) if base else (None, "")
        if source:
            form_sources[source] += 1
        metrics = item_metrics(p.statement, p.gold_answer, gsteps, base, bo.text if bo else None, hops,
                               llm) if base else {}
        vlist = []
        for v in by_original.get(pk, []):
            vo = outputs.get((v.problem_id, Output.Role.FORWARD))
            vlist.append((v, vo))
            var = _output(vo, v.problem.gold_answer, gsteps)
            if base is None or var is None:
                continue
            if v.axis == Variant.Axis.PERTURBATION:
                pert_pairs[v.strategy].append((base, var))
            elif v.axis == Variant.Axis.COUNTERFACTUAL:
                new_values = [V.number_value(c["new"]) for c in v.changes]
                cf.append((v, pairs.counterfactual_pair(
                    base, var, new_values, strategy=v.strategy, magnitude=v.magnitude, complexity=hops.category,
                    gold_known=v.gold == Variant.Gold.DERIVED)))
        items.append(ItemView(p, hops, fo, bo, vlist, metrics))
    overall, by_hops = metric_summaries([(i.hops.category, i.metrics) for i in items if i.metrics])
    rows = pairs.rank(pairs.perturbation_row(V.LABELS[s], ps) for s, ps in pert_pairs.items())
    table = pairs.counterfactual_table([c for _v, c in cf]) if cf else None
    summary = run_summary(overall, rows, table, golds_derived=sum(1 for v in variants if v.gold == Variant.Gold.DERIVED),
                          golds_unknown=sum(1 for v in variants if v.gold == Variant.Gold.UNKNOWN))
    cfg = record.run.config
    provenance = {
        "subject_model": record.subject.name, "subject_model_version": record.config_version,
        "model": cfg.get("model"), "temperature": cfg.get("temperature"), "seed": cfg.get("seed"),
        "max_tokens": cfg.get("max_tokens"), "prompt_template": f"{cfg.get('template_name')} v{cfg.get('template_version')}",
        "backward_prompt_version": cfg.get("backward_prompt_version"), "suite": suite.name, "suite_seed": suite.seed,
        "generator_version": suite.generator_version, "code_version": cfg.get("code_version") or code_version(),
        "semantic_similarity": pairs.SEMSIM_METHOD,
        "logical_forms": "; ".join([f"{n} by {name}" for name, n in form_sources.items()]
                                   + [f"{len([i for i in items if i.metrics]) - sum(form_sources.values())} by the "
                                      f"heuristic (fidelity.core.logic)"]),
        "bootstrap": BOOTSTRAP,
    }
    return Report(record, items, overall, by_hops, rows, table, cf, summary, provenance)


def runs_of_suite(suite: Suite):
    return FidelityRun.objects.filter(suite=suite).select_related("subject", "job", "run").order_by("subject__name", "pk")


def trace_numbers(text: str) -> set[Fraction]:
    return pairs.numbers_in(text)


ROW_COLUMNS = ["run", "suite", "subject_model", "subject_model_version", "role", "problem_id", "original_id", "axis",
               "strategy", "magnitude", "hop_category", "hop_graded", "gold", "gold_status", "answer", "em", "f1",
               "bleu", "cot_em", "step_sim", "faithfulness", "plausibility", "hallucination", "confidence",
               "consistency", "t_hat", "forward_steps", "backward_steps", "cp_value", "cp_diff", "ra", "aa",
               "aa_strict", "sc", "changes", "question", "text"]


def _answer(o: Output | None) -> str | None:
    return (o.trace.answer or None) if o is not None and o.trace_id and o.trace else None


def item_rows(rep: Report) -> list[dict[str, Any]]:
    """One row per original (its metrics) and one per variant (its pair indicators)."""
    fr = rep.fid_run
    head = {"run": fr.pk, "suite": fr.suite.name, "subject_model": fr.subject.name,
            "subject_model_version": fr.config_version}
    cf = {v.pk: c for v, c in rep.cf_pairs}
    rows: list[dict[str, Any]] = []
    for i in rep.items:
        m = i.metrics
        rows.append({**head, "role": "original", "problem_id": i.problem.problem_id, "original_id": i.problem.problem_id,
                     "axis": "", "strategy": "", "magnitude": "", "hop_category": i.hops.category,
                     "hop_graded": i.hops.graded, "gold": i.problem.gold_answer, "gold_status": "given",
                     "answer": _answer(i.forward), **{k: m.get(k) for k in (
                         "em", "f1", "bleu", "cot_em", "step_sim", "faithfulness", "plausibility", "hallucination",
                         "confidence", "consistency", "t_hat", "forward_steps", "backward_steps")},
                     "changes": [], "question": i.problem.statement, "text": i.forward.text if i.forward else None})
        for v, out in i.variants:
            c = cf.get(v.pk)
            rows.append({**head, "role": "variant", "problem_id": v.problem.problem_id,
                         "original_id": i.problem.problem_id, "axis": v.axis, "strategy": v.strategy,
                         "magnitude": v.magnitude, "hop_category": i.hops.category, "hop_graded": i.hops.graded,
                         "gold": v.problem.gold_answer or None, "gold_status": v.gold, "answer": _answer(out),
                         "em": A.exact_match(_answer(out), v.problem.gold_answer) if v.problem.gold_answer else None,
                         "cp_value": c.cp_value if c else None, "cp_diff": c.cp_diff if c else None,
                         "ra": c.ra if c else None, "aa": c.aa if c else None, "aa_strict": c.aa_strict if c else None,
                         "sc": c.sc if c else None, "changes": v.changes, "question": v.problem.statement,
                         "text": out.text if out else None})
    return rows


def report_data(rep: Report) -> dict[str, Any]:
    """The report as JSON-ready data (REST)."""
    t = rep.counterfactual
    return {
        "run": rep.fid_run.pk, "suite": rep.fid_run.suite.name, "subject_model": rep.fid_run.subject.name,
        "status": rep.fid_run.job.status, "axes": rep.fid_run.axes, "summary": rep.summary,
        "perturbation": [r.to_dict() for r in rep.perturbation],
        "counterfactual": None if t is None else {
            "overall": t.overall.to_dict(), "by_strategy": [r.to_dict() for r in t.by_strategy],
            "by_magnitude": [r.to_dict() for r in t.by_magnitude],
            "by_complexity": [r.to_dict() for r in t.by_complexity]},
        "overall": rep.overall, "by_hops": rep.by_hops, "provenance": rep.provenance,
    }
