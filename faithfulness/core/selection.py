"""Which steps of a trace should matter (spec 4.2 step 1): a step whose derived
value is used later -- it appears as a number in a later step or is the final
answer -- or a step that establishes a skeleton step. The derived values and the
skeleton references come from the mechanistic verifier's readers
(judges.providers.mechanistic), so a step "derives" exactly what the verifier
checks. Chosen deterministically: the earliest such steps, at most ``per_trace``.
``claims`` holds the claims of the steps read (all of them when fewer targets were found)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from faithfulness.core.numbers import to_fraction, values
from reasonlib.arithmetic import Claim
from reasonlib.verifier.skeleton import skeleton_refs
from reasonlib.verifier.verdicts import find_claims

DEFAULT_PER_TRACE = 3
NO_STEPS = "the trace has no steps"
NO_TARGET = "no step derives a value that a later step or the answer uses, or establishes a skeleton step"


@dataclass(frozen=True)
class Target:
    step: int  # 1-based
    value: Fraction | None  # the derived value an edit changes (None: the step only establishes a skeleton step)
    why: str  # "used by step 4", "is the final answer", "establishes skeleton step 2"
    used_by: tuple[int, ...] = ()  # the first later step that shows the value
    skeleton_refs: tuple[int, ...] = ()


@dataclass
class Selection:
    targets: list[Target] = field(default_factory=list)
    candidates: int = 0  # causally relevant steps found (the search stops at ``per_trace``)
    skipped: str = ""  # why no target (empty when there is one)
    claims: list[list[Claim]] = field(default_factory=list)  # per step, for the chain replay


def select_targets(steps: Sequence[str], answer: str | None, skeleton_checks: Sequence[str | None] = (), *,
                   per_trace: int = DEFAULT_PER_TRACE) -> Selection:
    """The intervention targets of one trace (earliest first)."""
    if per_trace < 1:
        raise ValueError(f"per_trace: must be at least 1, got {per_trace!r}")
    sel = Selection()
    if not steps:
        sel.skipped = NO_STEPS
        return sel
    cache: dict[int, set[Fraction]] = {}

    def later(u: int) -> set[Fraction]:  # the numbers of step u (1-based), read only when asked for
        if u not in cache:
            cache[u] = values(steps[u - 1])
        return cache[u]

    answer_value = to_fraction((answer or "").strip().lstrip("$")) if answer else None
    for t, text in enumerate(steps, start=1):
        claims = find_claims(text)
        sel.claims.append(claims)
        derived = [c.stated for c in claims if c.stated is not None]
        refs = skeleton_refs(claims, skeleton_checks) if skeleton_checks else ()
        target = None
        # The last derived value first: a step's result usually ends its chain of equations.
        for value in reversed(derived):
            first = next((u for u in range(t + 1, len(steps) + 1) if value in later(u)), None)
            used_by = (first,) if first is not None else ()
            if used_by:
                target = Target(t, value, f"used by step {used_by[0]}", used_by, refs)
                break
            if answer_value is not None and value == answer_value:
                target = Target(t, value, "is the final answer", (), refs)
                break
        if target is None and refs:
            target = Target(t, derived[-1] if derived else None, f"establishes skeleton step {refs[0]}", (), refs)
        if target is not None:
            sel.candidates += 1
            sel.targets.append(target)
            if len(sel.targets) == per_trace:
                break  # the earliest per_trace steps are chosen: the rest need not be read
    if not sel.targets:
        sel.skipped = NO_TARGET
    return sel
