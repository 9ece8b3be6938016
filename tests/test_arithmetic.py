"""reasonlib.arithmetic: exact values of bare equations, shared by skeleton
authoring and the mechanistic judge (whose step-level tests are in
tests/judges/mechanistic/)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from reasonlib.arithmetic import chain_claims, check_value


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
])
def test_chain_claims(inner, claims):
    found = chain_claims(inner, "check")
    assert [(c.lhs, c.rhs, c.value, c.ok) for c in found] == claims
    assert all(c.source == "check" for c in found)


def test_a_check_value_is_exact_not_a_float():
    assert check_value("1/3=0.333") == Fraction(333, 1000)
    assert check_value("0.1+0.2") == Fraction(3, 10)
