"""Pure scoring core of ReasonAudit (no Django, no ORM, no I/O).

Everything here implements the formulas of ``docs/scoring.md`` (v1), which
also documents them for users.

Modules
-------
profile    scoring profiles (parameters), ablations, validation
labels     verdict constants, human consensus, ``final`` label source, completeness
hazard     discrete Nelson-Aalen / Kaplan-Meier hazard profile and H(t) lookup
scores     vectorised per-trace scores
aggregate  bootstrap intervals, leaderboard, first-error histogram
agreement  agreement between label sources / annotators, calibration, omega tuning
"""

# Names resolve on first use (PEP 562): importing one submodule, e.g. for
# ``Profile`` in a model definition, must not pull pandas, SciPy and
# scikit-learn into every process's start-up.
import importlib
from typing import Any

_LAZY = {
    "bootstrap_ci": "aggregate",
    "first_error_histogram": "aggregate",
    "leaderboard": "aggregate",
    "to_records": "aggregate",
    "agreement_by_position": "agreement",
    "agreement_metrics": "agreement",
    "annotator_agreement": "agreement",
    "calibration": "agreement",
    "cohen_kappa": "agreement",
    "correlation": "agreement",
    "disagreements": "agreement",
    "first_error_agreement": "agreement",
    "mean_ratings": "agreement",
    "paired_steps": "agreement",
    "paired_traces": "agreement",
    "processbench_f1": "agreement",
    "rating_correlation": "agreement",
    "score_correlation": "agreement",
    "step_agreement": "agreement",
    "tune_omega": "agreement",
    "HazardLookup": "hazard",
    "hazard_from_scores": "hazard",
    "hazard_lookup": "hazard",
    "hazard_profile": "hazard",
    "pinned_hazard_table": "hazard",
    "INVALID": "labels",
    "NEUTRAL": "labels",
    "VALID": "labels",
    "VERDICTS": "labels",
    "complete_traces": "labels",
    "final_labels": "labels",
    "human_consensus": "labels",
    "normalize_verdict": "labels",
    "ABLATIONS": "profile",
    "DEFAULT": "profile",
    "Profile": "profile",
    "ablation": "profile",
    "SCORE_COLUMNS": "scores",
    "estimate_hazard": "scores",
    "format_penalty": "scores",
    "hazard_penalty": "scores",
    "score_traces": "scores",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "ABLATIONS",
    "DEFAULT",
    "INVALID",
    "NEUTRAL",
    "SCORE_COLUMNS",
    "VALID",
    "VERDICTS",
    "HazardLookup",
    "Profile",
    "ablation",
    "bootstrap_ci",
    "complete_traces",
    "estimate_hazard",
    "final_labels",
    "first_error_histogram",
    "format_penalty",
    "hazard_from_scores",
    "hazard_lookup",
    "hazard_penalty",
    "hazard_profile",
    "human_consensus",
    "leaderboard",
    "normalize_verdict",
    "pinned_hazard_table",
    "score_traces",
    "to_records",
    # agreement.py
    "agreement_by_position",
    "agreement_metrics",
    "annotator_agreement",
    "calibration",
    "cohen_kappa",
    "correlation",
    "disagreements",
    "first_error_agreement",
    "mean_ratings",
    "paired_steps",
    "paired_traces",
    "processbench_f1",
    "rating_correlation",
    "score_correlation",
    "step_agreement",
    "tune_omega",
]
