"""Step verdicts: every false claim named, any text judged, and a scan of
all 5,276 bundled GSM8K model solutions against an independent reference
check of their calculator annotations."""

from __future__ import annotations

import re
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reasonlib.verifier.verdicts import check_step
from tests.judges.mechanistic.gsm8k import MODELS, skeleton_checks, split_steps


def test_every_false_claim_is_named():
    result = check_step("16 - 3 = 14 and 2 * 3 = 6 and 7 + 1 = 9")
    assert result.reason == ('claim "16 - 3 = 14" is false: 16 - 3 = 13; '
                             'claim "7 + 1 = 9" is false: 7 + 1 = 8')


@given(st.text(alphabet=st.sampled_from(list("0123456789 .,=+-*/x^()%$<>:½²abc\\{}")), max_size=80))
def test_any_text_gets_a_verdict(text):
    result = check_step(text)
    assert result.verdict in ("valid", "invalid", "neutral")
    assert (result.verdict == "invalid") == any(not c.ok for c in result.claims)


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


def _ref_agrees(value: Fraction, result: str, floatish: bool, rounds: bool = False) -> bool:
    """The rounding rule of docs/judges.md, written independently: exact, or
    within half a unit of the last shown decimal when the exact value has no
    finite decimal (or the step says it rounds: ``rounds``)."""
    stated = Fraction(result)
    if value == stated:
        return True
    if floatish and abs(value - stated) <= Fraction(1, 10**9) * abs(stated):
        return True
    decimals = len(result.split(".")[1]) if "." in result else 0
    den = value.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    if not rounds and (den == 1 or not decimals):
        return False
    return abs(value - stated) <= Fraction(1, 2 * 10**decimals)


def _ref_rounds(step: str) -> bool:
    return bool(re.search(r"(?i)round|approx|roughly|≈|~\s*\$?\d|\b(about|around|nearly|almost|circa) \$?\d", step))


def _false_annotations(step: str) -> list[str]:
    """The step's calculator annotations whose arithmetic is false."""
    out = []
    for inner in re.findall(r"<<([^<>]*)>>", step):
        parts = inner.split("=")
        result = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", parts[-1].strip())
        if len(parts) < 2 or not re.fullmatch(r"\d+(?:\.\d+)?", result):
            continue
        floatish = any(len(n.replace(".", "").lstrip("0")) >= 15 for n in _REF_NUMBER.findall(inner))
        rounds = _ref_rounds(re.sub(r"<<[^<>]*>>", "", step))
        for part in parts[:-1]:
            if not re.search(r"[-+*/(]", part.strip().lstrip("-")):
                continue  # a plain number: nothing computed
            value = _ref_eval(part)
            if value is not None and not _ref_agrees(value, result, floatish, rounds):
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
    """check_step on every step of every solution, with the problem's skeleton checks."""
    results = []
    all_steps = [(i, model, k, step) for i, row in enumerate(rows) for model in MODELS
                 for k, step in enumerate(split_steps(row[model]["solution"]))]
    checks = [skeleton_checks(row["ground_truth"]) for row in rows]
    for i, model, k, step in all_steps:
        results.append(((i, model, k), step, check_step(step, checks[i])))
    return results


def test_scan_covers_every_solution(rows, scan):
    assert len(rows) == 1319
    assert len({key[:2] for key, _, _ in scan}) == 5276


def test_the_demo_verdict_counts_are_pinned(scan):
    # The figures docs/judges.md reports for a judge run over the bundled
    # demo: a change in any reader (annotations, equations, skeleton
    # references) moves one of them and gets read.
    verdicts = Counter(result.verdict for _, _, result in scan)
    # (Issue 23: 8 steps that cut a repeating decimal or round an exact
    # value without saying so, and "we get 3 = 7", turned invalid.)
    # (Issue 30: "3 hours - 80 minutes = 77 minutes" and "12 boxes - 40 oranges =
    # 28 oranges" subtract different things, so they have no number to check.)
    assert dict(verdicts) == {"valid": 16_503, "invalid": 328, "neutral": 1_045}
    assert len({key[:2] for key, _, result in scan if result.verdict == "invalid"}) == 283
    assert sum(1 for _, _, result in scan if result.skeleton_refs) == 8_275


def test_every_false_annotation_is_caught(scan):
    results = scan
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
    results = scan
    extra = [(key, step, result) for key, step, result in results
             if result.verdict == "invalid" and not _false_annotations(step)]
    unconfirmed = []
    for key, _step, result in extra:  # noqa: B007 - _step is read
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
                    assert not _ref_agrees(abs(lhs), shown, False, _ref_rounds(_step)) or lhs < 0, (key, claim)
                else:
                    assert lhs != stated, (key, claim)
    assert unconfirmed == []
    assert set(JUDGMENT_CALLS) <= {key for key, _, _ in extra}
    # Pinned just above the 265 read by hand plus the 9 of issue 23 (cut
    # repeating decimals "5/3 = 1.6", unsaid rounding "0.0625 * 100% = 6%",
    # "we get 3 = 7"), so a change that starts flagging correct steps fails here.
    assert len(extra) <= 278, len(extra)
