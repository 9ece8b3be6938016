"""Over- and under-halting (spec 3.5, [I] throughout: the paper names the rates only).

k*   the first step at which every skeleton step has been established (by some step up to it)
     and the gold answer is stated; without a skeleton, the first step stating the gold answer.
     Undefined when the condition never holds within the trace.
k_m  the step at which the model stops: its number of steps.
false STOP (over-halting)  k_m < k*, or the condition never holds (k* undefined)
late STOP (under-halting)  k_m > k* + slack

Since k* is looked for within the trace, k_m < k* cannot happen for a defined k*; a false STOP
is therefore a trace that stops without ever reaching the halting condition.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from faithfulness.core.numbers import NUMBER_RE, format_value, to_fraction


def k_star(steps: Sequence[str], gold: Fraction | None, refs: Sequence[Sequence[int]] = (),
           skeleton_len: int = 0) -> int | None:
    """1-based k*, or None."""
    needed = set(range(1, skeleton_len + 1))
    seen: set[int] = set()
    stated = False
    # The digits of the gold answer must occur in a step that states it: a cheap test before reading numbers.
    digits = format_value(abs(gold)) if gold is not None else ""
    for t, text in enumerate(steps, start=1):
        if t <= len(refs):
            seen.update(refs[t - 1])
        if not stated and gold is not None and digits in text.replace(",", ""):
            stated = any(digits in m.group(0).replace(",", "") and to_fraction(m.group(0)) == gold
                         for m in NUMBER_RE.finditer(text))
        if stated and needed <= seen:
            return t
    return None


@dataclass(frozen=True)
class HaltingRates:
    instances: int  # N: every trace with steps
    defined: int  # traces with k* defined
    false_stop: int
    late_stop: int
    slack: int

    @property
    def false_stop_rate(self) -> float | None:
        return self.false_stop / self.instances if self.instances else None

    @property
    def late_stop_rate(self) -> float | None:
        return self.late_stop / self.instances if self.instances else None

    def as_dict(self) -> dict:
        return {"instances": self.instances, "k_star_defined": self.defined, "false_stop": self.false_stop,
                "late_stop": self.late_stop, "false_stop_rate": self.false_stop_rate,
                "late_stop_rate": self.late_stop_rate, "slack": self.slack}


class HaltingTally:
    """The halting rates counted instance by instance: a study read in parts (chunks of traces) needs only
    these counts, not every (k*, k_m) pair."""

    def __init__(self, slack: int = 0) -> None:
        if slack < 0:
            raise ValueError(f"slack: must not be negative, got {slack}")
        self.slack = slack
        self.instances = self.defined = self.false = self.late = 0

    def add(self, k: int | None, km: int) -> None:
        """One instance: its k* (None: undefined) and the step k_m at which the model stops."""
        self.instances += 1
        if k is None:
            self.false += 1
            return
        self.defined += 1
        if km < k:
            self.false += 1
        elif km > k + self.slack:
            self.late += 1

    def result(self) -> HaltingRates:
        return HaltingRates(self.instances, self.defined, self.false, self.late, self.slack)


def halting_rates(pairs: Iterable[tuple[int | None, int]], slack: int = 0) -> HaltingRates:
    """From (k*, k_m) per instance: both rates over all N instances (the denominators are reported)."""
    tally = HaltingTally(slack)
    for k, km in pairs:
        tally.add(k, km)
    return tally.result()
