"""The mechanistic verifier: table-driven claims, skeleton references, and a
scan of all 5,276 bundled GSM8K model solutions against an independent
reference check of their calculator annotations."""

from __future__ import annotations

import json
import re
import time
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from annotation.judges.mechanistic import Claim, StepCheck, check_step, check_value, find_claims
from tests.data_paths import GSM8K_SOLUTIONS as GSM8K

MODELS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")


# --------------------------------------------------------------------------
# Claims, one row per case: (step text, verdict)

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
    "2 / 3 = 0.66",  # truncated to the shown decimals
    "2 / 3 = 0.67",
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
    "It is 16 - 3 = <<16-3=13>>13 eggs.",
    "She makes 9 * 2 = $<<9*2=18>>18 every day.",
    "<<5*2/5=2.0=2.0>>2",
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
    ("<<2*3=7>>7", 'claim "2*3=7" is false: 2*3 = 6'),
    ("<<50=50-20-60=50>>50", 'claim "50-20-60=50" is false: 50-20-60 = -30'),
    ("<<9,300/30=275>>275", None),
    ("<<¾*3=3.0>>3.0", None),
    ("<<5+2(3)=9>>9", None),
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
    "<<3*A=9*A>>",
    "<<2:15+2:38=8:40>>8:40",
    "<<83.33333333333333>>",
    "16 - 3 = <<16-3=13",  # a cut-off annotation
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
    (claim,) = find_claims("<<10/3=3.3333333333333335>>")
    assert claim.value == Fraction(10, 3) and claim.stated == Fraction("3.3333333333333335")
    assert claim.source == "annotation" and claim.text == "10/3=3.3333333333333335"


def test_a_chain_gives_one_claim_per_step():
    claims = find_claims("3 * 4 = 12 + 2 = 14")
    assert [(c.lhs, c.rhs, c.stated) for c in claims] == [("3 * 4", "12", 12), ("12 + 2", "14", 14)]


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


def test_every_false_claim_is_named():
    result = check_step("16 - 3 = 14 and 2 * 3 = 6 and 7 + 1 = 9")
    assert result.reason == ('claim "16 - 3 = 14" is false: 16 - 3 = 13; '
                             'claim "7 + 1 = 9" is false: 7 + 1 = 8')


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
    expected = "valid" if (places or exact.denominator == 1) else "invalid"
    assert check_step(text).verdict == expected, text
    wrong = shown + Fraction(2, 10**places)
    text = f"{a} / {b} = {wrong:.{places}f}"
    assert check_step(text).verdict == "invalid", text


@given(st.text(alphabet=st.sampled_from(list("0123456789 .,=+-*/x^()%$<>:½²abc\\{}")), max_size=80))
def test_any_text_gets_a_verdict(text):
    result = check_step(text)
    assert result.verdict in ("valid", "invalid", "neutral")
    assert (result.verdict == "invalid") == any(not c.ok for c in result.claims)


# --------------------------------------------------------------------------
# Skeleton check values and references


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


def _gsm8k_rows() -> list[dict]:
    assert GSM8K.exists(), f"the bundled GSM8K data is missing: {GSM8K}"
    with GSM8K.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _steps(text: str) -> list[str]:
    lines = [line for line in text.split("\n") if line.strip()]
    if lines and re.match(r"\s*A:", lines[-1]):
        lines = lines[:-1]
    return lines


def _skeleton_checks(ground_truth: str) -> list[str | None]:
    checks = []
    for line in _steps(ground_truth):
        m = re.search(r"<<([^<>]*)>>", line)
        checks.append(m.group(1) if m else None)
    return checks


@pytest.fixture(scope="module")
def rows():
    return _gsm8k_rows()


def test_skeleton_refs_on_janets_ducks(rows):
    problem = rows[0]
    checks = _skeleton_checks(problem["ground_truth"])
    assert checks == ["16-3-4=9", "9*2=18"]
    steps = _steps(problem["175b_verification"]["solution"])
    assert [check_step(s, checks).skeleton_refs for s in steps] == [(), (1,), (2,)]
    # The wrong solution never reaches 9 or 18.
    steps = _steps(problem["6b_finetuning"]["solution"])
    assert [check_step(s, checks).skeleton_refs for s in steps] == [(), ()]


