"""How far the review has come: per annotator of a study's queues, and per study.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, F, OuterRef, Q

from annotation.models import Assignment, Step, StepLabel, Study, Trace, TraceReview


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
    judge, open disagreements. A fixed number of grouped queries."""
    out: dict[int, dict[str, int]] = {
        sid: {"traces": 0, "mine": 0, "anyone": 0, "judged": 0, "disagreements": 0} for sid in study_ids
    }
    if not study_ids:
        return out
    for sid, n in Trace.objects.filter(study_id__in=study_ids).own().values("study").annotate(n=Count("pk")) \
            .values_list("study", "n"):
        out[sid]["traces"] = n
    complete = TraceReview.objects.filter(trace__study_id__in=study_ids, complete=True)
    for sid, n in complete.filter(annotator=user).values("trace__study").annotate(n=Count("pk")).values_list("trace__study", "n"):
        out[sid]["mine"] = n
    for sid, n in complete.values("trace__study").annotate(n=Count("trace", distinct=True)).values_list("trace__study", "n"):
        out[sid]["anyone"] = n
    judged = Trace.objects.filter(study_id__in=study_ids).filter(
        Exists(StepLabel.objects.filter(step__trace=OuterRef("pk"), kind=StepLabel.Kind.JUDGE))
    )
    for sid, n in judged.values("study").annotate(n=Count("pk")).values_list("study", "n"):
        out[sid]["judged"] = n
    # One query for every study: steps whose human labels (and the study's
    # primary judge) disagree on the verdict, not yet adjudicated.
    steps = (
        StepLabel.objects.filter(step__trace__study_id__in=study_ids)
        .filter(Q(kind=StepLabel.Kind.HUMAN) | Q(kind=StepLabel.Kind.JUDGE, judge_id=F("step__trace__study__primary_judge")))
        .exclude(Exists(StepLabel.objects.filter(step=OuterRef("step"), kind=StepLabel.Kind.ADJUDICATION)))
        .values("step")
        .annotate(n_verdicts=Count("verdict", distinct=True), n_human=Count("pk", filter=Q(kind=StepLabel.Kind.HUMAN)))
        .filter(n_verdicts__gt=1, n_human__gte=1)
        .values("step")
    )
    for sid, n in Step.objects.filter(pk__in=steps).values("trace__study").annotate(n=Count("pk")).values_list("trace__study", "n"):
        out[sid]["disagreements"] = n
    return out
