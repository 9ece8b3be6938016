"""Plotly figures of the agreement pages, as plain dicts (see scoring/charts.py:
``json_script`` + static/js/charts.js; every chart has its table on the page)."""

from __future__ import annotations

from typing import Any

from scoring.charts import COLORS, _layout


def position_lines(series: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Agreement rate by step position, one line per candidate."""
    data = []
    for i, (name, rows) in enumerate(series.items()):
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": name, "line": {"color": COLORS[i % len(COLORS)]},
            "x": [r["step"] for r in rows], "y": [r["agreement"] for r in rows],
            "customdata": [[r["steps"], r["reference_invalid"], r["candidate_invalid"]] for r in rows],
            "hovertemplate": "step %{x}<br>agreement %{y:.3f}<br>%{customdata[0]} steps compared<br>"
                             "invalid: reference %{customdata[1]}, candidate %{customdata[2]}"
                             "<extra>%{fullData.name}</extra>",
        })
    return {"data": data, "layout": _layout("Where in the chain do they disagree?",
                                            xaxis={"title": {"text": "step"}, "dtick": 1},
                                            yaxis={"title": {"text": "agreement"}, "range": [0, 1.02]})}


def reliability(series: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Reliability diagram: accuracy against mean confidence per bin, one line per candidate."""
    data: list[dict[str, Any]] = []
    for i, (name, bins) in enumerate(series.items()):
        shown = [b for b in bins if b["count"]]
        if not shown:
            continue
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": name, "line": {"color": COLORS[i % len(COLORS)]},
            "x": [b["mean_confidence"] for b in shown], "y": [b["accuracy"] for b in shown],
            "customdata": [b["count"] for b in shown],
            "hovertemplate": "confidence %{x:.2f}<br>accuracy %{y:.2f}<br>%{customdata} steps"
                             "<extra>%{fullData.name}</extra>",
        })
    if data:
        data.insert(0, {"type": "scatter", "mode": "lines", "name": "perfect calibration", "x": [0, 1], "y": [0, 1],
                        "line": {"dash": "dot", "color": "#868e96"}, "hoverinfo": "skip"})
    return {"data": data, "layout": _layout("Reliability: is a 90% confident verdict right 90% of the time?",
                                            xaxis={"title": {"text": "mean confidence in the bin"}, "range": [0, 1]},
                                            yaxis={"title": {"text": "share of verdicts equal to the reference"},
                                                   "range": [0, 1.02]})}


def kappa_heatmap(pairwise: dict[str, Any]) -> dict[str, Any]:
    names = pairwise.get("annotators", [])
    if len(names) < 2:
        return {"data": [], "layout": _layout("Pairwise Cohen's kappa")}
    z = pairwise["kappa"]
    text = [[("–" if v is None else f"{v:.2f}") + f"<br>{pairwise['steps'][i][j]} steps" for j, v in enumerate(row)]
            for i, row in enumerate(z)]
    return {"data": [{"type": "heatmap", "x": names, "y": names, "z": z, "text": text, "texttemplate": "%{text}",
                      "hoverinfo": "text", "zmin": -1, "zmax": 1, "colorscale": "RdBu",
                      "colorbar": {"title": {"text": "κ"}}}],
            "layout": _layout("Pairwise Cohen's kappa", height=max(300, 60 * len(names) + 120),
                              yaxis={"autorange": "reversed"})}


def annotator_bars(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each annotator's kappa against the adjudicated / leave-one-out reference, with its interval."""
    names = [r["annotator"] for r in rows]
    y = [r["kappa"] for r in rows]
    plus = [r["kappa_ci"][1] - r["kappa"] if r["kappa"] is not None and r["kappa_ci"] else None for r in rows]
    minus = [r["kappa"] - r["kappa_ci"][0] if r["kappa"] is not None and r["kappa_ci"] else None for r in rows]
    data = [{"type": "bar", "name": "Cohen's κ (95% CI)", "x": names, "y": y, "marker": {"color": COLORS[0]},
             "error_y": {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus,
                         "visible": any(v is not None for v in plus)}}] if names else []
    return {"data": data, "layout": _layout("Each annotator against the others", showlegend=False,
                                            yaxis={"title": {"text": "Cohen's κ"}, "range": [-1, 1]})}


def tuning_curve(result: dict[str, Any]) -> dict[str, Any]:
    """Validation Pearson r over the omega grid (one line per w)."""
    by_w: dict[float, tuple[list, list]] = {}
    for g in result.get("grid", []):
        xs, ys = by_w.setdefault(g["w"], ([], []))
        xs.append(g["omega"])
        ys.append(g["validation_r"])
    several = len(by_w) > 1
    data = [{"type": "scatter", "mode": "lines+markers", "name": f"w = {w:g}" if several else "validation r",
             "x": xs, "y": ys, "line": {"color": COLORS[i % len(COLORS)]}}
            for i, (w, (xs, ys)) in enumerate(sorted(by_w.items()))]
    best = result.get("best")
    shapes = []
    if best:
        shapes.append({"type": "line", "x0": best["omega"], "x1": best["omega"], "y0": 0, "y1": 1, "yref": "paper",
                       "line": {"dash": "dot", "color": "#c92a2a"}})
    return {"data": data, "layout": _layout("Validation Pearson r over omega", shapes=shapes,
                                            xaxis={"title": {"text": "omega (hazard penalty weight)"}},
                                            yaxis={"title": {"text": "Pearson r"}})}
