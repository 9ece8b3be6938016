"""A progress bar on the terminal for long commands (stderr, so --json stays clean)."""

from __future__ import annotations

import sys

from tqdm import tqdm


class Bar:
    def __init__(self, desc: str, *, unit: str = "B", enabled: bool = True, unit_scale: bool = True) -> None:
        self.bar = tqdm(total=0, desc=desc, unit=unit, unit_scale=unit_scale, file=sys.stderr,
                        disable=not enabled, leave=True, dynamic_ncols=True)

    def __call__(self, done: int, total: int) -> None:
        if self.bar.total != total:
            self.bar.total = total
        self.bar.n = done
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()
