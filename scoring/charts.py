"""Plotly figure specifications as plain dicts (data + layout).

The pages put each one in ``json_script`` and ``static/js/charts.js`` draws
it with the plotly bundle served from our own static files; every chart has
its table next to it, so nothing is only in a picture.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reasonlib.intervals import wilson

COLORS = ["#3b5bdb", "#e8590c", "#2f9e44", "#ae3ec9", "#1098ad", "#f08c00", "#c2255c", "#5c940d", "#495057"]


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 14}},
        "height": 340,
        "margin": {"l": 55, "r": 20, "t": 45, "b": 80},
        "paper_bgcolor": "#fff",
        "plot_bgcolor": "#fff",
        "legend": {"orientation": "h", "y": -0.3},
        "font": {"family": "system-ui, sans-serif", "size": 12},
    }
    layout.update(extra)
    return layout


def palette(models: list[str]) -> dict[str, str]:
    """One colour per model for every chart of a page (models in a fixed order)."""
    return {m: COLORS[i % len(COLORS)] for i, m in enumerate(models)}


def _color(colors: dict[str, str] | None, model: str, i: int) -> str:
    if colors and model in colors:
        return colors[model]
    return COLORS[i % len(COLORS)]


def _ci_error(rows, mean: str, ci: str) -> dict[str, Any]:
    plus, minus = [], []
    for r in rows:
        m, c = r.get(mean), r.get(ci)
        plus.append(c[1] - m if m is not None and c else None)
        minus.append(m - c[0] if m is not None and c else None)
    # Hidden when no row has an interval (fewer than two values each).
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus,
            "visible": any(v is not None for v in plus)}


def headline(rows: list[dict[str, Any]], group: str = "model") -> dict[str, Any]:
    """Answer accuracy next to the mean process score: the paper's contrast."""
    x = [str(r[group]) or "(none)" for r in rows]
    return {
        "data": [
            {"type": "bar", "name": "answer accuracy", "x": x, "y": [r["answer_accuracy"] for r in rows],
             "marker": {"color": COLORS[1]}, "xaxis": "x", "yaxis": "y"},
            {"type": "bar", "name": "process score (95% CI)", "x": x, "y": [r["process_mean"] for r in rows],
             "error_y": _ci_error(rows, "process_mean", "process_ci"), "marker": {"color": COLORS[0]},
             "xaxis": "x2", "yaxis": "y2"},
        ],
        "layout": _layout(
            "Answer accuracy vs process score",
            grid={"rows": 1, "columns": 2, "pattern": "independent"},
            yaxis={"title": {"text": "accuracy"}, "range": [0, 1]},
            yaxis2={"title": {"text": "process score (0–10)"}, "range": [0, 10]},
        ),
    }


def hazard_interval(rows: list[dict]) -> dict[str, Any]:
    """Plotly ``error_y`` of the hazard h(t) = d/n: the 95% Wilson interval of d events among n at risk, so a
    step with two traces at risk draws a bar across most of [0, 1] instead of a bare point (issue 31)."""
    plus, minus = [], []
    for r in rows:
        ci = wilson(int(r["events"] or 0), int(r["at_risk"] or 0)) if r["hazard"] is not None else None
        plus.append(ci[1] - r["hazard"] if ci else None)
        minus.append(r["hazard"] - ci[0] if ci else None)
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "thickness": 1, "width": 3,
            "visible": any(v is not None for v in plus)}


def hazard_curves(hazard: dict[str, list[dict]], column: str, title: str, y_title: str,
                  colors: dict[str, str] | None = None) -> dict[str, Any]:
    """One line per model; every point's hover gives its events and traces at risk, and the hazard's points
    carry their 95% Wilson interval (the survival curve is a product over steps: no per-step interval)."""
    data = []
    for i, (model, rows) in enumerate(hazard.items()):
        trace = {
            "type": "scatter", "mode": "lines+markers", "name": model, "line": {"shape": "hv" if column == "survival" else "linear", "color": _color(colors, model, i)},
            "x": [r["step"] for r in rows], "y": [r[column] for r in rows],
            "customdata": [[r["at_risk"], r["events"]] for r in rows],
            "hovertemplate": "step %{x}<br>" + y_title + " %{y:.3f}<br>%{customdata[1]} events of %{customdata[0]} "
                             "at risk<extra>%{fullData.name}</extra>",
        }
        if column == "hazard":
            trace["error_y"] = hazard_interval(rows)
        data.append(trace)
    yaxis = {"title": {"text": y_title}}
    if column == "survival":
        yaxis["range"] = [0, 1.02]
    title = title + " (bars: 95% Wilson interval of events / at risk)" if column == "hazard" else title
    return {"data": data, "layout": _layout(title, xaxis={"title": {"text": "step"}, "dtick": 1}, yaxis=yaxis)}


