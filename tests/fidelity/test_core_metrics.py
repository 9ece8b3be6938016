"""The pure metrics of docs/fidelity.md against the spec (paper 001), Table 1 and Table 2 included."""

from fractions import Fraction

import pytest

from fidelity.core import answer, complexity, explanation, logic, pairs
from fidelity.core.metrics import ITEM_METRICS, metric_summaries, run_summary
from fidelity.core.pairs import CounterfactualPair, Output

# Table 1 of the paper: (name, EM drop, CoT drop, Sem, Reason, Robust, BL EM, Var EM, BL CoT, Var CoT).
TABLE1 = [
    ("Token Shuffle", 0.0020, -0.0078, 0.3683, 0.3309, 0.7416, 0.0110, 0.0090, 0.4163, 0.4241),
    ("Distractor Injection", -0.0020, 0.0075, 0.3448, 0.3374, 0.7348, 0.0110, 0.0130, 0.4163, 0.4088),
    ("Rephrasing", 0.0010, 0.0130, 0.3496, 0.3370, 0.7331, 0.0110, 0.0100, 0.4163, 0.4033),
    ("Semantic Noise", 0.0000, 0.0132, 0.3487, 0.3281, 0.7314, 0.0110, 0.0110, 0.4163, 0.4031),
    ("Combined", 0.0010, -0.0060, 0.3374, 0.3273, 0.7344, 0.0110, 0.0100, 0.4163, 0.4223),
]


@pytest.mark.parametrize("row", TABLE1, ids=[r[0] for r in TABLE1])
def test_every_table1_row_reproduces_its_robustness_from_its_own_inputs(row):
    name, em_drop, cot_drop, sem, reason, robust, bl_em, var_em, bl_cot, var_cot = row
    r = pairs.row_from_means(name, 999, bl_em, var_em, bl_cot, var_cot, sem, reason, 0.0)
    assert r.em_drop == pytest.approx(em_drop, abs=5e-5)
    assert r.cot_drop == pytest.approx(cot_drop, abs=5e-5)
    assert round(r.robustness, 4) == pytest.approx(robust, abs=1e-4)
    assert round(pairs.robustness(em_drop, cot_drop, sem, reason), 4) == robust


def test_table1_ranking_is_the_papers():
    rows = [pairs.row_from_means(r[0], 999, r[6], r[7], r[8], r[9], r[3], r[4], 0.0) for r in TABLE1]
    assert [r.strategy for r in pairs.rank(rows)] == [
        "Token Shuffle", "Distractor Injection", "Combined", "Rephrasing", "Semantic Noise"]


def test_robustness_is_clipped_to_the_unit_interval():
    assert pairs.robustness(-2.0, -2.0, 1.0, 1.0) == 1.0
    assert pairs.robustness(3.0, 3.0, 0.0, 0.0) == 0.0


def _cf(cp, ra, aa, sc, n=1, comp="2-hop"):
    return [CounterfactualPair("percent", "+10%", comp, cp, cp, ra, aa, True, sc)] * n


def test_table2_rates_are_means_over_pairs():
    # 999 pairs with 676 CP, 990 RA, 998 AA gives the paper's 0.677 / 0.991 / 0.999 to three places.
    items = (_cf(1, 1, 1, 0.9, 676) + _cf(0, 1, 1, 0.9, 314) + _cf(0, 0, 1, 0.899, 8) + _cf(0, 0, 0, 0.8, 1))
    row = pairs.counterfactual_row("all", items)
    assert row.n == 999
    assert round(row.cp_value, 3) == 0.677
    assert round(row.ra, 3) == 0.991
    assert round(row.aa, 3) == 0.999
    assert round(row.sc, 3) == 0.900
    assert row.difficulty == pytest.approx(1 - (676 * 3 + 314 * 2 + 8 * 1) / 3 / 999)


def test_counterfactual_indicators_on_a_pair():
    base = Output("Step 1: 16 - 3 - 4 = 9\nStep 2: 9 * 2 = 18\nAnswer: 18", "18", ("16 - 3 - 4 = 9", "9 * 2 = 18"),
                  "18")
    var = Output("Step 1: 20 - 3 - 4 = 13\nStep 2: 13 * 2 = 26\nAnswer: 26", "26", ("20 - 3 - 4 = 13", "13 * 2 = 26"),
                 "26")
    p = pairs.counterfactual_pair(base, var, [Fraction(20)], strategy="percent", magnitude="+20%",
                                  complexity="3-hop", gold_known=True)
    assert (p.cp_value, p.cp_diff, p.ra, p.aa, p.sc) == (1, 1, 0, 1, 0.0)
    wrong = Output(var.text, "25", var.steps, "26")
    assert pairs.counterfactual_pair(base, wrong, [Fraction(20)], strategy="percent", magnitude="+20%",
                                     complexity="3-hop", gold_known=True).aa == 0
    assert pairs.counterfactual_pair(base, wrong, [Fraction(20)], strategy="percent", magnitude="+20%",
                                     complexity="3-hop", gold_known=False).aa == 1  # lenient: it changed


