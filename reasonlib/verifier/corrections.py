"""Which claims a step gets wrong and which it gets right, as keys that a
later step can match: the ground of "a later thought step corrects an
earlier error" (docs/scoring.md, section 9)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from reasonlib.arithmetic import Claim
from reasonlib.verifier.verdicts import find_claims

_BLANKS = re.compile(r"\s+")


def claim_key(lhs: str) -> str:
    """The left-hand side of a claim without blanks: "16 - 3 - 4" and
    "16-3-4" re-derive the same quantity."""
    return _BLANKS.sub("", lhs)


def claim_keys(step_text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(wrong, right): sorted keys of the step's false and true claims whose
    value is defined (a division by zero corrects nothing)."""
    return keys_of(find_claims(step_text))


def keys_of(claims: Iterable[Claim]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``claim_keys`` of claims already found (the mechanistic judge has them from its verdict)."""
    wrong: set[str] = set()
    right: set[str] = set()
    for c in claims:
        if c.value is None or not c.lhs.strip():
            continue
        (right if c.ok else wrong).add(claim_key(c.lhs))
    return tuple(sorted(wrong)), tuple(sorted(right))
