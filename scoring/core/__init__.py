"""Pure scoring core of ReasonAudit (no Django, no ORM, no I/O).

Everything here implements ``/work/shared/spec/scoring.md`` (v1) and is
documented for users in ``docs/scoring.md``.

Modules
-------
profile    scoring profiles (parameters), ablations, validation
labels     verdict constants, human consensus, ``final`` label source, completeness
hazard     discrete Nelson-Aalen / Kaplan-Meier hazard profile and H(t) lookup
scores     vectorised per-trace scores
aggregate  bootstrap intervals, leaderboard, first-error histogram
agreement  agreement between label sources / annotators, calibration, omega tuning
"""

from .aggregate import bootstrap_ci, first_error_histogram, leaderboard, to_records
from .agreement import (
    agreement_by_position,
    agreement_metrics,
    annotator_agreement,
    calibration,
    cohen_kappa,
    correlation,
    disagreements,
    first_error_agreement,
    mean_ratings,
    paired_steps,
    paired_traces,
    processbench_f1,
    rating_correlation,
    score_correlation,
    step_agreement,
    tune_omega,
)
from .hazard import HazardLookup, hazard_from_scores, hazard_lookup, hazard_profile, pinned_hazard_table
from .labels import (
    INVALID,
    NEUTRAL,
    VALID,
    VERDICTS,
    complete_traces,
    final_labels,
    human_consensus,
    normalize_verdict,
)
from .profile import ABLATIONS, DEFAULT, Profile, ablation
from .scores import SCORE_COLUMNS, estimate_hazard, format_penalty, hazard_penalty, score_traces

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
