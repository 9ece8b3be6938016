"""A step's verdict from its claims: invalid when one is false, valid when all
hold, neutral when nothing is checkable."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from reasonlib.arithmetic import Claim, says_it_rounds, unlatex
from reasonlib.verifier.calculator import annotation_claims, visible_and_annotations
from reasonlib.verifier.equations import visible_claims
from reasonlib.verifier.skeleton import skeleton_refs


@dataclass(frozen=True)
class StepCheck:
    verdict: str  # "valid" | "invalid" | "neutral"
    reason: str
    claims: tuple[Claim, ...]
    skeleton_refs: tuple[int, ...]  # 1-based skeleton step numbers
    confidence: float | None  # 1.0 for invalid/valid, None for neutral


def find_claims(step_text: str) -> list[Claim]:
    """Every checkable arithmetic claim of a step, in reading order."""
    visible, anns = visible_and_annotations(unlatex(step_text or ""))
    # Rounding is tolerated only where the step says it rounds (or the value
    # cannot be written exactly): reasonlib.arithmetic's rule.
    rounds = says_it_rounds(visible)
    ann_claims = annotation_claims(anns, rounds)
    found: list[tuple[int, int, Claim]] = [(pos, 0, c) for c, pos in ann_claims]
    for claim, pos, r0, r1 in visible_claims(visible, rounds):
        # The visible twin of an annotation ("16 - 3 = <<16-3=13>>13")
        # is the same claim; keep it only when it says something else
        # that is false ("2 * 3 = <<2*3=6>>7").
        twins = [a for a, p in ann_claims if r0 <= p <= r1]
        if twins and (claim.ok or any(
            not a.ok and a.stated == claim.stated for a in twins
        )):
            continue
        found.append((pos, 1, claim))
    found.sort(key=lambda x: (x[0], x[1]))
    return [c for _, _, c in found]


def _fmt(v: Fraction | None, min_decimals: int = 0) -> str:
    """A value for a reason: exact when it terminates, else cut with "…"."""
    if v is None:
        return "undefined (division by zero)"
    if v == 0:
        return "0"
    sign = "-" if v < 0 else ""
    a = abs(v)
    places = max(6, min_decimals + 2)
    if max(a.numerator.bit_length(), a.denominator.bit_length()) > 3000 or a < Fraction(1, 10**places):
        # Too long to print (str() refuses ints past 4300 digits) or too small for fixed places.
        exp10 = math.log10(a.numerator) - math.log10(a.denominator)
        e = math.floor(exp10)
        return f"{sign}{10 ** (exp10 - e):.6f}e{e}"
    if a.denominator == 1:
        return f"{sign}{a.numerator}"
    d = a.denominator
    exact_places = 0
    while d % 10 == 0:
        d //= 10
        exact_places += 1
    while d % 2 == 0 or d % 5 == 0:
        d //= 2 if d % 2 == 0 else 5
        exact_places += 1
    exact = d == 1 and exact_places <= 20
    if exact:
        places = exact_places
    digits = f"{math.floor(a * 10**places):0{places + 1}d}"
    out = f"{sign}{digits[:-places]}.{digits[-places:]}"
    return out if exact else out + "…"


def _describe_false(c: Claim) -> str:
    if " remainder " in c.rhs:  # equations.remainder_claims
        a, b = (int(x.replace(",", "")) for x in re.split(r"\s*[÷/]\s*", c.lhs))
        return f'claim "{c.text}" is false: {c.lhs} = {a // b} remainder {a % b}'
    decimals = len(c.rhs.rsplit(".", 1)[1].rstrip("% ")) if "." in c.rhs else 0
    if c.rhs.rstrip().endswith("%") and c.value is not None and c.stated is not None:
        # A percentage is shown as one: "0.0625 * 100% = 6%" is 6.25%, and
        # "10 / 20 * 100 = 40%" is 50% (the left side already counts percent).
        # Whichever reading is nearer the stated percentage is the one meant.
        stated_pct = c.stated * 100
        as_pct = min((c.value * 100, c.value), key=lambda v: abs(v - stated_pct))
        return f'claim "{c.text}" is false: {c.lhs} = {_fmt(as_pct, decimals)}%'
    return f'claim "{c.text}" is false: {c.lhs} = {_fmt(c.value, decimals)}'


def check_step(step_text: str, skeleton_checks: Sequence[str | None] = ()) -> StepCheck:
    """Verdict of one step from the arithmetic it shows.

    ``skeleton_checks`` are the problem's skeleton ``check`` expressions in
    order; the step refers to skeleton step k (1-based) when one of its true
    claims derives the value of k's check result.
    """
    claims = tuple(find_claims(step_text))
    refs = skeleton_refs(claims, skeleton_checks)
    false = [c for c in claims if not c.ok]
    if false:
        reason = "; ".join(_describe_false(c) for c in false)
        return StepCheck("invalid", reason, claims, refs, 1.0)
    if claims:
        if len(claims) == 1:
            reason = f'claim "{claims[0].text}" holds'
        else:
            reason = f"all {len(claims)} claims hold"
        return StepCheck("valid", reason, claims, refs, 1.0)
    return StepCheck("neutral", "nothing checkable", claims, refs, None)
