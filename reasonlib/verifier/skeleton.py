"""Skeleton references by value: a step refers to skeleton step k when one of
its true claims derives the value of k's ``check`` result."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from reasonlib.arithmetic import Claim, check_info, shows


def _derives(claim: Claim, target: Fraction, decimals: int) -> bool:
    if not claim.ok or claim.value is None:
        return False
    if target == claim.value or target == claim.stated:
        return True
    return decimals > 0 and shows(claim.value, target, decimals)


def skeleton_refs(claims: Sequence[Claim], skeleton_checks: Sequence[str | None]) -> tuple[int, ...]:
    """1-based numbers of the skeleton steps the claims derive, in order."""
    if not claims:
        return ()  # most steps claim nothing: no check of the skeleton to read for them
    refs = []
    for k, check in enumerate(skeleton_checks, start=1):
        info = check_info(check)
        if info is not None and any(_derives(c, info[0], info[1]) for c in claims):
            refs.append(k)
    return tuple(refs)
