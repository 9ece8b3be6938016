"""The score-based export kinds: scores, hazard, leaderboard, lucky-guesses."""

from __future__ import annotations

from scoring import analytics
from scoring.exports import ExportError, ExportRequest, Table, register


def _selection(request: ExportRequest) -> analytics.Selection:
    params = {"source": request.source or "", "profile": request.profile or "", "model": request.model,
              "domain": request.domain, "group": request.extra.get("group", "model")}
    try:
        return analytics.select(request.study, params, request.membership)
    except analytics.BadFilter as exc:
        raise ExportError(f"--{exc.field}: {exc.message}") from None


@register("scores", help="one row per trace with stored scores (fields as docs/exports.md)")
def scores(request: ExportRequest) -> Table:
    sel = _selection(request)
    return Table(analytics.SCORE_EXPORT_FIELDS, analytics.read_export_frame(sel))


@register("lucky-guesses", help="correct answers with process score <= tau")
def lucky_guesses(request: ExportRequest) -> Table:
    sel = _selection(request)
    return Table(analytics.SCORE_EXPORT_FIELDS, analytics.read_export_frame(sel, lucky_only=True))


@register("hazard", help="rows as the hazard endpoint: step, at_risk, events, hazard, cum_hazard, survival")
def hazard(request: ExportRequest) -> Table:
    sel = _selection(request)
    return Table(analytics.HAZARD_FIELDS, analytics.hazard_rows(sel))


@register("leaderboard", help="rows as the leaderboard endpoint, one per model")
def leaderboard(request: ExportRequest) -> Table:
    sel = _selection(request)
    rows = analytics.api_leaderboard_rows(analytics.leaderboard(sel), sel.group)
    return Table([sel.group] + analytics.LEADERBOARD_FIELDS[1:], rows)
