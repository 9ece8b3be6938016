"""Agreement of step-function tags (agreement.core.tags) against hand-computed cases."""

from __future__ import annotations

import pytest

from agreement.core.tags import kappa_binary, tag_agreement

# Source a and b on steps 1..5 (b never tagged step 4's second function; a never tagged step 5):
ROWS = [
    (1, "a", "plan_generation"), (2, "a", "plan_generation"), (3, "a", "active_computation"),
    (4, "a", "active_computation"), (4, "a", "self_checking"),
    (1, "b", "plan_generation"), (2, "b", "active_computation"), (3, "b", "active_computation"),
    (4, "b", "self_checking"), (5, "b", "plan_generation"),
]


def test_kappa_of_a_two_by_two_table():
    # n = 50, p_o = 35/50 = .7, p_a = .5, p_b = .6, p_e = .5*.6 + .5*.4 = .5: kappa = (.7 - .5) / .5 = .4
    kappa, why = kappa_binary(20, 5, 10, 15)
    assert kappa == pytest.approx(0.4) and why is None
    assert kappa_binary(3, 0, 0, 7)[0] == pytest.approx(1.0)
    assert kappa_binary(0, 0, 0, 0) == (None, "no step tagged by both")
    assert kappa_binary(0, 0, 0, 4)[0] is None and "chance agreement 1" in kappa_binary(0, 0, 0, 4)[1]


def test_kappa_per_category_on_the_steps_both_tagged():
    result = tag_agreement(ROWS)
    assert result["sources"] == [{"source": "a", "steps": 4}, {"source": "b", "steps": 5}]
    by = {r["category"]: r for r in result["kappa"]}
    assert len(result["kappa"]) == 8 and all(r["steps"] == 4 for r in result["kappa"])  # step 5: only b tagged it
    # plan: a on 1, 2; b on 1: n11=1 n10=1 n01=0 n00=2; p_o=.75, p_e=.5*.25+.5*.75=.5: kappa=.5
    assert (by["plan_generation"]["both"], by["plan_generation"]["a_only"], by["plan_generation"]["neither"]) == (1, 1, 2)
    assert by["plan_generation"]["kappa"] == pytest.approx(0.5) and by["plan_generation"]["agreement"] == 0.75
    # compute: a on 3, 4; b on 2, 3: one of each cell, p_o = p_e = .5: kappa 0
    assert by["active_computation"]["kappa"] == pytest.approx(0.0)
    # check: both on 4 only: p_o=1, p_e=.25*.25+.75*.75=.625: kappa 1
    assert by["self_checking"]["kappa"] == pytest.approx(1.0)
    # setup: nobody: undefined, said why
    assert by["problem_setup"]["kappa"] is None and by["problem_setup"]["undefined"]


def test_the_confusion_matrix_counts_steps_with_exactly_one_tag_each():
    # step 4 is left out (a gave it two tags), step 5 too (a did not tag it)
    assert [(r["tag_a"], r["tag_b"], r["steps"]) for r in tag_agreement(ROWS)["confusion"]] == [
        ("plan_generation", "plan_generation", 1), ("plan_generation", "active_computation", 1),
        ("active_computation", "active_computation", 1)]


def test_every_pair_of_three_sources_in_name_order():
    rows = ROWS + [(1, "c", "plan_generation")]
    pairs = {(r["source_a"], r["source_b"]) for r in tag_agreement(rows)["kappa"]}
    assert pairs == {("a", "b"), ("a", "c"), ("b", "c")}
    assert tag_agreement([]) == {"sources": [], "kappa": [], "confusion": []}
