"""reasonlib.arithmetic: exact values of bare equations, shared by skeleton
authoring and the mechanistic judge (whose step-level tests are in
tests/judges/mechanistic/)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from reasonlib.arithmetic import chain_claims, check_value, says_it_rounds


@pytest.mark.parametrize(("check", "value"), [
    ("16-3-4=9", Fraction(9)),
    ("9*2=18", Fraction(18)),
    ("2/2=1", Fraction(1)),
    ("<<10/3=3.33>>", Fraction("3.33")),
    ("16-3-4", Fraction(9)),
    ("12*20,000=240,000", Fraction(240000)),
    ("3*A=9*A=9*8=72", Fraction(72)),
    (None, None),
    ("", None),
    ("2:15+2:38=8:40", None),
    ("x=y", None),
])
def test_check_value(check, value):
    assert check_value(check) == value


@pytest.mark.parametrize(("inner", "claims"), [
    ("16-3-4=9", [("16-3-4", "9", Fraction(9), True)]),
    ("2*3=7", [("2*3", "7", Fraction(6), False)]),
    ("10/3=3.33", [("10/3", "3.33", Fraction(10, 3), True)]),  # rounded to the shown decimals
    ("10/3=3", [("10/3", "3", Fraction(10, 3), False)]),  # a whole number must be exact
    ("5*2/5=2.0=2.0", [("5*2/5", "2.0", Fraction(2), True)]),  # "2.0 = 2.0" computes nothing
    ("50=50-20-60=50", [("50-20-60", "50", Fraction(-30), False)]),
    ("5/0=0", [("5/0", "0", None, False)]),  # undefined is never true
    ("3*A=9*A", []),  # a variable: nothing to check
    ("9", []),
    ("12=13", [("12", "13", Fraction(12), False)]),  # a plain number on the left is no excuse
    ("5=1", [("5", "1", Fraction(5), False)]),
    ("100=1", [("100", "1", Fraction(100), False)]),
    ("12=12", []),  # an identity computes nothing
    ("3+4=7=8", [("3+4", "7", Fraction(7), True), ("7", "8", Fraction(7), False)]),
    ("25/4=6.3", [("25/4", "6.3", Fraction(25, 4), False)]),  # 6.25 can be written exactly
    ("2/3=0.66", [("2/3", "0.66", Fraction(2, 3), False)]),  # cut, not rounded
])
def test_chain_claims(inner, claims):
    found = chain_claims(inner, "check")
    assert [(c.lhs, c.rhs, c.value, c.ok) for c in found] == claims
    assert all(c.source == "check" for c in found)


def test_a_check_value_is_exact_not_a_float():
    assert check_value("1/3=0.333") == Fraction(333, 1000)
    assert check_value("0.1+0.2") == Fraction(3, 10)


@pytest.mark.parametrize(("inner", "rounds", "ok"), [
    ("25/4=6.3", True, True),
    ("25/4=6.2", True, True),  # an exact half: either neighbour
    ("25/4=6", True, True),
    ("25/4=7", True, False),  # said to round, but not the rounded value
    ("10/3=3", True, True),
    ("10/3=3", False, False),
])
def test_rounding_holds_only_where_said_or_unwritable(inner, rounds, ok):
    (claim,) = chain_claims(inner, "check", rounds)
    assert claim.ok is ok


@pytest.mark.parametrize(("text", "says"), [
    ("6.25% rounded to 6%", True), ("approximately 6", True), ("about 6 apples", True), ("≈ 6", True),
    ("~6", True), ("Let's think about it: 6", False), ("around the corner", False), ("6.25%", False),
])
def test_says_it_rounds(text, says):
    assert says_it_rounds(text) is says
