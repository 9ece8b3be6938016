"""The mean, median and maximum of the traces' step counts, from a count per value: a study read in
parts (chunks of traces) keeps one number per distinct step count, not one per trace, and gets the
very numbers ``statistics.fmean``, ``statistics.median`` and ``max`` give over the whole list.
"""

from __future__ import annotations

from collections import Counter


class StepCounts:
    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()
        self.n = 0
        self.total = 0

    def add(self, steps: int) -> None:
        self.counts[steps] += 1
        self.n += 1
        self.total += steps

    def mean(self) -> float | None:
        # statistics.fmean sums exactly and rounds once: so does an int sum turned float.
        return float(self.total) / self.n if self.n else None

    def _at(self, position: int) -> int:
        """The value at 0-based ``position`` of the sorted list of every trace's count."""
        seen = 0
        for value in sorted(self.counts):
            seen += self.counts[value]
            if position < seen:
                return value
        raise IndexError(position)

    def median(self) -> float | int | None:
        """As statistics.median: the middle value itself (an int) for an odd count, the mean of the
        two middle ones (a float) for an even count."""
        if not self.n:
            return None
        if self.n % 2:
            return self._at(self.n // 2)
        return (self._at(self.n // 2 - 1) + self._at(self.n // 2)) / 2

    def max(self) -> int | None:
        return max(self.counts) if self.counts else None
