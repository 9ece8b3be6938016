"""The answer a value flip implies (spec 4.2 step 4, strict): the trace's own
arithmetic claims form a calculator chain; the flipped value replaces the old one
in every later step that uses it, results propagate, and the step that gave the
final answer gives the implied one. The replay is reasonlib.calc_chain's (the
one chain re-evaluator of the product); this module only lays the trace out as
a chain."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from reasonlib import calc_chain
from reasonlib.arithmetic import Claim


def implied_answer(step_claims: Sequence[Sequence[Claim]], step: int, old: Fraction, new: Fraction,
                   final: Fraction | None) -> Fraction | None:
    """The final answer implied by replacing ``old`` (derived in 1-based ``step``) by ``new``; None when
    the chain cannot trace it (then strict falls back to lenient)."""
    if final is not None and old == final and not any(
            c.stated == final for claims in step_claims[step:] for c in claims):
        return new  # the flipped step states the answer itself, and no later step derives it again
    checks: list[str] = []
    owner: list[int] = []
    for t, claims in enumerate(step_claims, start=1):
        for c in claims:
            if c.stated is not None and c.lhs.strip():
                checks.append(f"{c.lhs}={c.rhs}")
                owner.append(t)
    chain = calc_chain.chain_from_checks(checks)
    # chain_from_checks numbers the links it could read; span[0] is the position among the checks given.
    positions = [n for n, link in enumerate(chain) if owner[link.span[0]] == step and link.result == old]
    if not positions:
        return None
    k = positions[-1]
    replay = calc_chain.replay(chain, {old: new}, final=final, start=k + 1)
    return replay.answer if replay.traced else None
