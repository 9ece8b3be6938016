"""How far the review has come: per annotator of a study's queues, and per study.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, OuterRef, Q

from annotation import gate
from annotation.gate import Source
from annotation.models import Assignment, Membership, Study, TraceReview


def annotator_progress(study: Study) -> list[dict]:
    """Per annotator with assignments: assigned, done, skipped, flagged (three grouped queries)."""
    assigned = dict(
        Assignment.objects.filter(study=study).values("annotator").annotate(n=Count("pk")).values_list("annotator", "n")
    )
    on_assigned = TraceReview.objects.filter(
        trace__study=study, annotator__in=list(assigned),
    ).filter(Exists(Assignment.objects.filter(trace=OuterRef("trace"), annotator=OuterRef("annotator"))))
    stats = {
        row["annotator"]: row
        for row in on_assigned.values("annotator").annotate(
            done=Count("pk", filter=Q(complete=True)),
            skipped=Count("pk", filter=Q(skipped=True, complete=False)),
            flagged=Count("pk", filter=~Q(flag="")),
        )
    }
    names = dict(get_user_model().objects.filter(pk__in=list(assigned)).values_list("pk", "username"))
    out = []
    for uid, n in sorted(assigned.items(), key=lambda kv: names.get(kv[0], "")):
        s = stats.get(uid, {})
        done = s.get("done", 0)
        out.append({"username": names.get(uid, "?"), "assigned": n, "done": done, "skipped": s.get("skipped", 0),
                    "flagged": s.get("flagged", 0), "percent": round(100 * done / n) if n else 0})
    return out


def study_progress(study_ids: list[int], user) -> dict[int, dict[str, int]]:
    """Per study: traces, labelled completely by me / by anyone, labelled by a
    judge, open disagreements (annotation.study_summary: stored where current)."""
    from annotation import study_summary

    return study_summary.study_progress(study_ids, user)


#: What each review-progress counter reads (annotation.gate); a counter a member may not read is None.
PROGRESS_READS = {
    "traces": frozenset({Source.TRACE}), "mine": frozenset({Source.OWN}),
    "anyone": frozenset({Source.OWN, Source.PEER}), "judged": frozenset({Source.JUDGE}),
    "disagreements": frozenset({Source.OWN, Source.PEER, Source.JUDGE, Source.ADJUDICATION}),
}


def visible_progress(counts: dict[str, int], membership: Membership | None) -> dict[str, int | None]:
    """A study's progress counters as ``membership`` may see them: the others' are None (the pages show "–")."""
    return {k: (v if gate.may_read(membership, PROGRESS_READS.get(k, frozenset(Source))) else None)
            for k, v in counts.items()}


def visible_annotator_progress(study: Study, membership: Membership | None) -> list[dict]:
    """The per-annotator progress of the queue page: a member who may not read peers' reviews sees her own row."""
    rows = annotator_progress(study)
    if gate.may_read(membership, {Source.PEER}):
        return rows
    return [r for r in rows if membership is not None and r["username"] == membership.user.get_username()]
