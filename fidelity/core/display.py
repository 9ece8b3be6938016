"""Segments of a text to highlight on the side-by-side view (pure). The templates render
each segment escaped, a highlighted one inside <mark>; nothing here produces HTML."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from fractions import Fraction

from fidelity.core.answer import as_number
from fidelity.core.pairs import _NUM
from fidelity.core.text import words

Segment = tuple[str, bool]


def number_segments(text: str, values: Iterable[Fraction]) -> list[Segment]:
    """``text`` cut into segments; numbers equal to one of ``values`` are highlighted."""
    wanted = set(values)
    out: list[Segment] = []
    last = 0
    for m in _NUM.finditer(text or ""):
        if as_number(m.group(0)) in wanted:
            if m.start() > last:
                out.append((text[last:m.start()], False))
            out.append((m.group(0), True))
            last = m.end()
    if last < len(text or ""):
        out.append((text[last:], False))
    return out


def changed_segments(original: str, variant: str, changes: Sequence[dict]) -> list[Segment]:
    """The variant question with its edits highlighted: the recorded number changes at their
    new positions, else (perturbations) the words the original does not have."""
    if changes:
        out: list[Segment] = []
        shift, last = 0, 0
        for c in sorted(changes, key=lambda c: c["start"]):
            start = c["start"] + shift
            out.append((variant[last:start], False))
            out.append((variant[start:start + len(c["new"])], True))
            last = start + len(c["new"])
            shift += len(c["new"]) - (c["end"] - c["start"])
        out.append((variant[last:], False))
        return [s for s in out if s[0]]
    known = set(words(original))
    out = []
    for tok in (variant or "").split(" "):
        fresh = bool(words(tok)) and any(w not in known for w in words(tok))
        out.append((tok, fresh))
        out.append((" ", False))
    return out[:-1] if out else out


def jitter(values: Sequence[float], seed: int = 0, width: float = 0.12) -> list[float]:
    """Small seeded offsets so integer scores do not hide each other on a scatter."""
    rng = random.Random(seed)
    return [v + rng.uniform(-width, width) for v in values]