def test_skeleton_refs_on_the_robe(rows):
    problem = rows[1]
    checks = _skeleton_checks(problem["ground_truth"])
    assert checks == ["2/2=1", "2+1=3"]
    steps = _steps(problem["6b_verification"]["solution"])  # "2 x 0.5 = <<2*0.5=1.0>>1.0", "... 3.0 bolts"
    assert [check_step(s, checks).skeleton_refs for s in steps] == [(1,), (2,)]
    # 175b_finetuning's "200+50 = 250 meters" derives neither.
    steps = _steps(problem["175b_finetuning"]["solution"])
    assert [check_step(s, checks).skeleton_refs for s in steps] == [(1,), (), (), (), ()]


def test_skeleton_refs_need_a_true_claim():
    checks = ["16-3-4=9", None, "9*2=18"]
    assert check_step("<<20-11=9>>9 left", checks).skeleton_refs == (1,)
    assert check_step("<<20-10=9>>9 left", checks).skeleton_refs == ()
    assert check_step("2 * 9 = 18 and 16 - 7 = 9", checks).skeleton_refs == (1, 3)
    assert check_step("10 / 3 = 3.33", ["10/3=3.33"]).skeleton_refs == (1,)
    assert check_step("nine eggs", checks).skeleton_refs == ()


# --------------------------------------------------------------------------
# The GSM8K scan. The reference below is deliberately separate from the
# verifier: a whitelist regex, then Python's eval over Fraction literals.

_REF_NUMBER = re.compile(r"\d+(?:\.\d+)?|\.\d+")
_REF_WHITELIST = re.compile(r"[\d.+\-*/() ]+")
_REF_VULGAR = {"½": "(1/2)", "¼": "(1/4)", "¾": "(3/4)", "⅓": "(1/3)", "⅔": "(2/3)"}


def _ref_eval(expr: str) -> Fraction | None:
    """Exact value of a bare arithmetic expression, None if not one."""
    expr = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", expr)  # thousands separators
    expr = re.sub(r"(\d+(?:\.\d+)?|\.\d+)%(?![\d.])", r"(\1/100)", expr)
    for char, frac in _REF_VULGAR.items():
        expr = expr.replace(char, frac)
    if not _REF_WHITELIST.fullmatch(expr) or not re.search(r"\d", expr):
        return None
    code = _REF_NUMBER.sub(lambda m: f"F('{m.group(0)}')", expr)
    code = re.sub(r"(?<=\))\s*\(", "*(", code)  # "2(3)": F('2')(F('3'))
    try:
        return eval(code, {"__builtins__": {}}, {"F": Fraction})  # noqa: S307 - whitelisted above
    except ZeroDivisionError:
        return None
    except SyntaxError:
        return None


def _ref_agrees(value: Fraction, result: str, floatish: bool) -> bool:
    """Looser than the verifier: one unit in the last shown decimal."""
    stated = Fraction(result)
    if value == stated:
        return True
    decimals = len(result.split(".")[1]) if "." in result else 0
    if decimals and abs(value - stated) < Fraction(1, 10**decimals):
        return True
    return floatish and abs(value - stated) <= Fraction(1, 10**9) * abs(stated)


def _false_annotations(step: str) -> list[str]:
    """The step's calculator annotations whose arithmetic is false."""
    out = []
    for inner in re.findall(r"<<([^<>]*)>>", step):
        parts = inner.split("=")
        result = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", parts[-1].strip())
        if len(parts) < 2 or not re.fullmatch(r"\d+(?:\.\d+)?", result):
            continue
        floatish = any(len(n.replace(".", "").lstrip("0")) >= 15 for n in _REF_NUMBER.findall(inner))
        for part in parts[:-1]:
            if not re.search(r"[-+*/(]", part.strip().lstrip("-")):
                continue  # a plain number: nothing computed
            value = _ref_eval(part)
            if value is not None and not _ref_agrees(value, result, floatish):
                out.append(inner)
                break
    return out


def _ref_visible_value(text: str) -> Fraction | None:
    """A visible equation side read the simple way: units and $ dropped."""
    text = text.replace("$", "").replace("−", "-").replace("–", "-").replace("×", "*").replace("÷", "/")
    text = re.sub(r"(?<=[\d)])\s*[xX]\s*(?=[\d(.$])", "*", text)
    text = re.sub(r"[^\W\d_]+", " ", text)  # unit words
    return _ref_eval(text)


