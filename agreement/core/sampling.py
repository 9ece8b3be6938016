"""The stratified sample of a calibration study (pure): strata by model and answer correctness, how many traces
each gives (equal shares with water filling, or proportional by largest remainder), the seeded draw and the
queue order that interleaves the strata (docs/agreement.md, "Calibration studies")."""

from __future__ import annotations

import numpy as np
import pandas as pd

from reasonlib.refusals import FieldInvalid

ANSWER_NAMES = {True: "correct", False: "wrong", None: "undecided"}


class CalibrationError(FieldInvalid):
    """Bad input; str() starts with the field."""


def stratum_name(model: str, answer_correct: bool | None) -> str:
    return f"{model} / {ANSWER_NAMES[answer_correct]}"


def allocate(sizes: dict[str, int], total: int, allocation: str = "equal") -> dict[str, int]:
    """How many traces to draw from each stratum (never more than it has).

    ``equal``: the same number from every stratum; strata too small give all
    they have and the rest is shared among the others (water filling); a
    remainder goes one each to the first strata in name order.
    ``proportional``: ``total * size / all`` rounded by largest remainder
    (ties in name order).
    """
    keys = sorted(sizes)
    total = max(0, min(int(total), sum(sizes.values())))
    alloc = dict.fromkeys(keys, 0)
    if allocation == "proportional":
        n = sum(sizes.values())
        if n == 0:
            return alloc
        quotas = {k: total * sizes[k] / n for k in keys}
        for k in keys:
            alloc[k] = int(np.floor(quotas[k]))
        left = total - sum(alloc.values())
        for k in sorted(keys, key=lambda k: (-(quotas[k] - alloc[k]), k))[:left]:
            alloc[k] += 1
        return alloc
    if allocation != "equal":
        raise CalibrationError("allocation", "choose equal or proportional")
    remaining = total
    open_keys = [k for k in keys if sizes[k] > 0]
    while remaining > 0 and open_keys:
        share = remaining // len(open_keys)
        if share == 0:
            for k in open_keys[:remaining]:
                alloc[k] += 1
            break
        for k in open_keys:
            add = min(share, sizes[k] - alloc[k])
            alloc[k] += add
            remaining -= add
        open_keys = [k for k in open_keys if alloc[k] < sizes[k]]
    return alloc


def describe_allocation(sizes: dict[str, int], alloc: dict[str, int], allocation: str = "equal") -> str:
    """One sentence on what was drawn from the strata and why, for the page
    and the API (issue 23: an "equal" sample that cannot be equal says so)."""
    drawn = sum(alloc.values())
    if allocation == "proportional":
        return f"{drawn:,} traces drawn in proportion to the sizes of {len(sizes)} strata."
    counts = sorted(set(alloc.values()))
    if len(counts) <= 1 or counts[-1] - counts[0] <= 1:
        each = counts[0] if counts else 0
        extra = " (a remainder of one each to the first strata in name order)" if len(counts) == 2 else ""
        return f"{drawn:,} traces drawn equally: {each:,} from each of {len(alloc)} strata{extra}."
    small = sorted(k for k in alloc if alloc[k] == sizes[k] and alloc[k] < counts[-1])
    return (f"{drawn:,} traces drawn; an equal share was not possible: {len(small)} of {len(alloc)} strata have "
            f"fewer traces than the others' share and gave all they have "
            f"({', '.join(f'{k}: {sizes[k]:,}' for k in small)}); the other strata gave up to {counts[-1]:,} each.")


def stratified_sample(frame: pd.DataFrame, size: int, seed: int = 0, allocation: str = "equal") -> pd.DataFrame:
    """Draw ``size`` traces from ``frame`` (trace_id, stratum).

    Strata are visited in name order; within each, the traces sorted by
    trace_id are drawn without replacement with one
    ``numpy.random.default_rng(seed)``, so the sample depends only on the
    seed and the set of traces. Returns trace_id, stratum, position: the
    queue order interleaves the strata (one trace of each in turn, each
    stratum in its drawn order).
    """
    rng = np.random.default_rng(seed)
    groups = {k: np.sort(g["trace_id"].to_numpy(dtype=np.int64)) for k, g in frame.groupby("stratum", sort=True)}
    alloc = allocate({k: len(v) for k, v in groups.items()}, size, allocation)
    drawn = {k: groups[k][rng.choice(len(groups[k]), size=alloc[k], replace=False)] for k in sorted(groups)}
    rows = []
    depth = max((len(v) for v in drawn.values()), default=0)
    for i in range(depth):
        for k in sorted(drawn):
            if i < len(drawn[k]):
                rows.append((int(drawn[k][i]), k))
    return pd.DataFrame({"trace_id": [r[0] for r in rows], "stratum": [r[1] for r in rows],
                         "position": np.arange(1, len(rows) + 1, dtype=np.int64)})
