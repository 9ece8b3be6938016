"""Plotly figures of the abstraction pages as plain dicts (scoring/charts.py's conventions: json_script +
static/js/charts.js; each chart has its table on the page)."""

from __future__ import annotations

from typing import Any

from abstraction.core.generators import CATEGORIES
from scoring.charts import COLORS, _layout


def quadrant(points: list[dict[str, Any]], gamma: float, delta: float) -> dict[str, Any]:
    """Γ (AVG) against Δ_ALL, one marker per model; the Thm 3.8 thresholds as lines: right of γ and below δ
    (|Δ| ≤ δ) is "rule-inductive abstraction", right of γ above δ "rule-given" only."""
    data: list[dict[str, Any]] = []
    for i, group in enumerate(("this study", "paper (Table 3)")):
        shown = [p for p in points if p["group"] == group and p["gamma"] is not None and p["delta"] is not None]
        if not shown:
            continue
        data.append({
            "type": "scatter", "mode": "markers+text" if group == "this study" else "markers", "name": group,
            "x": [p["gamma"] for p in shown], "y": [p["delta"] for p in shown],
            "text": [p["model"] for p in shown], "textposition": "top center",
            "marker": {"size": 11 if group == "this study" else 7, "color": COLORS[i % len(COLORS)],
                       "symbol": "circle" if group == "this study" else "diamond-open"},
            "error_x": _errors(shown, "gamma_ci", "gamma"), "error_y": _errors(shown, "delta_ci", "delta"),
            "hovertemplate": "%{text}<br>Γ (AVG) %{x:.3f}<br>Δ_ALL %{y:.3f}<extra>%{fullData.name}</extra>",
        })
    shapes = [
        {"type": "line", "xref": "x", "yref": "paper", "x0": gamma, "x1": gamma, "y0": 0, "y1": 1,
         "line": {"dash": "dash", "color": "#495057"}},
        {"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": delta, "y1": delta,
         "line": {"dash": "dash", "color": "#495057"}},
    ]
    layout = _layout(f"Γ–Δ quadrants (Thm 3.8: γ = {gamma:g}, δ = {delta:g})",
                     xaxis={"title": {"text": "Γ (AVG over sub-datasets)"}, "range": [-0.02, 1.02]},
                     yaxis={"title": {"text": "Δ_ALL (signed)"}, "range": [-0.3, 1.02]})
    layout["shapes"] = shapes
    layout["annotations"] = [
        {"x": 0.99, "y": min(delta, 1) - 0.04, "xref": "x", "yref": "y", "showarrow": False, "xanchor": "right",
         "text": "rule-inductive abstraction (Γ ≥ γ, Δ ≤ δ)"},
        {"x": 0.99, "y": 0.98, "xref": "x", "yref": "y", "showarrow": False, "xanchor": "right",
         "text": "rule-given only (Γ ≥ γ, Δ > δ)"},
    ]
    return {"data": data, "layout": layout}


def _errors(points: list[dict[str, Any]], ci: str, key: str) -> dict[str, Any]:
    if not any(p.get(ci) for p in points):
        return {"visible": False}
    return {"type": "data", "symmetric": False,
            "array": [(p[ci][1] - p[key]) if p.get(ci) else 0 for p in points],
            "arrayminus": [(p[key] - p[ci][0]) if p.get(ci) else 0 for p in points]}


def category_bars(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Γ per category, one group of bars per category, one bar per model."""
    data = []
    for i, row in enumerate(rows):
        cats = [c for c in CATEGORIES if row.get(c) is not None]
        data.append({"type": "bar", "name": row["model"], "x": cats, "y": [row[c] for c in cats],
                     "marker": {"color": COLORS[i % len(COLORS)]},
                     "hovertemplate": "%{x}: Γ %{y:.3f}<extra>%{fullData.name}</extra>"})
    return {"data": data, "layout": _layout("Γ per task category", barmode="group",
                                            yaxis={"title": {"text": "Γ"}, "range": [0, 1.02]})}