def relative_hazard_curves(hazard: dict[str, list[dict]], colors: dict[str, str] | None = None) -> dict[str, Any]:
    """Hazard per tenth of the trace (x: the bin's upper edge t*/N)."""
    data = []
    for i, (model, rows) in enumerate(hazard.items()):
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": model, "line": {"color": _color(colors, model, i)},
            "x": [r["hi"] for r in rows], "y": [r["hazard"] for r in rows], "error_y": hazard_interval(rows),
            "customdata": [[r["lo"], r["at_risk"], r["events"]] for r in rows],
            "hovertemplate": "t*/N in (%{customdata[0]:.1f}, %{x:.1f}]<br>hazard %{y:.3f}<br>"
                             "%{customdata[2]} of %{customdata[1]} at risk<extra>%{fullData.name}</extra>",
        })
    return {"data": data, "layout": _layout("Hazard by relative position (bars: 95% Wilson interval)", xaxis={
        "title": {"text": "relative position of the first error t*/N"}, "range": [0, 1.02], "dtick": 0.1},
        yaxis={"title": {"text": "hazard"}})}


def recovery_bars(rows: list[dict[str, Any]], colors: dict[str, str] | None = None) -> dict[str, Any]:
    """Per model: share of thought errors recovered and share of correct answers resting on an unrecovered error."""
    data = [{
        "type": "bar", "name": r["model"], "x": ["errors recovered", "correct answers on an unrecovered error"],
        "y": [r["recovery_rate"], r["lucky_unrecovered_rate"]], "marker": {"color": _color(colors, r["model"], i)},
    } for i, r in enumerate(rows)]
    return {"data": data, "layout": _layout("Recovery in the thought", barmode="group",
                                            yaxis={"title": {"text": "share"}, "range": [0, 1.02]})}


def first_error_histogram(rows: list[dict[str, Any]], colors: dict[str, str] | None = None) -> dict[str, Any]:
    by_model: dict[str, tuple[list, list]] = {}
    for r in rows:
        xs, ys = by_model.setdefault(str(r["model"]), ([], []))
        xs.append("none" if r["first_error"] is None else str(r["first_error"]))
        ys.append(r["fraction"])
    data = [{"type": "bar", "name": m, "x": xs, "y": ys, "marker": {"color": _color(colors, m, i)}}
            for i, (m, (xs, ys)) in enumerate(by_model.items())]
    return {"data": data, "layout": _layout("First error position", barmode="group",
                                            xaxis={"title": {"text": "first invalid step"}, "type": "category"},
                                            yaxis={"title": {"text": "share of traces"}})}


def boxes(distributions: dict[str, dict], metric: str, title: str,
          colors: dict[str, str] | None = None) -> dict[str, Any]:
    data = []
    for i, (model, stats) in enumerate(distributions.items()):
        s = stats.get(metric)
        if not s:
            continue
        data.append({"type": "box", "name": model, "x": [model], "q1": [s["q1"]], "median": [s["median"]],
                     "q3": [s["q3"]], "lowerfence": [s["lowerfence"]], "upperfence": [s["upperfence"]],
                     "mean": [s["mean"]], "marker": {"color": _color(colors, model, i)}, "boxpoints": False})
    return {"data": data, "layout": _layout(title, showlegend=False, yaxis={"range": [0, 10.2], "title": {"text": "score (0–10)"}})}


def lucky_scatter(scatter: dict[str, Any], tau: float, colors: dict[str, str] | None = None) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    data = []
    for i, (model, pts) in enumerate(scatter["points"].items()):
        y = np.asarray(pts["answer_correct"], dtype=float)
        jitter = rng.uniform(-0.18, 0.18, len(y))
        data.append({"type": "scatter", "mode": "markers", "name": model, "x": pts["process"],
                     "y": np.round(y + jitter, 3).tolist(), "marker": {"size": 6, "opacity": 0.6, "color": _color(colors, model, i)}})
    layout = _layout(
        "Answer correct vs process score",
        xaxis={"title": {"text": "process score"}, "range": [-0.2, 10.2]},
        yaxis={"tickvals": [0, 1], "ticktext": ["wrong", "correct"], "range": [-0.5, 1.5]},
        shapes=[{"type": "rect", "x0": -0.2, "x1": tau, "y0": 0.5, "y1": 1.5, "fillcolor": "rgba(224,49,49,0.12)",
                 "line": {"width": 0}, "layer": "below"}],
        annotations=[{"x": tau / 2, "y": 1.42, "text": f"lucky guesses (process ≤ {tau:g})", "showarrow": False,
                      "font": {"color": "#c92a2a"}}],
    )
    return {"data": data, "layout": layout}


def ablation_bars(models: list[str], columns: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean process score per model, one bar group per profile."""
    data = []
    for i, col in enumerate(columns):
        rows = [col["rows"].get(m, {}) for m in models]
        data.append({"type": "bar", "name": col["name"], "x": models, "y": [r.get("process_mean") for r in rows],
                     "error_y": _ci_error(rows, "process_mean", "process_ci"), "marker": {"color": COLORS[i % len(COLORS)]}})
    return {"data": data, "layout": _layout("Process score under each profile", barmode="group",
                                            yaxis={"range": [0, 10], "title": {"text": "process score (95% CI)"}})}