def test_step_consistency_counts_whole_steps():
    assert pairs.step_consistency(["a", "b", "c"], ["a", "x", "c"]) == pytest.approx(2 / 3)
    assert pairs.step_consistency(["a"], ["a", "b"]) == 0.5
    assert pairs.step_consistency([], []) == 1.0


def test_perturbation_row_on_identical_outputs_is_fully_robust():
    o = Output("Step 1: 2 + 2 = 4\nAnswer: 4", "4", ("2 + 2 = 4",), "4", ("2 + 2 = 4",))
    r = pairs.perturbation_row("token_shuffle", [(o, o)] * 3)
    assert (r.em_drop, r.cot_drop, r.conf_drop) == (0, 0, 0)
    assert r.sem == pytest.approx(1.0) and r.reason == 1.0 and r.robustness == pytest.approx(1.0)


def test_pdr_and_confusion_per_perturbation_type():
    rows = pairs.pdr_rows([("numerical", True, True), ("numerical", True, False), ("numerical", False, False),
                           ("numerical", True, False), ("distraction", False, True)])
    num = next(r for r in rows if r.perturbation == "numerical")
    assert (num.acc_original, num.acc_variant) == (0.75, 0.25)
    assert num.pdr == pytest.approx(1 - 0.25 / 0.75)
    assert (num.both, num.seed_only, num.variant_only, num.neither) == (1, 2, 0, 1)
    assert next(r for r in rows if r.perturbation == "distraction").pdr is None  # acc(original) = 0


