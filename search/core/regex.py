"""Bounded regular expressions for the ``re`` search option: a length limit on the pattern and a
timeout per match (the ``regex`` module's ``timeout``), so no pattern can hold a worker."""

from __future__ import annotations

from dataclasses import dataclass

import regex

from reasonlib.refusals import Invalid

MAX_PATTERN_CHARS = 200
MATCH_TIMEOUT_S = 0.05


class RegexError(Invalid):
    """A pattern refused; the message names the problem for the ``re`` field."""


@dataclass(frozen=True)
class Bounded:
    pattern: regex.Pattern

    def search(self, text: str) -> regex.Match | None:
        """First match or None; raises TimeoutError past the per-match timeout."""
        return self.pattern.search(text, timeout=MATCH_TIMEOUT_S)


def compile_bounded(pattern: str, *, ignore_case: bool = True) -> Bounded:
    if not pattern:
        raise RegexError("the pattern is empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise RegexError(f"the pattern is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS}")
    try:
        return Bounded(regex.compile(pattern, regex.IGNORECASE | regex.V1 if ignore_case else regex.V1))
    except regex.error as exc:
        raise RegexError(f"not a valid pattern: {exc}") from None
