"""Issue 20, "the GSM-Symbolic interpreter hangs or exhausts memory": every construct is bounded
before its work (range sizes, power towers, round digits) or on its result (numbers of at most
MAX_BITS, texts and lists of at most MAX_TEXT), and anything an expression raises is a TemplateError
naming the expression."""

from __future__ import annotations

import pytest

from fidelity.core import symbolic


def template(init: str = "- $x = range(1, 5)", answer: str = "x") -> str:
    return f"How many? {{x,1}}\n#init:\n{init}\n#answer: {answer}"


@pytest.mark.parametrize("init, answer, message", [
    ("- $x = range(10**10)", "x", "range\\(\\) of 10,000,000,000 numbers"),
    ("- $x = range(1, 5, 0)", "x", "step must not be zero"),
    ("- $x = range(1, 5)", "2 ** 64 ** 64", "small whole exponents"),
    ("- $x = range(1, 5)", "(2 ** 64) ** 64 ** 1", "more than 4,096 bits"),
    ("- $x = range(1, 5)", "((10 ** 64) ** 64) ** 64", "more than 4,096 bits"),
    ("- $x = range(1, 5)", "round(1 / 3, 10 ** 8)", "round\\(\\) to 100000000 digits"),
    ("- $x = range(1, 5)\n" + "\n".join(f"- $s{i} = {'names' if i == 0 else f's{i-1} + s{i-1}'}" for i in range(40)),
     "x", "more than 10,000 items"),
    ("- $x = range(1, 5)", "'ab' * 10 ** 9", "#answer: TypeError"),
    ("- $x = range(1, 5)", "-" * 5000 + "1", "at most 2,000"),
    ("- $x = range(1, 5)", "[" * 300 + "1" + "]" * 300, "cannot parse"),
    ("- $x = range(1, 5)", "-(" * 60 + "1" + ")" * 60, "nested more than 50 levels"),
    ("- $x = range(1, 5)", "min([])", "#answer: ValueError"),
    ("- $x = sample(names, 50)", "1", "sample\\(\\) of 50 from a list of 10"),
    ("- $x = range(1, 5)", "0 ** -1", "division by zero"),
    ("- $x = range(1, 5)", "x < 'a'", "TypeError"),
])
def test_the_interpreter_is_bounded_with_clear_errors(init, answer, message):
    with pytest.raises(symbolic.TemplateError, match=message):
        symbolic.instantiate(template(init, answer), 1)


def test_ordinary_templates_still_work():
    inst = symbolic.instantiate(template("- $x = range(1, 5)", "x ** 3 + round(x / 3, 2)"), 3)
    assert inst.answer > 0 and 1 <= int(inst.values["x"]) <= 4
