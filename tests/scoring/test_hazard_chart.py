"""The hazard charts draw how sure each point is (issue 31: "hazard estimates from 2 traces at risk drawn without an
interval or at-risk counts"): every hazard point carries the 95% Wilson interval of its events among the traces at
risk, and its hover both counts. Hand-computed: d = 1 of n = 2 gives centre 0.5 and half-width
1.96·sqrt(0.25/2 + 1.96²/16) / (1 + 1.96²/2) = 0.40547; d = 10 of n = 100 gives [0.05523, 0.17437]."""

from __future__ import annotations

import pytest

from reasonlib.intervals import wilson
from scoring import charts

ROWS = [
    {"step": 1, "at_risk": 100, "events": 10, "hazard": 0.1, "cum_hazard": 0.1, "survival": 0.9},
    {"step": 2, "at_risk": 2, "events": 1, "hazard": 0.5, "cum_hazard": 0.6, "survival": 0.45},
    {"step": 3, "at_risk": 0, "events": 0, "hazard": 0.0, "cum_hazard": 0.6, "survival": 0.45},
]


def test_wilson_by_hand():
    lo, hi = wilson(1, 2)
    assert (lo, hi) == (pytest.approx(0.5 - 0.40547, abs=1e-5), pytest.approx(0.5 + 0.40547, abs=1e-5))
    assert wilson(10, 100) == (pytest.approx(0.05523, abs=1e-5), pytest.approx(0.17437, abs=1e-5))
    assert wilson(0, 0) is None


def test_the_hazard_chart_has_intervals_and_counts_the_survival_chart_counts_only():
    fig = charts.hazard_curves({"m": ROWS}, "hazard", "Hazard", "hazard h(t)")
    (line,) = fig["data"]
    bars = line["error_y"]
    assert bars["visible"] is True
    assert bars["array"][0] == pytest.approx(0.17437 - 0.1, abs=1e-5)
    assert bars["arrayminus"][0] == pytest.approx(0.1 - 0.05523, abs=1e-5)
    assert bars["array"][1] == pytest.approx(0.40547, abs=1e-5) == bars["arrayminus"][1]
    assert bars["array"][2] is None  # nobody at risk: no interval
    assert line["customdata"][1] == [2, 1] and "events of" in line["hovertemplate"]
    assert "Wilson" in fig["layout"]["title"]["text"]
    survival = charts.hazard_curves({"m": ROWS}, "survival", "Survival", "S(t)")["data"][0]
    assert "error_y" not in survival and survival["customdata"][0] == [100, 10]


def test_the_relative_hazard_chart_has_intervals():
    rows = [{"lo": 0.0, "hi": 0.1, **r} for r in ROWS[:2]]
    (line,) = charts.relative_hazard_curves({"m": rows})["data"]
    assert line["error_y"]["array"][1] == pytest.approx(0.40547, abs=1e-5)
