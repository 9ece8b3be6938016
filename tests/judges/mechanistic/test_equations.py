"""Visible equations: table-driven claims (one row per case: step text,
verdict), chains, and generated arithmetic."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reasonlib.arithmetic import Claim, terminates
from reasonlib.verifier.verdicts import StepCheck, check_step, find_claims

VALID = [
    "Janet sells 16 - 3 - 4 = 9 duck eggs a day.",
    "It takes 2 x 0.5 = 1.0 bolts of white fiber.",
    "Each pays $1,200 / 4 = $300.",
    "3 * 4 = 12 + 2 = 14",  # a running total: 3 * 4 = 12, 12 + 2 = 14
    "2 * (3 + 4) = 2 * 7 = 14",  # a true chain
    "So 3 × 4 = 12 and 12 ÷ 4 = 3.",
    "2^10 = 1024",
    "5² = 25",
    "10 − 3 = 7",  # unicode minus
    "$220.00 – $210.00 = $10.00",  # en dash
    "10 / 3 = 3.33",  # rounded to the shown decimals
    "10 / 3 = 3.3",
    "2 / 3 = 0.67",  # 2/3 has no finite decimal: correctly rounded is true
    "25 / 4 = 6.3, rounded",  # the step says it rounds
    "0.0625 * 100% = 6.25%, about 6%",
    "rounded: 0.0625 * 100% = 6%",
    "10 / 3 ≈ 3, so 10 / 3 = 3 when rounded",
    "0.1 + 0.2 = 0.30000000000000004",  # a float rendering
    "1/3*5 = 1.6666666666666665",
    "She picks 3 * 4 = 12 apples.",  # "= 12 apples": 12 is the value
    "He makes 6 * 7 = 42.",
    "50% * 20 = 10",
    "20 * 50% = 10",
    "10 / 20 = 50%",
    "10 / 20 * 100 = 50%",
    "1 / 7 * 100% = 14%",  # a whole percentage is conventionally rounded
    "1½ + 1 = 2½",
    "¾ * 4 = 3",
    "He has -3 + 5 = 2 left.",
    "(3 + 4) * 2 = 14",
    "The total (so 3 + 4 = 7) is small.",
    "5+2(3)=11",
    "33.33 * 3 = 100",  # a cut repeating decimal stands for 100/3
    "100% / 33.33% = 3",
    "The dog weighs 60 pounds / 2 = 30 pounds.",
    "5 minutes - 3 minutes = 2 minutes",
    "28% - 0.5 = 27.5%",  # percent as a unit in a sum
    "$80 - 50% = $40",  # less 50% of it
    "$50 + 10% = $55",
    "1. 16 - 3 = 13",  # list numbering is not an operand
    "Step 2: 16 - 3 = 13",
    "12 * 20,000 = 240,000",
    "1,200 + 1 = 1,201",
    "**3 + 4 = 7**",
    "$3 \\times 4 = 12$",
    "$\\frac{1}{2} \\cdot 8 = 4$",
    "The answer is \\boxed{3 + 4 = 7}",
    "a total of 2*70 = 140",
    "5th + 2 = 7th",
    "90° - 30° = 60°",
    "$90^\\circ - 30^\\circ = 60^\\circ$",
    "$\\frac{\\frac{1}{2}}{3} = \\frac{1}{6}$",
    "\\(3 + 4 = 7\\)",
    "$f(2) = 3 \\cdot 2 + 1 = 7$",
    "$2 \\times 10^3 = 2000$",
    "$1,\\!000 + 5 = 1,\\!005$",
    "Cost: \\$5 \\times 3 = \\$15",
]

INVALID = [
    ("16 - 3 = 14", 'claim "16 - 3 = 14" is false: 16 - 3 = 13'),
    ("3 * 4 = 13", 'claim "3 * 4 = 13" is false: 3 * 4 = 12'),
    ("10 / 3 = 3.4", 'claim "10 / 3 = 3.4" is false: 10 / 3 = 3.333333…'),
    ("10 / 3 = 3", 'claim "10 / 3 = 3" is false: 10 / 3 = 3.333333…'),  # no shown rounding
    ("2 / 3 = 0.68", None),
    ("2 / 3 = 0.66", None),  # cut, not rounded
    ("0.0625 * 100% = 6%", None),  # 6.25% can be written: rounding must be said
    ("25 / 4 = 6.3", 'claim "25 / 4 = 6.3" is false: 25 / 4 = 6.25'),
    ("25 / 4 = 6", None),
    ("12 = 13", 'claim "12 = 13" is false: 12 = 12'),  # two plain numbers
    ("so 5 = 1.", None),
    ("3 + 4 = 7 = 8", 'claim "7 = 8" is false: 7 = 7'),
    ("$1,200 / 4 = $310", 'claim "$1,200 / 4 = $310" is false: $1,200 / 4 = 300'),
    ("3 * 4 = 13 + 2 = 15", 'claim "3 * 4 = 13 + 2" is false: 3 * 4 = 12'),
    ("2 x 0.5 = 1.5", None),
    ("She has 360 - 480 = $120 less.", None),  # a dropped minus sign
    ("5 minutes - 3 minutes = 3 minutes", None),
    ("10 / 20 * 100 = 40%", None),
    ("$50 + 10% = $60", None),  # percent as a unit only when the result is a percentage
    ("15-27=12 cups", 'claim "15-27=12" is false: 15-27 = -12'),  # a dropped sign, not a range
    ("5 / 0 = 0", 'claim "5 / 0 = 0" is false: 5 / 0 = undefined (division by zero)'),
    ("$\\frac{3}{4} \\times 8 = 5$", None),
    ("0.47119999999999995*10=4.712199999999996", None),  # float tolerance is 1e-12 relative, no more
    ("20-11=9.20", None),
    ("\\[3+4=8\\]", 'claim "3+4=8" is false: 3+4 = 7'),
]

NEUTRAL = [
    "She eats three for breakfast.",
    "",
    "On 3/4/2020 = the first day",  # a date
    "3:30 - 1:00 = 2:30",  # clock times
    "It takes 5-10 minutes.",  # a range, no claim
    "Week 1-2 = 10 hours",  # a range with a claim about it
    "Call 555-123-4567 = the office",  # a phone number
    "x = 5",  # variables are not checkable
    "2x + 3 = 7",
    "x - 3 + 4 = 6",
    "Let x = 3 + 4",
    "3x = 12",
    "1 hour = 60 minutes",  # a conversion, not arithmetic
    "50% of 20 + 5 = 15",
    "3 times 4 + 2 = 14",
    "half of 20 + 5 = 15",
    "12 divided by 4 + 2 = 5",
    "12 apples x 3 = 36",
    "600,000 * 2 = 1.2 million",
    "25k * 3 = 75k",
    "2 * 3 = 6x",
    "1,20 + 1 = 21",  # not a thousands separator
    "3/4 cup = 6 tablespoons",
    "2^100000 = 5",  # too large to check
    "4^0.5 = 2",  # roots are not checked
    "__import__('os').system('echo pwned') = 0",
    "\\sqrt{16}+1+2=7",
    "$\\binom{5}{2} = 10$",
    "3! = 6",
    "$x^2 + 2x + 1 = (x+1)^2$",
    "7 / 2 = 3 1/2",  # mixed numbers are not read
    "9" * 5000 + " + 1 = 2",  # beyond any shown arithmetic
    "(" * 5000 + "1" + ")" * 5000 + " + 1 = 2",
    "2^2^2^2^2 = 4",  # 2^65536: too large to check
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


def test_claim_fields_are_exact_rationals():
    (claim,) = find_claims("Each pays $1,200 / 4 = $300 in total.")
    assert claim == Claim(text="$1,200 / 4 = $300", lhs="$1,200 / 4", rhs="$300",
                          value=Fraction(300), stated=Fraction(300), ok=True, source="equation")


def test_a_chain_gives_one_claim_per_step():
    claims = find_claims("3 * 4 = 12 + 2 = 14")
    assert [(c.lhs, c.rhs, c.stated) for c in claims] == [("3 * 4", "12", 12), ("12 + 2", "14", 14)]


@given(st.integers(-10**6, 10**6), st.integers(-10**6, 10**6), st.sampled_from("+-*x"),
       st.integers(-3, 3))
def test_integer_arithmetic(a, b, op, delta):
    right = {"+": a + b, "-": a - b, "*": a * b, "x": a * b}[op] + delta
    text = f"so {a:,} {op} {b:,} = {right:,} apples"
    if op == "x" and b < 0:
        return  # "2 x -3" reads as a variable minus three
    expected = "valid" if delta == 0 else "invalid"
    assert check_step(text).verdict == expected, text


@given(st.integers(1, 10**6), st.integers(1, 10**4), st.integers(0, 6))
def test_division_rounded_to_its_decimals(a, b, places):
    exact = Fraction(a, b)
    shown = round(exact, places)
    text = f"{a} / {b} = {shown:.{places}f}" if places else f"{a} / {b} = {int(shown)}"
    # Rounding holds unasked only where the exact value cannot be written
    # (no finite decimal) and the result shows decimals; else it must be said.
    expected = "valid" if shown == exact or (places and not terminates(exact)) else "invalid"
    assert check_step(text).verdict == expected, text
    if shown != exact:
        assert check_step(text + ", rounded").verdict == "valid", text
    wrong = shown + Fraction(2, 10**places)
    text = f"{a} / {b} = {wrong:.{places}f}"
    assert check_step(text).verdict == "invalid", text


# Issue 23 item 1: a false equation with a plain number on the left is false
# wherever it is written; prose around plain numbers is no equation.
@pytest.mark.parametrize("text", [
    "12 = 12", "Week 1 = 10 hours", "1 hour = 60 minutes", "Step 2 = 5", "50% = 0.4", "$5 = 500 cents",
])
def test_plain_numbers_in_prose_are_not_claims(text):
    assert check_step(text).verdict == "neutral", text


# Issue 30 item 3: real notation from ProcessBench MATH solutions and R1 / gpt-oss thoughts.
# Each line is (text, verdict, reason or None); "neutral" ones were misread as false claims before.
REAL_NOTATION = [
    # unknowns and words: not checked as numbers
    ("\\[ (1 + 0.005)^{12} = 1 + r \\]", "neutral", None),
    ("Jam has 3 boxes +2 loose =26 => 3x+2=26", "neutral", None),
    ("So 18r +50 +20 =160 =>18r=90", "neutral", None),
    ("bring: -16 +64 = 4s-2s", "neutral", None),
    ("\\[ 10^2 = 6^2 + OP^2 \\]", "neutral", None),
    ("\\[ 6^2 = 5^2 + 5^2 - 2 \\cdot 5 \\cdot 5 \\cdot \\cos \\angle PXS \\]", "neutral", None),
    ("\\[ V_1 = \\frac{4}{3} \\pi (1.5)^3 = \\frac{4}{3} \\pi \\cdot 3.375 \\]", "neutral", None),
    ("16,520.25 - 5,000 = 1.45x  \n 11,520.25", "neutral", None),
    ("(1 + 0.005)^12 = 1 + 12*0.005 + (12*11)/2*0.005^2 + ...", "neutral", None),
    # list and running shorthand
    ("Rent 1/4 =1500. Remaining 4500.", "neutral", None),
    ("Poppy places 1/4 =250.", "neutral", None),
    ("We sum: spay $200 + 3 vaccines * $20 = $60 + 4 vases * $12 = $48.", "neutral", None),
    ("If he fixes: fine $120 + 3*25 = $75, total $195.", "neutral", None),
    ("chicken $12 + 5*3=15 + 4*1.5=6 => subtotal =33.", "neutral", None),
    ("3182 - 319 + 1 = 3182 - 319 = 2863; 2863 + 1 = 2864.", "valid", None),
    ("(1/4 + 1/2) * 364 = (0.25+0.5)=0.75", "valid", None),
    ("240 * 145 = 240*100=24000, +240*45=10800, sum 34800.", "valid", None),
    ("So, c = 120 - 875 = -755/288", "valid", None),
    # ranges, other bases, remainders
    ("She normally sleeps 10pm-6am = 8h =480 min.", "neutral", None),
    ("grades 4-7 inclusive = 4 grades", "neutral", None),
    ("6 = 0110", "neutral", None),
    # an integer division with its remainder is a claim of its own: q·b + r = a, 0 ≤ r < b
    ("\\[ 19 \\div 4 = 4 \\text{ remainder } 3 \\]", "valid", None),
    ("\\[20 \\div 6 = 3\\, R\\, 2\\]", "valid", None),
    ("194 ÷ 11 = 17 with a remainder of 7", "valid", None),
    ("- \\(227 \\div 60 = 3\\) remainder \\(47\\)", "valid", None),
    ("194 ÷ 11 = 17 with a remainder of 9.", "invalid",
     'claim "194 ÷ 11 = 17 remainder 9" is false: 194 ÷ 11 = 17 remainder 7'),
    ("\\(1121 \\div 3^5 = 1121 \\div 243 = 4\\) remainder \\(133\\)", "invalid",
     'claim "1121 ÷ 243 = 4 remainder 133" is false: 1121 ÷ 243 = 4 remainder 149'),
    ("2 + 18 ÷ 4 = 4 remainder 2", "neutral", None),  # the division is part of a sum
    ("419,430 ÷ 262,144 = 1 with a remainder of 419,430 - 262,144 = 157,286", "valid", None),
    ("\\[ 2863 \\div 1344 = 2 \\quad \\text{(quotient)} \\]", "neutral", None),
    ("\\[2250 \\div 360 = 6 \\text{ full rotations with } 90 \\text{ degrees remaining}\\]", "neutral", None),
    ("16 - 10 = 7 apples with 2 apples left", "invalid", None),  # not a division: still a claim
    ("We are told that $\\frac{1}{7}=0.14285714285$...", "neutral", None),  # said to go on
    ("New position: 1st - 5 = 6th", "neutral", None),  # positions count the other way
    ("12 : 4 = 3 : 1 .", "neutral", None),  # a ratio
    ("Step 3: 12 = 13", "invalid", None),
    ("430 + 750 + 300 + 700 = 2{,}180", "valid", None),
    ("21 - 3 = 2S \\\\", "neutral", None),
    ("30,769.23 \\times 1.40 = \\$43{,}076.92.", "valid", None),  # money to the cent
    ("$4.20 + $9.45 + $1.35 = $14.99", "invalid", None),
    # bullets, mixed numbers, displays
    ("- \\(2^9 = 512\\) - \\(3^1 = 3\\)", "valid", None),
    ("- \\( 3^1 = 3 \\mod 8 \\)\n- \\( 3^2 = 9 \\equiv 1 \\mod 8 \\)", "valid", None),
    ("\\[3\\frac{4}{5} = \\frac{3 \\cdot 5 + 4}{5} = \\frac{19}{5}.\\]", "valid", None),
    ("\\[= 24 \\times 24 \\times (11111)\\] \\[= 576 \\times 11111\\] \\[= 6399936\\]", "valid", None),
    ("\\[ x = 5 \\] \\[ 3 + 4 = 7 \\]", "valid", None),
    # tentative claims corrected at once
    ("3.5 + 2*7.5 = 15? Actually 7.5 each so 15 total.", "neutral", None),
    # rounding: a rounded operand is not the false claim; the wrong product is
    ("x^2 = (2.8284)^2 = 8", "valid", None),
    ("3650*0.10*0.4167=3650*0.041667≈152.08", "valid", None),
    ("1.005^5 = 1.020150501 * 1.005 ≈ 1.025251002", "valid", None),  # 1.005^4 cut to 9 places; ≈ to 1e-5
    ("1.020150501 * 1.005 ≈ 1.030301502", "invalid",
     'claim "1.020150501 * 1.005 ≈ 1.030301502" is false: 1.020150501 * 1.005 = 1.025251253505'),
    # still false
    ("$10 + $24 + $12 + $14 = $50", "invalid", None),  # a dropped term is no shorthand
    ("30 millipedes * 2 - 12 = 60 stink bugs", "invalid", None),
    ("8/24 = 3 trips", "invalid", None),
    ("4 × $\\frac{9}{4}$ = $\\frac{(4)(9)}{(4)(4)}$.", "invalid", None),
    ("(-0.31845)/(-0.22314) = 1.428.", "invalid", None),
    # issue 30 item 6
    ("Then 12 = 13 clearly.", "invalid", 'claim "12 = 13" is false: 12 = 12'),
    ("0.0625 * 100% = 6%", "invalid", 'claim "0.0625 * 100% = 6%" is false: 0.0625 * 100% = 6.25%'),
    ("10 / 20 * 100 = 40%", "invalid", 'claim "10 / 20 * 100 = 40%" is false: 10 / 20 * 100 = 50%'),
]


@pytest.mark.parametrize(("text", "verdict", "reason"), REAL_NOTATION)
def test_real_notation(text, verdict, reason):
    result = check_step(text)
    assert result.verdict == verdict, (text, result)
    if reason is not None:
        assert result.reason == reason
