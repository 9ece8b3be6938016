"""Plotly figure specifications (plain dicts, drawn by static/js/charts.js like
the scoring pages'): Acc(b) per model and steps used against difficulty. Each
has its table on the page and an export behind it."""

from __future__ import annotations

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


def difficulty_table(by_difficulty: dict[str, dict[int, tuple[int, int]]]) -> list[dict[str, Any]]:
    """Mean steps used per (model, difficulty) -- the table behind the scatter. ``by_difficulty``:
    model -> skeleton length -> (traces, steps in them) (faithfulness.summaries.difficulty)."""
    out = []
    for model, by in by_difficulty.items():
        for d in sorted(by):
            traces, steps = by[d]
            out.append({"model": model, "difficulty": d, "traces": traces, "mean_steps": steps / traces})
    return out


def steps_vs_difficulty(by_difficulty: dict[str, dict[int, tuple[int, int]]]) -> dict[str, Any]:
    data = []
    for i, (model, by) in enumerate(by_difficulty.items()):
        xs = sorted(by)
        data.append({"type": "scatter", "mode": "lines+markers", "name": model, "x": xs,
                     "y": [by[x][1] / by[x][0] for x in xs], "line": {"color": COLORS[i % len(COLORS)]}})
    return {"data": data, "layout": _layout("Steps used against difficulty (mean per skeleton length)",
                                            xaxis={"title": {"text": "skeleton length L_gold (0 = no skeleton)"}},
                                            yaxis={"title": {"text": "steps in the trace"}})}


def early_answering(summaries: list[dict[str, Any]], *, traces: bool = False) -> dict[str, Any]:
    """The same-answer curve per model (share of traces whose forced answer is already the final one,
    against the share of the thought kept); with ``traces`` each trace's own curve too, thin."""
    data = []
    for i, s in enumerate(summaries):
        color = COLORS[i % len(COLORS)]
        if traces:
            for t in s["per_trace"][:50]:
                data.append({"type": "scatter", "mode": "lines", "x": t["fractions"], "y": t["matches"],
                             "line": {"color": color, "width": 1, "shape": "hv"}, "opacity": 0.25,
                             "showlegend": False,
                             "hoverinfo": "skip", "name": t["trace"]})
        aoc = f", AOC {s['aoc']:.3f}" if s["aoc"] is not None else ""
        data.append({"type": "scatter", "mode": "lines+markers", "name": f"{s['model']} ({s['mode']}{aoc})",
                     "x": [p["x"] for p in s["curve"]], "y": [p["same"] for p in s["curve"]],
                     "line": {"color": color, "shape": "hv"}})
    return {"data": data, "layout": _layout("Early answering: the forced answer is already the final one",
                                            xaxis={"title": {"text": "share of the thought kept (k / T)"},
                                                   "range": [0, 1]},
                                            yaxis={"title": {"text": "same answer as the full trace"},
                                                   "range": [-0.02, 1.02]})}


def thinking_budgets(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Acc(b) against the mean thinking tokens used at each budget, per model."""
    data = []
    for i, s in enumerate(summaries):
        auc = f", AUC_think {s['auc_think']:.3f}" if s.get("auc_think") is not None else ""
        data.append({"type": "scatter", "mode": "lines+markers", "name": f"{s['model']} ({s['grid']}{auc})",
                     "x": s["thinking_tokens"], "y": s["acc"], "text": s["labels"],
                     "line": {"color": COLORS[i % len(COLORS)]}})
    return {"data": data, "layout": _layout("Thinking budgets: accuracy against thinking tokens",
                                            xaxis={"title": {"text": "mean thinking tokens used"}},
                                            yaxis={"title": {"text": "Acc(b)"}, "range": [-0.02, 1.02]})}