def test_answer_metrics():
    assert answer.exact_match("The Thailand national team.", "thailand national team") == 1
    assert answer.exact_match("18.00", "18") == 1 and answer.exact_match("$1,000", "1000") == 1
    assert answer.f1("red blue", "blue green") == pytest.approx(0.5)
    assert answer.f1("", "x") == 0.0
    assert answer.bleu("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(1.0)
    assert 0 < answer.bleu("the cat sat", "the cat sat on the mat") < 1
    assert answer.cot_em(["Step A.", "b"], ["step a", "B"]) == 1
    assert answer.step_similarity(["a b", "c"], ["a b"]) == 0.5
    assert answer.step_similarity(["c", "a b"], ["a b", "c"], greedy=True) == 1.0


def test_faithfulness_plausibility_hallucination():
    q = "Tom has 3 apples and buys 2 more apples. How many apples does Tom have?"
    e = "Tom has 3 apples.\nTom buys 2 apples, so Tom has 3 + 2 = 5 apples.\nAnswer: 5"
    f = explanation.faithfulness(q, e, "5", ["Tom has 3 apples.", "Tom buys 2 apples, so Tom has 3 + 2 = 5 apples."])
    assert f.answer_in_e and f.indicator and f.overlap >= 0.3 and f.flow >= 0.3 and f.score == 5
    p = explanation.plausibility(q, "First, " + e + "\nThen done.")
    assert p.struct == 2 and p.length >= 20 and p.domain >= 2
    assert explanation.hallucinated(2, 4) and not explanation.hallucinated(3, 6) and not explanation.hallucinated(1, 3)
    assert explanation.confidence("5", ["a", "b"], "ok") == pytest.approx(0.3 + 0.2 + 0.2)
    assert explanation.confidence("", ["a"], "maybe error") == 0.0


def test_hop_complexity_both_definitions():
    h = complexity.hops("Which team did Ann Lee play for from 1996 to 1998?")
    assert (h.c, h.category) == (2, "2-hop")  # time scope only
    assert complexity.hops("Which team did Ann Lee play for from 1996 to 1998?", count_time=False).c == 1
    h4 = complexity.hops("Tom buys 3 pens and 2 books. If each costs 2 in 1999, what did he pay?")
    assert h4.c == 4 and h4.category == "4+-hop"
    assert 1.0 <= h4.graded <= 4.0


def test_transitivity_and_graph_closure():
    forms = [logic.LogicalForm("a", "gives", "b"), logic.LogicalForm("b", "gives", "c"),
             logic.LogicalForm("c", "is", "d")]
    t = logic.transitivity(forms)
    assert t.raw == pytest.approx(2 / 3)  # (1,2) and (2,3) chain; (1,3) does not
    assert t.flow_term == pytest.approx(0.2)
    assert t.adjusted == pytest.approx(0.5 * (2 / 3 + 0.2))
    g = logic.graph(forms)
    assert len(g.edges) == 3 and len(g.closure) == 6 and g.inferred == 3
    assert logic.transitivity(forms[:1]).too_short


def test_consistency_and_overall_reasoning():
    assert logic.consistency(["Tom has apples"], ["apples Tom ate"]) == pytest.approx(2 / 3)
    assert logic.overall_reasoning(0.15, 0.322) == pytest.approx(0.236)
    assert logic.overall_reasoning(None, 0.3) is None


@pytest.mark.parametrize("text", [
    "Janet has 16 eggs.\nShe eats 3: 16 - 3 = 13.\nShe sells them: 13 * 2 = 26.\n#### 26",
    "Janet has 16 eggs.\nShe eats 3: 16 - 3 = 13.\nThe answer is 13",
    "Janet has 16 eggs.\nShe eats 3: 16 - 3 = 13.",
])
def test_a_closing_answer_line_is_not_a_step_here_either(text):
    """Issue 23 #17: the fidelity item page counted "#### 42" as a step while the review page treats it as the
    answer; both read the same steps now."""
    from fidelity.core.text import split_steps
    from reasonlib.segmentation import parse_trace

    assert split_steps(text) == [s.text for s in parse_trace(text).steps]
    assert "#### 26" not in split_steps(text)


def _metrics(**values):
    return {k: values.get(k) for k in ITEM_METRICS}


def test_metric_summaries_average_each_metric_over_the_items_that_have_it_overall_and_by_hops():
    one, two = complexity.CATEGORIES[0], complexity.CATEGORIES[1]
    items = [(one, _metrics(em=1, consistency=0.5)), (one, _metrics(em=0, consistency=None)),
             (two, _metrics(em=1, consistency=0.25))]
    overall, by_hops = metric_summaries(items)
    assert (overall["em"]["n"], overall["em"]["mean"]) == (3, pytest.approx(2 / 3))
    # the second item has no consistency: left out, not counted as 0
    assert (overall["consistency"]["n"], overall["consistency"]["mean"]) == (2, pytest.approx(0.375))
    assert list(by_hops) == [one, two]  # only categories with an item, in complexity's order
    assert (by_hops[one]["em"]["mean"], by_hops[one]["consistency"]["n"]) == (pytest.approx(0.5), 1)
    assert overall["f1"] == {"n": 0, "mean": None, "ci": None}


def test_run_summary_by_hand():
    overall, _ = metric_summaries([("x", _metrics(consistency=0.15, t_hat=0.322, hallucination=0.5,
                                                  forward_steps=4, backward_steps=2, faithfulness=0.8,
                                                  plausibility=0.6))])
    rows = [pairs.row_from_means(r[0], 999, r[6], r[7], r[8], r[9], r[3], r[4], 0.0) for r in TABLE1[:2]]
    cf = [CounterfactualPair("s", "m", "c", cp_value=1, cp_diff=1, ra=0, aa=1, aa_strict=True, sc=0.5),
          CounterfactualPair("s", "m", "c", cp_value=0, cp_diff=1, ra=1, aa=0, aa_strict=False, sc=1.0)]
    s = run_summary(overall, rows, pairs.counterfactual_table(cf), golds_derived=3, golds_unknown=1)
    # (Consistency + T̂) / 2: the paper's 23.6% from 15% and 32.2%
    assert s["overall_reasoning"] == pytest.approx(0.236)
    assert s["robustness_mean"] == pytest.approx((rows[0].robustness + rows[1].robustness) / 2)
    assert (s["cp_value"], s["cp_diff"], s["ra"], s["aa"], s["sc"], s["pairs"]) == (0.5, 1.0, 0.5, 0.5, 0.75, 2)
    assert (s["golds_derived"], s["golds_unknown"], s["forward_steps_mean"], s["hallucination_rate"]) == (3, 1, 4, 0.5)
    empty = run_summary(overall, [], None, golds_derived=0, golds_unknown=0)
    assert (empty["robustness_mean"], empty["cp_value"], empty["pairs"]) == (None, None, 0)
