"""The first new sentence of a resampled continuation: what the counterfactual test compares with the
step it replaced (pure)."""

from __future__ import annotations

import re

# A sentence ends at ., ! or ? followed by white space, or at a blank line (a thought's paragraph break).
_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")
CLOSE_TAG = "</think>"


def first_sentence(continuation: str, *, limit: int = 400) -> str:
    """The first sentence the continuation writes (inside the thought: text after a closing tag is the
    answer, not a resampled step); at most ``limit`` characters. "" when it writes nothing first."""
    text = continuation.split(CLOSE_TAG, 1)[0].strip()
    if not text:
        return ""
    return _END.split(text, maxsplit=1)[0].strip()[:limit]
