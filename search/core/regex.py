"""Bounded regular expressions for the ``re`` search option: a length limit on the pattern, a
timeout per match (the ``regex`` module's ``timeout``) and a budget of time per request shared by
every match the request makes (filtering and snippet marking), so no pattern can hold a worker."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import regex

from reasonlib.refusals import Invalid

MAX_PATTERN_CHARS = 200
MATCH_TIMEOUT_S = 0.05


class RegexError(Invalid):
    """A pattern refused; the message names the problem for the ``re`` field."""


class BudgetSpent(Exception):
    """The request's budget for regular expressions is spent: stop matching and say so."""


@dataclass
class Budget:
    """Seconds of matching one request may spend in all, from its creation (a monotonic clock).

    Every match is given at most what is left (and at most MATCH_TIMEOUT_S), so the request's
    matching ends within the budget whatever the pattern and the texts (issue 29, M4: a page's
    snippet marking re-ran the pattern over every step with 0.05 s each and no total: 88 s)."""

    seconds: float
    started: float = field(default_factory=time.monotonic)

    def left(self, reserve: float = 0.0) -> float:
        """Seconds left, keeping ``reserve`` of them back (for a later use of the same budget)."""
        return self.seconds - reserve - (time.monotonic() - self.started)


@dataclass(frozen=True)
class Bounded:
    pattern: regex.Pattern

    def search(self, text: str, budget: Budget | None = None, *, reserve: float = 0.0) -> regex.Match | None:
        """First match or None. Raises TimeoutError when the match alone took MATCH_TIMEOUT_S (the
        pattern is too slow for a step), BudgetSpent when ``budget`` (less ``reserve``) ran out first."""
        if budget is None:
            return self.pattern.search(text, timeout=MATCH_TIMEOUT_S)
        left = budget.left(reserve)
        if left <= 0:
            raise BudgetSpent
        if left >= MATCH_TIMEOUT_S:
            return self.pattern.search(text, timeout=MATCH_TIMEOUT_S)
        try:
            return self.pattern.search(text, timeout=left)
        except TimeoutError:
            raise BudgetSpent from None


def compile_bounded(pattern: str, *, ignore_case: bool = True) -> Bounded:
    if not pattern:
        raise RegexError("the pattern is empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise RegexError(f"the pattern is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS}")
    try:
        return Bounded(regex.compile(pattern, regex.IGNORECASE | regex.V1 if ignore_case else regex.V1))
    except regex.error as exc:
        raise RegexError(f"not a valid pattern: {exc}") from None
