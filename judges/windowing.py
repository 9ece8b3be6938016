"""Overlapping windows of a long trace for an LLM judge (docs/judges.md,
"Long thoughts in windows"). Pure: no Django, no I/O.

A judge whose context cannot hold a 5,000-step thought sees it in windows of
consecutive steps that fit a token budget. Consecutive windows share
``overlap`` steps so every step is seen with some of what came before it.
Each step's label is taken from exactly one window: the window whose *core*
holds it. Cores partition the steps: a shared stretch is split at its middle,
so a step is labelled by the window in which it sits further from the edge
(more context on both sides). Same input, same windows, same merged labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: Characters per token of the estimate (the judges' max_tokens uses the same).
CHARS_PER_TOKEN = 4
#: Tokens a step costs besides its text ("Step 123: " and the newline).
STEP_OVERHEAD_TOKENS = 4


@dataclass(frozen=True)
class Window:
    """Steps ``start..end`` (1-based, inclusive) are shown; the labels of
    ``core_start..core_end`` are kept."""

    start: int
    end: int
    core_start: int
    core_end: int

    @property
    def n_steps(self) -> int:
        return self.end - self.start + 1


def step_tokens(text: str) -> int:
    """Estimated tokens of one step in the prompt."""
    return -(-len(text) // CHARS_PER_TOKEN) + STEP_OVERHEAD_TOKENS


def plan_windows(step_costs: Sequence[int], budget: int, overlap: int = 0,
                 max_steps: int | None = None) -> list[Window]:
    """Windows over steps with the given token costs, each of total cost at
    most ``budget`` (a single step dearer than the budget gets a window of
    its own) and at most ``max_steps`` steps, consecutive windows sharing
    ``overlap`` steps where the budget allows. One window when everything fits.
    """
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps: must be at least 1, got {max_steps!r}")
    if budget < 1:
        raise ValueError(f"budget: must be at least 1 token, got {budget!r}")
    if overlap < 0:
        raise ValueError(f"overlap: must be >= 0, got {overlap!r}")
    n = len(step_costs)
    if n == 0:
        return []
    if any(c < 0 for c in step_costs):
        raise ValueError("step_costs: must be >= 0")
    spans: list[tuple[int, int]] = []
    start = 1
    while True:
        end, total = start, step_costs[start - 1]
        while end < n and total + step_costs[end] <= budget and (max_steps is None or end - start + 1 < max_steps):
            total += step_costs[end]
            end += 1
        spans.append((start, end))
        if end == n:
            break
        # The next window repeats up to `overlap` steps, but always advances.
        start = max(start + 1, end + 1 - overlap)
    windows: list[Window] = []
    for i, (s, e) in enumerate(spans):
        core_s = s if i == 0 else windows[-1].core_end + 1
        if i + 1 < len(spans):
            nxt = spans[i + 1][0]
            # shared steps nxt..e: the first half stays here, the rest goes on
            core_e = max(core_s - 1, (nxt + e) // 2) if nxt <= e else e
        else:
            core_e = e
        windows.append(Window(s, e, core_s, core_e))
    return windows


def merge_window_labels(windows: Sequence[Window], labels: Sequence[Sequence[tuple[int, object]]]) -> list[object]:
    """Per window, its (trace step number, label) pairs -> the labels of the
    steps in window cores, in step order (steps a window's judge left out stay
    unlabelled, as for one request)."""
    if len(windows) != len(labels):
        raise ValueError("labels: need one list per window")
    out: dict[int, object] = {}
    for w, pairs in zip(windows, labels, strict=True):
        for step, label in pairs:
            if w.core_start <= step <= w.core_end and step not in out:
                out[step] = label
    return [out[s] for s in sorted(out)]