@pytest.fixture(scope="module")
def scan(rows):
    """check_step on every step of every solution, timed."""
    results = []
    steps = [(i, model, k, step) for i, row in enumerate(rows) for model in MODELS
             for k, step in enumerate(_steps(row[model]["solution"]))]
    started = time.process_time()
    for i, model, k, step in steps:
        results.append(((i, model, k), step, check_step(step)))
    elapsed = time.process_time() - started
    return results, elapsed


def test_scan_covers_every_solution_quickly(rows, scan):
    results, elapsed = scan
    assert len(rows) == 1319
    assert len({key[:2] for key, _, _ in results}) == 5276
    assert elapsed < 10, f"{len(results)} steps took {elapsed:.1f} s of CPU"


def test_every_false_annotation_is_caught(scan):
    results, _ = scan
    missed = []
    n_false = 0
    for key, step, result in results:
        for inner in _false_annotations(step):
            n_false += 1
            flagged = [c.text for c in result.claims if c.source == "annotation" and not c.ok]
            if result.verdict != "invalid" or not any(inner.startswith(t) or inner.endswith(t) for t in flagged):
                missed.append((key, inner, result.reason))
    # The reference finds this many; keep the count pinned so a change in
    # either reader is noticed.
    assert n_false == 56
    assert missed == []


# Steps flagged invalid although every calculator annotation in them is
# true: 265 steps, all read by hand. None is an arithmetic misreading: each
# shows a visible equation that is false as written (the test below has the
# reference re-check every one).
# * 202 steps sit beside annotations, where the text contradicts its own
#   calculator (203 claims): 51 round or cut a fraction to a whole number
#   ("1/3*5=<<1/3*5=1.66...>>1 vacuum cleaner"), 39 drop a minus sign
#   ("360 - 480 = $<<360-480=-120>>120 less"), 41 write another result
#   ("$4.20 + $9.45 + $1.35 = $<<...=14.999999999999998>>14.99", "93 x 6 =
#   <<93*6=558>>293"), and 72 show other operands than the calculator got
#   ("50*2=<<30*2=60>>60 days", "120 melons – 30% = <<120-30=90>>90").
# * 63 have no annotation: "172-47+13 = 130 people" (it is 138), "20% * 40% =
#   80%", "60 x 2/5 = 40 apples", "2 degrees Celsius - 8 degrees Celsius = 10".
# The judgment calls among them, false as written but right as meant (notation
# slips, decimal commas), are the verifier's false positives in effect:
JUDGMENT_CALLS = {
    (7, "175b_finetuning", 2): '"0.5 * 40% = 20 minutes": means 40 minutes, not 40%',
    (413, "6b_verification", 0): '"50000/100*99% = 49500": means 99, not 99%',
    (580, "6b_verification", 1): '"18 / 100% = 0.18": means dividing by 100',
    (697, "6b_finetuning", 3): '"24 people / 100% = 0.24": means dividing by 100',
    (702, "6b_finetuning", 3): '"18,800 / 3,200 = 5,875": a decimal comma for 5.875',
    (1012, "6b_verification", 0): '"28/100*40= 11,200 mAh": a decimal comma for 11.200',
    (1310, "6b_finetuning", 3): '"4 miles / 4 minutes = 4 hours": a rate written as a quotient',
}


def test_flags_beyond_the_annotations_are_false_visible_equations(scan):
    results, _ = scan
    extra = [(key, step, result) for key, step, result in results
             if result.verdict == "invalid" and not _false_annotations(step)]
    unconfirmed = []
    for key, _step, result in extra:
        for claim in (c for c in result.claims if not c.ok):
            assert claim.source == "equation", (key, claim)
            lhs, rhs = _ref_visible_value(claim.lhs), _ref_visible_value(claim.rhs.rstrip("%"))
            if lhs is None or rhs is None:
                unconfirmed.append((key, claim.text))
                continue
            # The reference agrees the claim is false as written.
            shown = re.sub(r"[^\d.]", "", claim.rhs)
            plain = re.fullmatch(r"\d+(?:\.\d+)?", shown) and rhs == Fraction(shown)
            for stated in (rhs, rhs / 100) if claim.rhs.endswith("%") else (rhs,):
                if plain and stated == rhs:
                    assert not _ref_agrees(abs(lhs), shown, False) or lhs < 0, (key, claim)
                else:
                    assert lhs != stated, (key, claim)
    assert unconfirmed == []
    assert set(JUDGMENT_CALLS) <= {key for key, _, _ in extra}
    # Pinned just above the 265 read by hand, so a change that starts
    # flagging correct steps fails here and gets read.
    assert len(extra) <= 270, len(extra)
