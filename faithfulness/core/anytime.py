"""The anytime profile (spec 4.3): budget grids, truncation of an existing trace
at a budget, Acc(b) and AUC_any.

Token budgets count [I] approximate tokens: word pieces (a run of letters or
digits, or one other non-space character, each with its leading space). When the
server reported the trace's completion tokens, the budget is scaled by
pieces / reported tokens, so b reported tokens cut at the matching piece. A trace
"ended within" budget b when its length (reported tokens when known, else
pieces; for step grids its number of steps) is at most b and it was not cut by
max_tokens: it then keeps its own answer, no model call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reasonlib.refusals import Invalid

TOKENS, STEPS = "tokens", "steps"
THINKING = "thinking"  # tokens of the thought only (faithfulness.core.early: thinking budgets)
UNITS = (TOKENS, STEPS, THINKING)
FULL = None  # the budget "full": the whole trace
# A piece: a run of word characters or one other non-space character. No leading \s*: on a long run of
# whitespace every start would scan the run to its end (quadratic; model output may end that way); the
# pieces' ends are the same without it, because finditer skips what does not match.
PIECE_RE = re.compile(r"\w+|[^\w\s]")
DEFAULT_TOKEN_GRID = "tokens:64,128,256,512,1024,2048,full"
DEFAULT_STEP_GRID = "steps:1,2,3,5,8,full"


class GridError(Invalid):
    pass


@dataclass(frozen=True)
class Grid:
    unit: str
    budgets: tuple[int | None, ...]  # None = full

    @property
    def spec(self) -> str:
        return f"{self.unit}:" + ",".join("full" if b is None else str(b) for b in self.budgets)

    def labels(self) -> list[str]:
        return ["full" if b is None else str(b) for b in self.budgets]


#: The largest grid (docs/runs.md, "Parameter limits"): every budget is one forced answer per trace, so a
#: grid of 300,000 budgets would plan 600,000 rows for two traces; no trace is longer than these budgets.
MAX_GRID_POINTS = 64
MAX_BUDGET = {TOKENS: 131_072, STEPS: 1_000, THINKING: 131_072}


def parse_grid(text: str) -> Grid:
    """"tokens:64,128,256,full", "steps:1,2,3,5,8,full" or "thinking:256,512,full" (tokens of the
    thought): strictly increasing positive integers, "full" only last; at most MAX_GRID_POINTS budgets,
    each at most MAX_BUDGET of its unit."""
    unit, sep, rest = (text or "").strip().partition(":")
    unit = unit.strip()
    if not sep or unit not in UNITS:
        raise GridError(f"budget grid {text!r}: write tokens:B1,B2,..., steps:B1,B2,... or thinking:B1,B2,... "
                        f"(e.g. {DEFAULT_TOKEN_GRID})")
    items = [x.strip() for x in rest.split(",")]
    if not items or any(not x for x in items):
        raise GridError(f"budget grid {text!r}: an empty budget")
    if len(items) > MAX_GRID_POINTS:
        raise GridError(f"budget grid: {len(items)} budgets; at most {MAX_GRID_POINTS}")
    budgets: list[int | None] = []
    for i, item in enumerate(items, start=1):
        if item == "full":
            if i != len(items):
                raise GridError(f"budget grid {text!r}: 'full' must be the last budget (it is number {i})")
            budgets.append(FULL)
            continue
        try:
            value = int(item)
        except ValueError:
            raise GridError(f"budget grid {text!r}: budget {i} ({item!r}) is not a whole number") from None
        if value < 1:
            raise GridError(f"budget grid {text!r}: budget {i} ({value}) must be at least 1")
        if value > MAX_BUDGET[unit]:
            raise GridError(f"budget grid {text!r}: budget {i} ({value}) exceeds the largest {unit} budget, "
                            f"{MAX_BUDGET[unit]}")
        if budgets and value <= budgets[-1]:  # type: ignore[operator]
            raise GridError(f"budget grid {text!r} is not increasing: budget {i} ({value}) does not exceed "
                            f"budget {i - 1} ({budgets[-1]})")
        budgets.append(value)
    return Grid(unit, tuple(budgets))


def piece_ends(text: str) -> list[int]:
    return [m.end() for m in PIECE_RE.finditer(text)]


@dataclass(frozen=True)
class Cut:
    within: bool  # the trace ended within the budget: its own answer counts
    prefix: str  # the truncated text (the whole text when within)
    used: int  # budget units the trace used up to the cut


def cut_tokens(raw: str, budget: int | None, *, reported_tokens: int | None = None, truncated: bool = False,
               ends: list[int] | None = None) -> Cut:
    ends = piece_ends(raw) if ends is None else ends
    length = reported_tokens if reported_tokens else len(ends)
    if budget is None or (length <= budget and not truncated):
        return Cut(True, raw, length)
    scale = len(ends) / reported_tokens if reported_tokens else 1.0
    n = min(len(ends), int(budget * scale))
    return Cut(False, raw[: ends[n - 1]] if n else "", min(budget, length))


def cut_steps(raw: str, spans: Sequence[tuple[int, int]], budget: int | None, *, truncated: bool = False) -> Cut:
    if budget is None or (len(spans) <= budget and not truncated):
        return Cut(True, raw, len(spans))
    n = min(budget, len(spans))
    return Cut(False, raw[: spans[n - 1][1]] if n else "", n)


def accuracy(correct: Sequence[Sequence[bool | None]]) -> list[float | None]:
    """Acc(b) per budget from a (instances x budgets) table; an undecided answer (None) counts as wrong."""
    if not len(correct):
        return []
    a = np.array([[bool(c) for c in row] for row in correct], dtype=float)
    return [float(x) for x in a.mean(axis=0)]


def auc_any(acc: Sequence[float | None]) -> float | None:
    """AUC_any = (1/K) sum_k Acc(b_k); comparable only between results on the same grid."""
    vals = [a for a in acc if a is not None]
    if not vals or len(vals) != len(acc):
        return None
    return float(sum(vals) / len(vals))
