"""Aligning a published analysis's chunks to a trace's steps by their text (pure).

A chunk of a thought-anchors analysis is a sentence of the thought; a ReasonAudit thought step is usually a
paragraph. A chunk is aligned to the step whose text contains it (white space collapsed), searching
forward from the previous chunk's step, so repeated sentences go to their own occurrence; a chunk found in
no step is left unaligned (None) and counted."""

from __future__ import annotations

from collections.abc import Sequence


def _squash(text: str) -> str:
    return " ".join(text.split())


def align_chunks(chunks: Sequence[str], steps: Sequence[str]) -> list[int | None]:
    """The 0-based step index of each chunk, or None when no step (from the previous chunk's on) holds it."""
    squashed = [_squash(s) for s in steps]
    out: list[int | None] = []
    step, offset = 0, 0  # where the previous chunk ended
    for chunk in chunks:
        needle = _squash(chunk)
        found = None
        if needle:
            for k in range(step, len(squashed)):
                at = squashed[k].find(needle, offset if k == step else 0)
                if at >= 0:
                    found, step, offset = k, k, at + len(needle)
                    break
        out.append(found)
    return out
