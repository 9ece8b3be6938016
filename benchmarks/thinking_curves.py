"""Plot the early-answering and thinking-budget curves of the README's walk-through (two fake reasoning
models, one that follows its thought and one that ignores it) from the exported tables.

    python manage.py export --study Thinking --what early-answering --format csv --out docs/thinking/early_answering.csv
    python manage.py export --study Thinking --what anytime-curve --format csv --out docs/thinking/thinking_budgets.csv
    python benchmarks/thinking_curves.py docs/thinking        # writes docs/thinking/curves.png

The same-answer curve is recomputed from the forced answers with faithfulness.core.early (the pure
formulas), so the figure checks the export as well as drawing it.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from faithfulness.core import early  # noqa: E402


def early_curves(path: Path) -> dict[str, list[early.Curve]]:
    rows: dict[tuple[str, str], list[dict]] = defaultdict(list)
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            rows[(r["model"], r["trace_id"])].append(r)
    out: dict[str, list[early.Curve]] = defaultdict(list)
    for (model, _trace), rs in sorted(rows.items()):
        n = int(rs[0]["steps"])
        points = [(int(r["k"]), r["forced_answer"] or None) for r in rs]
        out[model].append(early.curve(n, points, rs[0]["final_answer"] or None))
    return out


def budget_curves(path: Path) -> dict[str, tuple[list[str], list[float], float]]:
    out: dict[str, tuple[list[str], list[float], float]] = {}
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            if not r["grid"].startswith("thinking:"):
                continue
            labels, accs, _ = out.get(r["model"], ([], [], 0.0))
            out[r["model"]] = ([*labels, r["budget"]], [*accs, float(r["acc"])], float(r["auc_any"]))
    return out


def main(folder: str) -> None:
    d = Path(folder)
    curves = early_curves(d / "early_answering.csv")
    budgets = budget_curves(d / "thinking_budgets.csv")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for model, cs in sorted(curves.items()):
        pts = early.mean_curve(cs, bins=20)
        s = early.summarize(cs)
        left.step([x for x, _, _ in pts], [y for _, y, _ in pts], where="post", marker="o", markersize=3,
                  label=f"{model}: AOC {s.aoc:.3f}, decision at {s.decision_fraction:.0%} of the thought")
        print(f"{model}: traces {s.traces}, AOC {s.aoc:.3f}, decision fraction {s.decision_fraction:.3f}, "
              f"after share {s.after_share:.3f}")
    left.set(title="Early answering: thought cut after k of T steps", xlabel="share of the thought kept (k / T)",
             ylabel="forced answer = final answer", ylim=(-0.03, 1.03))
    left.legend(loc="lower right", fontsize=8)
    for model, (labels, accs, auc) in sorted(budgets.items()):
        right.plot(labels, accs, marker="o", label=f"{model}: AUC_any {auc:.3f}")
        print(f"{model}: Acc(b) {dict(zip(labels, accs, strict=True))}, AUC_any {auc:.3f}")
    right.set(title="Thinking budgets (s1 budget forcing)", xlabel="thinking budget b (tokens)",
              ylabel="Acc(b)", ylim=(-0.03, 1.03))
    right.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(d / "curves.png", dpi=110)
    print(f"wrote {d / 'curves.png'}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/thinking")
