"""ProcessBench's published results, for comparison with a study's own judges
on the calibration page (issues 23 and 30), and its four splits.

Source: Zheng et al., "ProcessBench: Identifying Process Errors in
Mathematical Reasoning" (arXiv:2412.06559), the paper version in the
QwenLM/ProcessBench repository (``paper/process_bench.pdf`` at commit
``2f2fd8a``): Table 5 (GSM8K error / correct accuracy and F1) and Table 3 (F1
on MATH, OlympiadBench and Omni-MATH, and their "Average"), as listed in
../shared/data/processbench/README.md. Accuracies and F1 are percentages as
published. Open critics are majority votes over 8 samples; GPT-4o greedy;
o1-mini one sample. The metric is ``agreement.core.first_error``: the
prediction is the earliest erroneous step or none, error accuracy over the
items with an error, correct accuracy over those without, F1 their harmonic
mean. The paper's Average is the unweighted mean of the four split F1s (not
weighted by split size).

Pure: no Django, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from agreement.core.first_error import first_error_of_pairs

SPLIT = "gsm8k"
SPLIT_SIZES = {"error": 207, "correct": 193}
#: The four splits in the paper's order, with their names in the paper and their sizes (Table 2).
SPLITS = ("gsm8k", "math", "olympiadbench", "omnimath")
SPLIT_NAMES = {"gsm8k": "GSM8K", "math": "MATH", "olympiadbench": "OlympiadBench", "omnimath": "Omni-MATH"}
SIZES = {"gsm8k": (207, 193), "math": (594, 406), "olympiadbench": (661, 339), "omnimath": (759, 241)}
SOURCE = ("ProcessBench (Zheng et al., arXiv:2412.06559; paper/process_bench.pdf at QwenLM/ProcessBench "
          "2f2fd8a), Table 5 (GSM8K) and Table 3 (F1 of the other splits, Average)")

# ProcessBench's item ids ("math-12"), which the importer keeps as "processbench/math-12".
_ITEM_ID = re.compile(r"^(?:processbench/)?(gsm8k|math|olympiadbench|omnimath)-\d+$")


@dataclass(frozen=True)
class Published:
    model: str
    group: str
    error_acc: float  # percent, GSM8K
    correct_acc: float  # percent, GSM8K
    f1: float  # percent, GSM8K
    f1_math: float
    f1_olympiadbench: float
    f1_omnimath: float
    average: float  # the paper's Average: mean of the four split F1s as published


PUBLISHED: tuple[Published, ...] = (
    Published("Math-Shepherd-PRM-7B", "PRM", 32.4, 91.7, 47.9, 29.5, 24.8, 23.8, 31.5),
    Published("RLHFlow-PRM-Mistral-8B", "PRM", 33.8, 99.0, 50.4, 33.4, 13.8, 15.8, 28.4),
    Published("RLHFlow-PRM-Deepseek-8B", "PRM", 24.2, 98.4, 38.8, 33.8, 16.9, 16.9, 26.6),
    Published("Skywork-PRM-1.5B", "PRM", 50.2, 71.5, 59.0, 48.0, 19.3, 19.2, 36.4),
    Published("Skywork-PRM-7B", "PRM", 61.8, 82.9, 70.8, 53.6, 22.9, 21.0, 42.1),
    Published("Qwen2.5-Math-7B-PRM800K", "PRM", 53.1, 95.3, 68.2, 62.6, 50.7, 44.3, 56.5),
    Published("Meta-Llama-3-8B-Instruct", "critic, open (maj@8)", 42.5, 7.8, 13.1, 13.8, 4.8, 12.6, 11.1),
    Published("Meta-Llama-3-70B-Instruct", "critic, open (maj@8)", 35.7, 96.9, 52.2, 22.8, 21.2, 20.0, 29.1),
    Published("Llama-3.1-8B-Instruct", "critic, open (maj@8)", 44.4, 6.2, 10.9, 5.1, 2.8, 1.6, 5.1),
    Published("Llama-3.1-70B-Instruct", "critic, open (maj@8)", 64.3, 89.6, 74.9, 48.2, 46.7, 41.0, 52.7),
    Published("Llama-3.3-70B-Instruct", "critic, open (maj@8)", 72.5, 96.9, 82.9, 59.4, 46.7, 43.0, 58.0),
    Published("Qwen2.5-Math-7B-Instruct", "critic, open (maj@8)", 15.5, 100.0, 26.8, 25.7, 14.2, 12.7, 19.9),
    Published("Qwen2.5-Math-72B-Instruct", "critic, open (maj@8)", 49.8, 96.9, 65.8, 52.1, 32.5, 31.7, 45.5),
    Published("Qwen2.5-Coder-7B-Instruct", "critic, open (maj@8)", 7.7, 100.0, 14.3, 6.5, 4.1, 1.8, 6.7),
    Published("Qwen2.5-Coder-14B-Instruct", "critic, open (maj@8)", 33.8, 96.4, 50.1, 39.9, 34.0, 27.3, 37.8),
    Published("Qwen2.5-Coder-32B-Instruct", "critic, open (maj@8)", 54.1, 94.8, 68.9, 60.1, 48.9, 46.3, 56.1),
    Published("Qwen2-7B-Instruct", "critic, open (maj@8)", 40.6, 4.7, 8.4, 19.0, 14.7, 12.1, 13.6),
    Published("Qwen2-72B-Instruct", "critic, open (maj@8)", 57.0, 82.9, 67.6, 49.2, 42.1, 40.2, 49.8),
    Published("Qwen2.5-7B-Instruct", "critic, open (maj@8)", 40.6, 33.2, 36.5, 36.6, 29.7, 27.4, 32.6),
    Published("Qwen2.5-14B-Instruct", "critic, open (maj@8)", 54.6, 94.8, 69.3, 53.3, 45.0, 41.3, 52.2),
    Published("Qwen2.5-32B-Instruct", "critic, open (maj@8)", 49.3, 97.9, 65.6, 53.1, 40.0, 38.3, 49.3),
    Published("Qwen2.5-72B-Instruct", "critic, open (maj@8)", 62.8, 96.9, 76.2, 61.8, 54.6, 52.2, 61.2),
    Published("QwQ-32B-Preview", "critic, open (maj@8)", 81.6, 95.3, 88.0, 78.7, 57.8, 61.3, 71.5),
    Published("GPT-4o-0806", "critic, proprietary", 70.0, 91.2, 79.2, 63.6, 51.4, 53.5, 61.9),
    Published("o1-mini", "critic, proprietary", 88.9, 97.9, 93.2, 88.9, 87.2, 82.4, 87.9),
)


def split_of(trace_id: str) -> str | None:
    """The ProcessBench split of an imported trace ("processbench/math-12" -> "math"), or None."""
    m = _ITEM_ID.match(trace_id)
    return m.group(1) if m else None


def split_metrics(pairs: pd.DataFrame, splits: pd.DataFrame) -> dict[str, Any]:
    """First-error metrics per ProcessBench split, and the paper's Average.

    ``pairs``: :func:`agreement.core.metrics.first_error_pairs` output;
    ``splits``: trace_id, split of the traces that are ProcessBench items.
    Keys: ``pb_splits`` = {split: first-error metrics of its traces (the keys
    of :func:`first_error_of_pairs`)}, in the paper's order, for every split
    with a compared trace; with two or more, ``pb_average_f1``, the unweighted
    mean of their F1s (None, with a reason in ``undefined``, when one is
    undefined). Nothing when no compared trace is a ProcessBench item."""
    if splits.empty or pairs.empty:
        return {}
    by_trace = dict(zip(splits["trace_id"].tolist(), splits["split"].tolist(), strict=True))
    of = pairs["trace_id"].map(by_trace)
    per: dict[str, Any] = {}
    for name in SPLITS:
        sub = pairs.loc[(of == name).to_numpy()]
        if len(sub):
            per[name] = first_error_of_pairs(sub.reset_index(drop=True))
    if not per:
        return {}
    out: dict[str, Any] = {"pb_splits": per}
    if len(per) >= 2:
        f1s = {name: m["pb_f1"] for name, m in per.items()}
        missing = [SPLIT_NAMES[n] for n, v in f1s.items() if v is None]
        if missing:
            out["pb_average_f1"] = None
            out["undefined"] = {"pb_average_f1": "the F1 of " + ", ".join(missing) + " is undefined"}
        else:
            out["pb_average_f1"] = sum(f1s.values()) / len(f1s)
    return out


def comparison(candidates: list[tuple[str, dict | None]]) -> list[dict]:
    """Rows for one table: the study's candidates (their ``pb_error_acc``,
    ``pb_correct_acc``, ``pb_f1`` as percentages, and how many traces; with
    several splits, each split's F1 and the Average) first, then the published
    models by GSM8K F1, highest first, with their F1 on every split and Average."""
    def pct(v: float | None) -> float | None:
        return None if v is None else 100.0 * v

    rows = []
    for name, m in candidates:
        if m is None:
            continue
        per = m.get("pb_splits") or {}
        # With ProcessBench items, the GSM8K columns are the GSM8K split's (none
        # when the sample has none); other traces are compared as one pool.
        g = per.get("gsm8k", {}) if per else m
        rows.append({"model": name, "group": "this study", "error_acc": pct(g.get("pb_error_acc")),
                     "correct_acc": pct(g.get("pb_correct_acc")), "f1": pct(g.get("pb_f1")), "ours": True,
                     "n_error": g.get("pb_error_traces"), "n_correct": g.get("pb_correct_traces"),
                     "splits": [pct(per.get(s, {}).get("pb_f1")) for s in SPLITS[1:]],
                     "average": pct(m.get("pb_average_f1"))})
    for p in sorted(PUBLISHED, key=lambda p: -p.f1):
        rows.append({"model": p.model, "group": p.group, "error_acc": p.error_acc, "correct_acc": p.correct_acc,
                     "f1": p.f1, "ours": False, "n_error": SPLIT_SIZES["error"], "n_correct": SPLIT_SIZES["correct"],
                     "splits": [p.f1_math, p.f1_olympiadbench, p.f1_omnimath], "average": p.average})
    return rows
