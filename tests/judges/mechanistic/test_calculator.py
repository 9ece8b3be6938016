"""Calculator annotations ``<<expr=result>>``: their claims, and how they
meet the visible equation beside them."""

from __future__ import annotations

from fractions import Fraction

import pytest

from reasonlib.verifier.calculator import visible_and_annotations
from reasonlib.verifier.verdicts import StepCheck, check_step, find_claims

# One row per case: (step text, verdict)
VALID = [
    "It is 16 - 3 = <<16-3=13>>13 eggs.",
    "She makes 9 * 2 = $<<9*2=18>>18 every day.",
    "<<5*2/5=2.0=2.0>>2",
]

INVALID = [
    ("<<2*3=7>>7", 'claim "2*3=7" is false: 2*3 = 6'),
    ("<<50=50-20-60=50>>50", 'claim "50-20-60=50" is false: 50-20-60 = -30'),
    ("<<9,300/30=275>>275", None),
    ("<<¾*3=3.0>>3.0", None),
    ("<<5+2(3)=9>>9", None),
]

NEUTRAL = [
    "<<3*A=9*A>>",
    "<<2:15+2:38=8:40>>8:40",
    "<<83.33333333333333>>",
    "16 - 3 = <<16-3=13",  # a cut-off annotation
]


@pytest.mark.parametrize("text", VALID)
def test_true_claims_are_valid(text):
    result = check_step(text)
    assert result.verdict == "valid", (text, result)
    assert result.claims and all(c.ok for c in result.claims)
    assert result.confidence == 1.0


@pytest.mark.parametrize(("text", "reason"), INVALID)
def test_false_claims_are_invalid(text, reason):
    result = check_step(text)
    assert result.verdict == "invalid", (text, result)
    assert result.confidence == 1.0
    if reason is not None:
        assert result.reason == reason


@pytest.mark.parametrize("text", NEUTRAL)
def test_nothing_checkable_is_neutral(text):
    result = check_step(text)
    assert result == StepCheck("neutral", "nothing checkable", (), (), None), text


def test_the_markup_is_cut_out_of_what_a_reader_sees():
    assert visible_and_annotations("It is 16 - 3 = <<16-3=13>>13 eggs.") == ("It is 16 - 3 = 13 eggs.", [(15, "16-3=13")])
    assert visible_and_annotations("no markup") == ("no markup", [])


def test_annotation_claim_fields_are_exact_rationals():
    (claim,) = find_claims("<<10/3=3.3333333333333335>>")
    assert claim.value == Fraction(10, 3) and claim.stated == Fraction("3.3333333333333335")
    assert claim.source == "annotation" and claim.text == "10/3=3.3333333333333335"

def test_visible_equation_and_annotation_are_one_claim():
    claims = find_claims("16 - 3 = <<16-3=13>>13")
    assert [c.source for c in claims] == ["annotation"]


def test_a_false_visible_equation_beside_a_true_annotation_is_flagged():
    result = check_step("So 2 * 3 = <<2*3=6>>7 cups")
    assert result.verdict == "invalid"
    assert [(c.source, c.ok) for c in result.claims] == [("equation", False), ("annotation", True)]
    assert result.reason == 'claim "2 * 3 = 7" is false: 2 * 3 = 6'


def test_a_false_annotation_is_reported_once():
    result = check_step("10 * (2/3) = <<10*(2/3)=8>>8 liters")
    assert [c.source for c in result.claims] == ["annotation"]
    assert result.reason == 'claim "10*(2/3)=8" is false: 10*(2/3) = 6.666666…'
