"""ProcessBench's published results on its GSM8K split, for comparison with a
study's own judges on the calibration page (issue 23).

Source: Zheng et al., "ProcessBench: Identifying Process Errors in
Mathematical Reasoning" (arXiv:2412.06559), Table 5 (GSM8K error / correct
accuracy and F1), as listed in ../shared/data/processbench/README.md.
Accuracies and F1 are percentages as published. Open critics are majority
votes over 8 samples; GPT-4o greedy; o1-mini one sample. The metric is
``agreement.core.first_error``: the prediction is the earliest erroneous
step or none, error accuracy over the 207 items with an error, correct
accuracy over the 193 without, F1 their harmonic mean.
"""

from __future__ import annotations

from dataclasses import dataclass

SPLIT = "gsm8k"
SPLIT_SIZES = {"error": 207, "correct": 193}
SOURCE = "ProcessBench (Zheng et al., arXiv:2412.06559), Table 5, GSM8K split"


@dataclass(frozen=True)
class Published:
    model: str
    group: str
    error_acc: float  # percent
    correct_acc: float  # percent
    f1: float  # percent


PUBLISHED: tuple[Published, ...] = (
    Published("Math-Shepherd-PRM-7B", "PRM", 32.4, 91.7, 47.9),
    Published("RLHFlow-PRM-Mistral-8B", "PRM", 33.8, 99.0, 50.4),
    Published("RLHFlow-PRM-Deepseek-8B", "PRM", 24.2, 98.4, 38.8),
    Published("Skywork-PRM-1.5B", "PRM", 50.2, 71.5, 59.0),
    Published("Skywork-PRM-7B", "PRM", 61.8, 82.9, 70.8),
    Published("Qwen2.5-Math-7B-PRM800K", "PRM", 53.1, 95.3, 68.2),
    Published("Meta-Llama-3-8B-Instruct", "critic, open (maj@8)", 42.5, 7.8, 13.1),
    Published("Meta-Llama-3-70B-Instruct", "critic, open (maj@8)", 35.7, 96.9, 52.2),
    Published("Llama-3.1-8B-Instruct", "critic, open (maj@8)", 44.4, 6.2, 10.9),
    Published("Llama-3.1-70B-Instruct", "critic, open (maj@8)", 64.3, 89.6, 74.9),
    Published("Llama-3.3-70B-Instruct", "critic, open (maj@8)", 72.5, 96.9, 82.9),
    Published("Qwen2.5-Math-7B-Instruct", "critic, open (maj@8)", 15.5, 100.0, 26.8),
    Published("Qwen2.5-Math-72B-Instruct", "critic, open (maj@8)", 49.8, 96.9, 65.8),
    Published("Qwen2.5-Coder-7B-Instruct", "critic, open (maj@8)", 7.7, 100.0, 14.3),
    Published("Qwen2.5-Coder-14B-Instruct", "critic, open (maj@8)", 33.8, 96.4, 50.1),
    Published("Qwen2.5-Coder-32B-Instruct", "critic, open (maj@8)", 54.1, 94.8, 68.9),
    Published("Qwen2-7B-Instruct", "critic, open (maj@8)", 40.6, 4.7, 8.4),
    Published("Qwen2-72B-Instruct", "critic, open (maj@8)", 57.0, 82.9, 67.6),
    Published("Qwen2.5-7B-Instruct", "critic, open (maj@8)", 40.6, 33.2, 36.5),
    Published("Qwen2.5-14B-Instruct", "critic, open (maj@8)", 54.6, 94.8, 69.3),
    Published("Qwen2.5-32B-Instruct", "critic, open (maj@8)", 49.3, 97.9, 65.6),
    Published("Qwen2.5-72B-Instruct", "critic, open (maj@8)", 62.8, 96.9, 76.2),
    Published("QwQ-32B-Preview", "critic, open (maj@8)", 81.6, 95.3, 88.0),
    Published("GPT-4o-0806", "critic, proprietary", 70.0, 91.2, 79.2),
    Published("o1-mini", "critic, proprietary", 88.9, 97.9, 93.2),
)


def comparison(candidates: list[tuple[str, dict | None]]) -> list[dict]:
    """Rows for one table: the study's candidates (their ``pb_error_acc``,
    ``pb_correct_acc``, ``pb_f1`` as percentages, and how many traces) first,
    then the published models by F1, highest first."""
    rows = []
    for name, m in candidates:
        if m is None:
            continue
        pct = {k: (None if m.get(k) is None else 100.0 * m[k]) for k in ("pb_error_acc", "pb_correct_acc", "pb_f1")}
        rows.append({"model": name, "group": "this study", "error_acc": pct["pb_error_acc"],
                     "correct_acc": pct["pb_correct_acc"], "f1": pct["pb_f1"], "ours": True,
                     "n_error": m.get("pb_error_traces"), "n_correct": m.get("pb_correct_traces")})
    for p in sorted(PUBLISHED, key=lambda p: -p.f1):
        rows.append({"model": p.model, "group": p.group, "error_acc": p.error_acc, "correct_acc": p.correct_acc,
                     "f1": p.f1, "ours": False, "n_error": SPLIT_SIZES["error"], "n_correct": SPLIT_SIZES["correct"]})
    return rows
