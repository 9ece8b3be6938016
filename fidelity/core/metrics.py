"""Every per-item metric of a fidelity report (spec §3, §4, §6, §7) and their summaries with
a bootstrap interval. Pure: outputs in, numbers out.
"""

from __future__ import annotations

from typing import Any

from fidelity.core import answer as A
from fidelity.core import complexity, explanation, logic, pairs
from fidelity.core.text import split_steps, tail_field
from scoring.core.bootstrap import bootstrap_ci

BOOTSTRAP = {"n_resamples": 1000, "seed": 0, "level": 0.95}


def _ci(values: list[float]) -> list[float] | None:
    ci = bootstrap_ci(values, n_resamples=BOOTSTRAP["n_resamples"], seed=BOOTSTRAP["seed"], level=BOOTSTRAP["level"])
    return [ci[0], ci[1]] if ci else None


def summarise(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "mean": (sum(values) / len(values)) if values else None, "ci": _ci(values)}


ITEM_METRICS = ("em", "f1", "bleu", "cot_em", "step_sim", "faithfulness", "plausibility", "plausibility_clipped",
                "hallucination", "confidence", "consistency", "t_hat", "t_hat_backward", "forward_steps",
                "backward_steps", "hop_graded")


def item_metrics(question: str, gold: str, gold_steps: tuple[str, ...], fwd: pairs.Output,
                 bwd_text: str | None, hops: complexity.Hops, llm_forms: list | None = None) -> dict[str, Any]:
    """Every per-item metric of spec §3, §4, §6, §7 for one original (``llm_forms``: the LLM
    extractor's forms of the forward steps; the heuristic's otherwise)."""
    f = explanation.faithfulness(question, fwd.text, fwd.answer, fwd.steps)
    p = explanation.plausibility(question, fwd.text)
    forms = llm_forms if llm_forms is not None else logic.extract_all(fwd.steps)
    t = logic.transitivity(forms)
    m: dict[str, Any] = {
        "em": A.exact_match(fwd.answer, gold), "f1": A.f1(fwd.answer, gold), "bleu": A.bleu(fwd.answer, gold),
        "cot_em": A.cot_em(fwd.steps, gold_steps) if gold_steps else None,
        "step_sim": A.step_similarity(fwd.steps, gold_steps) if gold_steps else None,
        "faithfulness": f.score, "plausibility": p.score, "plausibility_clipped": p.clipped,
        "hallucination": int(explanation.hallucinated(f.score, p.score)),
        "confidence": explanation.confidence(fwd.answer, fwd.steps, fwd.text),
        "t_hat": t.adjusted, "too_short": t.too_short, "forward_steps": len(fwd.steps),
        "hop_graded": hops.graded, "faithfulness_parts": f.to_dict(), "plausibility_parts": p.to_dict(),
        "forms": [x.to_dict() for x in forms], "graph": logic.graph(forms).to_dict(),
        "consistency": None, "t_hat_backward": None, "backward_steps": None, "backward_question": None,
    }
    if bwd_text is not None:
        bsteps = split_steps(bwd_text)
        m["consistency"] = logic.consistency(fwd.steps, bsteps)
        m["t_hat_backward"] = logic.transitivity(logic.extract_all(bsteps)).adjusted
        m["backward_steps"] = len(bsteps)
        m["backward_question"] = tail_field(bwd_text, "question")
    return m


def metric_summaries(items: list[tuple[str, dict[str, Any]]]) -> tuple[dict[str, dict[str, Any]],
                                                                      dict[str, dict[str, dict[str, Any]]]]:
    """The mean and bootstrap interval of every item metric over the scored originals (``items``: each one's hop
    category and metrics), overall and by hop category (the categories with an item, in complexity's order); an
    item without a value of a metric is left out of that metric's summary."""
    def block(group: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {k: summarise([m[k] for m in group if m.get(k) is not None]) for k in ITEM_METRICS}

    overall = block([m for _cat, m in items])
    by_hops = {cat: block(group) for cat in complexity.CATEGORIES
               if (group := [m for c, m in items if c == cat])}
    return overall, by_hops


def run_summary(overall: dict[str, dict[str, Any]], perturbation: list[pairs.PerturbationRow],
                counterfactual: pairs.CounterfactualTable | None, *, golds_derived: int,
                golds_unknown: int) -> dict[str, Any]:
    """The headline numbers of a run: consistency, transitivity and their overall reasoning score (spec §7), the
    mean robustness over the perturbation strategies, the counterfactual indicators of all pairs, and the
    summaries' means the report leads with."""
    cons, that = overall["consistency"]["mean"], overall["t_hat"]["mean"]
    table = counterfactual.overall if counterfactual else None
    return {
        "consistency": cons, "transitivity": that, "overall_reasoning": logic.overall_reasoning(cons, that),
        "robustness_mean": (sum(r.robustness for r in perturbation) / len(perturbation)) if perturbation else None,
        "cp_value": table.cp_value if table else None, "cp_diff": table.cp_diff if table else None,
        "ra": table.ra if table else None, "aa": table.aa if table else None,
        "sc": table.sc if table else None, "pairs": table.n if table else 0,
        "golds_derived": golds_derived, "golds_unknown": golds_unknown,
        "forward_steps_mean": overall["forward_steps"]["mean"], "backward_steps_mean": overall["backward_steps"]["mean"],
        "hallucination_rate": overall["hallucination"]["mean"], "faithfulness_mean": overall["faithfulness"]["mean"],
        "plausibility_mean": overall["plausibility"]["mean"],
    }
