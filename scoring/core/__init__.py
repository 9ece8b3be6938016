"""Pure scoring core of ReasonAudit (no Django, no ORM, no I/O).

Everything here implements the formulas of ``docs/scoring.md`` (v1), which
also documents them for users.

Modules (import the one you use: ``from scoring.core import scores`` or
``from scoring.core.scores import score_traces``; this package re-exports
nothing, so importing it stays free of pandas and SciPy)
-------
profile    scoring profiles (parameters), ablations, validation
labels     verdict constants, human consensus, ``final`` label source, completeness
hazard     discrete Nelson-Aalen / Kaplan-Meier hazard profile and H(t) lookup
scores     vectorised per-trace scores
bootstrap  the one percentile bootstrap (also used by ``agreement.core``)
aggregate  leaderboard, first-error histogram, JSON-ready records

Agreement between label sources lives in the ``agreement`` app's own core
(``agreement.core``).
"""
