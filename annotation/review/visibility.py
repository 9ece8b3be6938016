"""Who sees which labels of a trace (blind mode).

In a blind study an annotator sees no judge verdicts, other annotators'
labels or adjudications on a trace until they have labelled every step
of it (their review is ``complete``). Owners and adjudicators are never
blinded: they manage and settle the labels, so they must see them.
"""

from __future__ import annotations

from django.db.models import QuerySet

from annotation import access
from annotation.models import Membership, StepLabel, Trace, TraceReview


def sees_everything(membership: Membership) -> bool:
    """Blind mode is decided by annotation.access; kept here for the review code's callers."""
    return access.sees_everything(membership)


def is_revealed(membership: Membership, review: TraceReview | None) -> bool:
    return access.is_revealed(membership, bool(review and review.complete))


def can_adjudicate(membership: Membership) -> bool:
    return access.can_adjudicate(membership)


def visible_labels(trace: Trace, user, revealed: bool) -> QuerySet[StepLabel]:
    """The labels of ``trace`` this user may see: their own, and every source once revealed."""
    qs = StepLabel.objects.filter(step__trace=trace).select_related("annotator", "judge").order_by("kind", "pk")
    if not revealed:
        qs = qs.filter(kind=StepLabel.Kind.HUMAN, annotator=user)
    return qs


_LABEL_FIELDS = ("step_id", "kind", "annotator_id", "annotator__username", "judge__name", "verdict",
                 "skeleton_refs", "reason", "confidence")


def visible_label_rows(trace: Trace, user, revealed: bool) -> list[dict]:
    """:func:`visible_labels` as plain dicts (no model instances: a 200-step
    trace with three sources is 600 rows), each with its ``source`` name."""
    qs = StepLabel.objects.filter(step__trace=trace).order_by("kind", "pk")
    if not revealed:
        qs = qs.filter(kind=StepLabel.Kind.HUMAN, annotator=user)
    rows = list(qs.values(*_LABEL_FIELDS))
    for r in rows:
        r["source"] = f"judge:{r['judge__name']}" if r["kind"] == StepLabel.Kind.JUDGE else r["annotator__username"]
    return rows


def source_name(label: StepLabel) -> str:
    if label.kind == StepLabel.Kind.JUDGE:
        return f"judge:{label.judge.name}"
    return label.annotator.username
