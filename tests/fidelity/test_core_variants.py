"""Seeded variant generation, counterfactual golds through the calculator chain, GSM-Symbolic
templates and the problem filter (fidelity/core)."""

from fractions import Fraction

import pytest

from fidelity.core import gold, symbolic
from fidelity.core import variants as V
from reasonlib import selection

JANET = ("Janet’s ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
         "friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck "
         "egg. How much in dollars does she make every day at the farmers' market?")
CHECKS = ["16-3-4=9", "9*2=18"]


@pytest.mark.parametrize("strategy", V.STRATEGIES)
def test_variants_are_reproducible_from_the_seed(strategy):
    a = V.make_variant(JANET, strategy, 7)
    b = V.make_variant(JANET, strategy, 7)
    assert a == b
    if isinstance(a, V.Variant):
        assert a.text != JANET


def test_counterfactuals_change_one_number_and_record_it():
    for strategy in ("percent", "absolute", "multiplier"):
        for seed in range(20):
            v = V.make_variant(JANET, strategy, seed)
            assert isinstance(v, V.Variant) and len(v.changes) == 1
            c = v.changes[0]
            assert JANET[c.start:c.end] == c.old and c.old != c.new
            assert v.text == JANET[:c.start] + c.new + JANET[c.end:]


def test_percent_shift_magnitudes_are_the_papers():
    mags = {V.make_variant(JANET, "percent", s).magnitude for s in range(60)}
    assert mags <= {"+10%", "-10%", "+20%", "-20%", "+30%", "-30%"} and len(mags) >= 4


def test_year_shift_keeps_from_before_to():
    q = "Which team did Ann Lee play for from 1996 to 1998?"
    for s in range(10):
        v = V.make_variant(q, "year", s)
        a, b = (int(c.new) for c in v.changes)
        assert a < b and b - a == 2 and v.magnitude.endswith("y")


def test_a_problem_without_a_number_is_skipped_with_the_reason():
    q = "Is the sky blue on a clear day?"
    for strategy in ("percent", "absolute", "multiplier"):
        assert V.make_variant(q, strategy, 1) == V.Skip(strategy, "no number to perturb")
    assert V.make_variant(q, "year", 1).reason == "no year to shift"
    assert V.make_variant("", "rephrase", 1).reason == "empty question"


def test_token_shuffle_leaves_numbers_and_time_scopes_in_place():
    q = "Which team did the famous player Ann Lee play for in the league from 1996 to 1998?"
    v = V.make_variant(q, "token_shuffle", 3)
    assert "from 1996 to 1998?" in v.text
    assert sorted(v.text.split()) == sorted(q.split())


def test_rephrasing_moves_a_trailing_scope_to_the_front():
    v = V.rephrase("Which team did X belong to from 1996 to 1998?", 0)
    assert v.text == "From 1996 to 1998, which team did X belong to?"


def test_distractor_sits_before_the_question():
    v = V.distractor(JANET, 1)
    assert v.text.endswith("How much in dollars does she make every day at the farmers' market?")
    assert "was founded in" in v.text


def test_numbers_render_like_the_original():
    assert V.render_number(Fraction(88000), "80,000") == "88,000"
    assert V.render_number(Fraction(9, 5), "1.50") == "1.80"
    assert V.render_number(Fraction(5, 2), "2") == "2.5"


def test_counterfactual_gold_is_derived_through_the_chain():
    v = V.counterfactual(JANET, "multiplier", 0)
    assert v.changes[0].old in ("16", "2")
    g = gold.derive(v.substitutions, "18", checks=CHECKS)
    old, new = v.changes[0].old, int(v.changes[0].new)
    expected = (new - 7) * 2 if old == "16" else 9 * new
    assert g.derived and g.answer == str(expected)


def test_counterfactual_gold_unknown_when_the_number_is_not_in_the_chain():
    g = gold.derive({Fraction(5): Fraction(6)}, "18", checks=CHECKS)
    assert not g.derived and g.answer is None and "5" in g.reason
    assert gold.derive({Fraction(16): Fraction(20)}, "eighteen", checks=CHECKS).reason == "the gold answer is not a number"
    assert gold.derive({Fraction(16): Fraction(20)}, "18").reason == "no calculator chain to replay"


def test_gold_from_a_solution_with_annotations():
    sol = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18"
    assert gold.derive({Fraction(16): Fraction(20)}, "18", solution=sol).answer == "26"


TEMPLATE = """A fog bank covers {d,3} miles every {t,10} minutes. The city is {y,42} miles across. {name,Ann} asks how long.

#init:
- $name = sample(names)
- $t = range(10, 100, 10)
- $d = range(2, 10)
- $y = range(20, 100)

#conditions:
- is_int(y / d)
- y > d

#answer: y // d * t"""


def test_a_gsm_symbolic_template_is_instantiated_exactly():
    inst = symbolic.instantiate(TEMPLATE, 5)
    v = {k: int(x) for k, x in inst.values.items() if k != "name"}
    assert v["y"] % v["d"] == 0
    assert inst.answer == Fraction(v["y"] // v["d"] * v["t"])
    assert f"covers {v['d']} miles" in inst.question and "{" not in inst.question
    assert symbolic.instantiate(TEMPLATE, 5) == inst


def test_unmet_conditions_fail_after_1000_draws():
    bad = TEMPLATE.replace("- y > d", "- y > 1000")
    with pytest.raises(symbolic.TemplateError, match="not met in 1000 draws"):
        symbolic.instantiate(bad, 1)


@pytest.mark.parametrize("expr", ["__import__('os').system('true')", "y.__class__", "open('x')", "[x for x in y]",
                                  "lambda: 1", "2 ** 1000"])
def test_the_template_evaluator_refuses_anything_but_arithmetic(expr):
    t = TEMPLATE.replace("#answer: y // d * t", f"#answer: {expr}")
    with pytest.raises(symbolic.TemplateError):
        symbolic.instantiate(t, 1)


def test_problem_filter_syntax():
    ids = [f"p{i}" for i in range(1, 11)]
    assert selection.select("first:3", ids) == ["p1", "p2", "p3"]
    assert selection.select("ids:3,5-7", ids) == ["p3", "p5", "p6", "p7"]
    assert selection.select("pid:p9,p2", ids) == ["p2", "p9"]
    s = selection.select("sample:4@11", ids)
    assert len(s) == 4 and s == selection.select("sample:4@11", ids)
    assert selection.select(None, ids) == ids


@pytest.mark.parametrize("bad,msg", [("first:0", "positive"), ("ids:9-3", "range"), ("ids:12", "past the last"),
                                     ("pid:zz", "no problem"), ("sample:3", "N@SEED"), ("last:3", "unknown")])
def test_problem_filter_errors_name_the_mistake(bad, msg):
    with pytest.raises(selection.FilterError, match=msg):
        selection.select(bad, [f"p{i}" for i in range(1, 11)])
