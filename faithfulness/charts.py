"""Plotly figure specifications (plain dicts, drawn by static/js/charts.js like
the scoring pages'): Acc(b) per model and steps used against difficulty. Each
has its table on the page and an export behind it."""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean
from typing import Any

from scoring.charts import COLORS, _layout


def anytime(curves: list[dict[str, Any]]) -> dict[str, Any]:
    data = []
    for i, c in enumerate(curves):
        data.append({"type": "scatter", "mode": "lines+markers", "name": f"{c['model']} ({c['grid']}, AUC "
                     f"{c['auc']:.3f})" if c["auc"] is not None else f"{c['model']} ({c['grid']})",
                     "x": c["labels"], "y": c["acc"], "line": {"color": COLORS[i % len(COLORS)]}})
    unit = curves[0]["unit"] if curves else ""
    return {"data": data, "layout": _layout(f"Anytime profile: accuracy under a budget of {unit or 'b'}, Acc(b)",
                                            xaxis={"title": {"text": f"budget b ({unit})"}, "type": "category"},
                                            yaxis={"title": {"text": "Acc(b)"}, "range": [0, 1]})}


def difficulty_table(scatter: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Mean steps used per (model, difficulty) -- the table behind the scatter."""
    out = []
    for model, rows in scatter.items():
        by: dict[int, list[int]] = defaultdict(list)
        for r in rows:
            by[r["difficulty"]].append(r["steps"])
        for d in sorted(by):
            out.append({"model": model, "difficulty": d, "traces": len(by[d]), "mean_steps": fmean(by[d])})
    return out


def steps_vs_difficulty(scatter: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    data = []
    for i, (model, rows) in enumerate(scatter.items()):
        by: dict[int, list[int]] = defaultdict(list)
        for r in rows:
            by[r["difficulty"]].append(r["steps"])
        xs = sorted(by)
        data.append({"type": "scatter", "mode": "lines+markers", "name": model, "x": xs,
                     "y": [fmean(by[x]) for x in xs], "line": {"color": COLORS[i % len(COLORS)]}})
    return {"data": data, "layout": _layout("Steps used against difficulty (mean per skeleton length)",
                                            xaxis={"title": {"text": "skeleton length L_gold (0 = no skeleton)"}},
                                            yaxis={"title": {"text": "steps in the trace"}})}
