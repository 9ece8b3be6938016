"""Plotly figures of the fidelity report as plain dicts (drawn by static/js/charts.js, each
with its table on the page)."""

from __future__ import annotations

from typing import Any

from fidelity.core.display import jitter

BLUE, ORANGE, RED = "#3b5bdb", "#e8590c", "#c2255c"


def faithfulness_plausibility(rep) -> dict[str, Any]:
    """F (1-5) against raw P (1-6) per original, jittered; the hallucination quadrant P >= 4, F <= 2 shaded."""
    items = [i for i in rep.items if i.metrics]
    ps = [i.metrics["plausibility"] for i in items]
    fs = [i.metrics["faithfulness"] for i in items]
    halluc = [bool(i.metrics["hallucination"]) for i in items]
    return {
        "data": [{
            "type": "scatter", "mode": "markers", "name": "items",
            "x": jitter(ps, 1), "y": jitter(fs, 2), "text": [i.problem.problem_id for i in items],
            "marker": {"color": [RED if h else BLUE for h in halluc], "size": 9, "opacity": 0.75},
            "hovertemplate": "%{text}<br>P %{x:.0f}, F %{y:.0f}<extra></extra>",
        }],
        "layout": {
            "title": {"text": "Faithfulness vs plausibility (shaded: hallucination, P ≥ 4 and F ≤ 2)", "font": {"size": 14}},
            "height": 360, "margin": {"l": 55, "r": 20, "t": 45, "b": 50},
            "xaxis": {"title": {"text": "plausibility P (raw, 1–6)"}, "range": [0.5, 6.5], "dtick": 1},
            "yaxis": {"title": {"text": "faithfulness F (1–5)"}, "range": [0.5, 5.5], "dtick": 1},
            "shapes": [{"type": "rect", "x0": 3.5, "x1": 6.5, "y0": 0.5, "y1": 2.5, "fillcolor": RED,
                        "opacity": 0.12, "line": {"width": 0}}],
            "paper_bgcolor": "#fff", "plot_bgcolor": "#fff",
        },
    }


def perturbations(rep) -> dict[str, Any]:
    rows = rep.perturbation
    return {
        "data": [{"type": "bar", "name": "robustness", "x": [r.strategy for r in rows],
                  "y": [r.robustness for r in rows], "marker": {"color": BLUE}},
                 {"type": "bar", "name": "semantic consistency", "x": [r.strategy for r in rows],
                  "y": [r.sem for r in rows], "marker": {"color": ORANGE}},
                 {"type": "bar", "name": "reasoning consistency", "x": [r.strategy for r in rows],
                  "y": [r.reason for r in rows], "marker": {"color": "#2f9e44"}}],
        "layout": {"title": {"text": "Perturbations, ranked by robustness", "font": {"size": 14}}, "height": 340,
                   "barmode": "group", "yaxis": {"range": [0, 1]}, "margin": {"l": 55, "r": 20, "t": 45, "b": 80},
                   "legend": {"orientation": "h", "y": -0.3}, "paper_bgcolor": "#fff", "plot_bgcolor": "#fff"},
    }
