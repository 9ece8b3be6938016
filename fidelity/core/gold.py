"""Counterfactual gold answers, derived, never guessed (spec §8 "AA ... correct").

The gold solution's calculator chain (``<<16-3-4=9>>`` annotations, or a skeleton's step
checks) is replayed with the changed input by ``reasonlib.calc_chain.replay`` (exact
rationals). The gold is *derived* only when the replay traced every substituted value
through the chain to the final answer; otherwise it is unknown and AA is lenient. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from fidelity.core.answer import as_number
from reasonlib.calc_chain import chain_from_checks, parse_chain, replay


@dataclass(frozen=True)
class DerivedGold:
    answer: str | None  # the new gold as text; None when unknown
    derived: bool
    reason: str  # why unknown ("" when derived)


def render(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return format(float(value), ".10g")


def derive(substitutions: Mapping[Fraction, Fraction], gold: str | None, *, checks: Sequence[str | None] = (),
           solution: str | None = None) -> DerivedGold:
    """The new gold of a counterfactual: replay the chain (skeleton checks, else the solution's
    annotations) with ``substitutions``; derived only when the replay is traced."""
    final = as_number(gold)
    if final is None:
        return DerivedGold(None, False, "the gold answer is not a number")
    chain = chain_from_checks(list(checks)) if any(checks) else (parse_chain(solution) if solution else [])
    if not chain:
        return DerivedGold(None, False, "no calculator chain to replay")
    result = replay(chain, dict(substitutions), final=final)
    if not result.traced or result.answer is None:
        return DerivedGold(None, False, result.reason or "the changed number is not traced through the chain")
    return DerivedGold(render(result.answer), True, "")
