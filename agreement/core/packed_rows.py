"""The pair report's disagreements packed as arrays while a report is computed (agreement.streamed chunk by
chunk, agreement.services at once), for ``agreement.stored.write_chunks`` to write as stored rows. Here, not in
agreement.stored, because every process loads that at start-up (the app's ready()) and this needs pandas' output
(tests/test_startup_imports.py)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from agreement.core.pairs import codes_of
from scoring.core.labels import VERDICTS


class PackedRows:
    """The pair report's disagreements as arrays (trace pk, step, the two verdicts' codes, the confidence):
    22 bytes a row, where the rows as Python lists take about 400 and their JSON about 45. Added chunk by
    chunk in trace order (agreement.streamed) or at once (services.disagreement_rows); iterated, each is the
    stored row ``[trace pk, step, reference verdict, candidate verdict, confidence or None]``, which is what
    ``write_chunks`` writes a chunk at a time and ``Rows`` reads back."""

    _COLUMNS = (("trace", np.int64), ("step", np.int64), ("reference", np.int8), ("candidate", np.int8),
                ("confidence", np.float64))

    def __init__(self) -> None:
        self._parts: list[tuple[np.ndarray, ...]] = []
        self._n = 0

    def add(self, pairs: pd.DataFrame) -> None:
        """The disagreeing steps of one chunk's pairing (agreement.core.pairs.paired_steps output)."""
        ref, cand = codes_of(pairs)
        diff = ref != cand
        if not diff.any():
            return
        values = (pairs["trace_id"].to_numpy()[diff], pairs["step"].to_numpy()[diff], ref[diff], cand[diff],
                  pairs["confidence"].to_numpy(dtype=float)[diff])
        self._parts.append(tuple(v.astype(t) for v, (_, t) in zip(values, self._COLUMNS, strict=True)))
        self._n += int(diff.sum())

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[list]:
        for trace, step, ref, cand, conf in self._parts:
            for t, s, r, c, x in zip(trace.tolist(), step.tolist(), ref.tolist(), cand.tolist(), conf.tolist(),
                                     strict=True):
                yield [t, s, VERDICTS[r], VERDICTS[c], None if x != x else x]  # x != x: NaN, no confidence
