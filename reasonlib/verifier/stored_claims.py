"""Each step's claim keys (reasonlib.verifier.corrections) as one compact text per trace: what the
mechanistic judge stores when it parses a trace, so the score recompute reads them instead of parsing
the steps again (annotation.TraceClaims).

One line per step in reading order; a line is empty when the step has no claim with a key, else its
wrong keys, a tab, its right keys, each list joined by spaces. Keys never hold blanks
(corrections.claim_key removes them), so neither separator can occur inside one."""

from __future__ import annotations

from collections.abc import Sequence

# The version of the parser and checker behind the keys (reasonlib.arithmetic, reasonlib.verifier):
# raise it with any change that can give a step other keys, and claims stored under an older version
# are parsed again instead of read (annotation.stored_claims).
CLAIMS_VERSION = 1

StepKeys = tuple[tuple[str, ...], tuple[str, ...]]  # (wrong, right)


def encode(steps: Sequence[StepKeys]) -> str:
    return "\n".join(f"{' '.join(wrong)}\t{' '.join(right)}" if wrong or right else "" for wrong, right in steps)


def decode(text: str) -> list[StepKeys]:
    """The keys of every step: the inverse of ``encode`` (a trace of no steps and one of a single step without
    claims both encode to "", read as one step; the reader checks the count against the trace's steps)."""
    out: list[StepKeys] = []
    for line in text.split("\n"):
        if not line:
            out.append(((), ()))
            continue
        wrong, _, right = line.partition("\t")
        out.append((tuple(wrong.split()), tuple(right.split())))
    return out
