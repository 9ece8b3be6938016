"""The score-based export kinds: scores, hazard, relative-hazard, recovery, leaderboard, lucky-guesses;
and ``traces`` (scoring.export_traces), the study in the canonical import format."""

from __future__ import annotations

from annotation.gate import SCORES_ONLY
from scoring import analytics, export_traces  # noqa: F401  (export_traces registers "traces")
from scoring.exports import ExportError, ExportRequest, Table, register


def _selection(request: ExportRequest) -> analytics.Selection:
    params = {"source": request.source or "", "profile": request.profile or "", "model": request.model,
              "domain": request.domain, "group": request.extra.get("group", "model")}
    try:
        return analytics.select(request.study, params, request.membership)
    except analytics.BadFilter as exc:
        raise ExportError(f"--{exc.field}: {exc.message}") from None


@register("scores", reads=SCORES_ONLY, help="one row per trace with stored scores (fields as docs/exports.md)")
def scores(request: ExportRequest) -> Table:
    sel = _selection(request)
    return Table(analytics.SCORE_EXPORT_FIELDS, analytics.read_export_frame(sel))


@register("lucky-guesses", reads=SCORES_ONLY, help="correct answers with process score <= tau")
def lucky_guesses(request: ExportRequest) -> Table:
    sel = _selection(request)
    return Table(analytics.SCORE_EXPORT_FIELDS, analytics.read_export_frame(sel, lucky_only=True))


@register("hazard", reads=SCORES_ONLY, help="the hazard page's tables: one row per model and step (model, step, "
                                             "at_risk, events, hazard, cum_hazard, survival)")
def hazard(request: ExportRequest) -> Table:
    sel = _selection(request)
    return Table(analytics.HAZARD_EXPORT_FIELDS, analytics.hazard_table_rows(sel))


@register("relative-hazard", reads=SCORES_ONLY, help="hazard of the first error by relative position t*/N in tenths, one row per "
                                   "model and bin (model \"all\": every model)")
def relative_hazard(request: ExportRequest) -> Table:
    sel = _selection(request)
    return Table(analytics.RELATIVE_HAZARD_FIELDS, analytics.relative_hazard_rows(sel))


@register("recovery", reads=SCORES_ONLY, help="recovered and unrecovered thought errors, one row per model")
def recovery(request: ExportRequest) -> Table:
    sel = _selection(request)
    return Table(analytics.RECOVERY_FIELDS, analytics.recovery_rows(sel))


@register("leaderboard", reads=SCORES_ONLY, help="one row per model (or domain): the leaderboard's figures, an interval as two columns")
def leaderboard(request: ExportRequest) -> Table:
    sel = _selection(request)
    rows = analytics.export_leaderboard_rows(analytics.leaderboard(sel), sel.group)
    return Table([sel.group] + analytics.LEADERBOARD_EXPORT_COLUMNS, rows)
