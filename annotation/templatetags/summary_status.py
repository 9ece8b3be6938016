"""The note of every page that shows a study's stored counts (annotation.study_summary) while they are stale:
when they were computed, that the data changed since, and what the score job that recomputes them is doing.
One tag, so each page that reads the summary says it the same way."""

from __future__ import annotations

from django import template

from annotation import study_summary
from annotation.models import Job, Study

register = template.Library()
#: The default of ``status``: the study summary's (None is a status: current, or nothing stored).
_SUMMARY: dict = {}


@register.inclusion_tag("annotation/_summary_status.html", takes_context=True)
def summary_status(context, study: Study, status: dict | None = _SUMMARY, what: str = "counts on this page") -> dict:
    """``status``: another stored result's (faithfulness.stored_evidence.status) in place of the summary's."""
    if status is _SUMMARY:
        status = study_summary.status([study.pk]).get(study.pk)
    job = None
    if status is not None:
        job = Job.objects.filter(study=study, kind=Job.Kind.SCORE).order_by("-created_at").only(
            "pk", "status", "finished_at").first()
    return {"status": status, "job": job, "what": what, "request": context.get("request")}
