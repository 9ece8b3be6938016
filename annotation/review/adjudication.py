"""Disagreements between label sources, and the adjudicated final label of a step
(versioned like an annotator's labels; every change goes into ``LabelHistory``).
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from annotation import study_summary
from annotation.importing.pipeline import label_snapshot
from annotation.models import LabelHistory, Step, StepLabel, Study, Trace, Verdict
from annotation.review.base import NOTE_MAX, VIA_WEB, Conflict, ReviewError, send_data_changed


def _source_filter(study: Study) -> Q:
    q = Q(kind=StepLabel.Kind.HUMAN)
    if study.primary_judge_id:
        q |= Q(kind=StepLabel.Kind.JUDGE, judge_id=study.primary_judge_id)
    return q


def disagreement_step_ids(study: Study, *, open_only: bool = True) -> QuerySet:
    """Steps whose labels disagree on the verdict -- human against human, or
    human against the study's primary judge -- as a ``values("step")``
    subquery. ``open_only`` leaves out steps already adjudicated."""
    qs = (
        # The study's own traces: a suite's variants and a benchmark's items are not the study's to adjudicate.
        StepLabel.objects.filter(step__trace__in=Trace.objects.of_study(study).values("pk"))
        .filter(_source_filter(study))
        .values("step")
        .annotate(n_verdicts=Count("verdict", distinct=True), n_human=Count("pk", filter=Q(kind=StepLabel.Kind.HUMAN)))
        .filter(n_verdicts__gt=1, n_human__gte=1)
    )
    if open_only:
        qs = qs.exclude(Exists(StepLabel.objects.filter(step=OuterRef("step"), kind=StepLabel.Kind.ADJUDICATION)))
    return qs.values("step")


def disagreement_steps(study: Study, status: str = "open", model: str = "") -> QuerySet[Step]:
    """``status``: "open" (not adjudicated), "resolved" (adjudicated) or "all"; ``model``: of that model's traces
    only. In (trace, index) order. From the stored steps when current: then ordered by their own copy of trace and
    index, so a page is cut from the (study, trace, index) index, each step probed for a final verdict."""
    adjudicated = Exists(StepLabel.objects.filter(step=OuterRef("pk"), kind=StepLabel.Kind.ADJUDICATION))
    stored = study_summary.stored_disagreements(study)
    if stored is not None:
        qs = Step.objects.filter(summary_disagreements__study=study).order_by(
            "summary_disagreements__trace_id", "summary_disagreements__index")
    else:
        qs = Step.objects.filter(pk__in=disagreement_step_ids(study, open_only=False)).order_by("trace_id", "index")
    if status == "open":
        qs = qs.exclude(adjudicated)
    elif status == "resolved":
        qs = qs.filter(adjudicated)
    return qs.filter(trace__model=model) if model else qs


def disagreement_count(study: Study, status: str = "open", model: str = "") -> int:
    """How many steps disagreement_steps lists: from the stored counts per model when current, less (or, for
    "resolved", only) the adjudicated ones among the stored steps, counted from the final verdicts (a page's
    count over the stored steps joined to their labels read every one of them: 1.8 million at 1M traces)."""
    by_model = study_summary.stored_disagreement_counts(study)
    if by_model is None:
        return disagreement_steps(study, status, model).count()
    total = by_model.get(model, 0) if model else sum(by_model.values())
    if status == "all":
        return total
    adjudicated = study_summary.adjudicated_in_stored([study.pk], model).get(study.pk, 0)
    return adjudicated if status == "resolved" else total - adjudicated


def traces_with_disagreement(study: Study) -> QuerySet:
    """The traces with a disagreement step (adjudicated or not), as a ``values("trace")`` subquery."""
    stored = study_summary.stored_disagreements(study)
    if stored is not None:
        return stored.values("trace")
    return Step.objects.filter(pk__in=disagreement_step_ids(study, open_only=False)).values("trace")


def _adjudication_conflict(label: StepLabel, sent: int) -> str:
    when = timezone.localtime(label.updated_at).strftime("%H:%M:%S")
    return (
        f"{label.annotator.username} set the final verdict of this step to {label.verdict} at {when} "
        f"(now version {label.version}; you started from version {sent}). Nothing was saved: reload and decide again."
    )


@transaction.atomic
def do_adjudicate(step: Step, user, *, version: int, verdict: str, skeleton_refs: list[int], reason: str,
                  via: str = VIA_WEB) -> StepLabel:
    """Set the final label of ``step`` (kind "adjudication"), if ``version`` is current.
    Every label of the step stays; the change goes into LabelHistory."""
    reason = (reason or "").strip()
    errors = []
    if verdict not in Verdict.values:
        errors.append(("verdict", f"{verdict!r} is not one of {', '.join(Verdict.values)}"))
    if not reason:
        errors.append(("reason", "say why: the reason is exported with the final label"))
    elif len(reason) > NOTE_MAX:
        errors.append(("reason", f"at most {NOTE_MAX} characters"))
    l_gold = step.trace.problem.l_gold
    refs = sorted(set(skeleton_refs or []))
    bad = [r for r in refs if not isinstance(r, int) or isinstance(r, bool) or not 1 <= r <= l_gold]
    if bad:
        errors.append(("skeleton_refs", f"{bad[0]!r} is not a skeleton step (1..{l_gold})"))
    if errors:
        raise ReviewError(errors)
    label = StepLabel.objects.select_for_update(of=("self",)).select_related("annotator").filter(
        step=step, kind=StepLabel.Kind.ADJUDICATION).first()
    current = label.version if label else 0
    if version != current:
        raise Conflict(_adjudication_conflict(label, version) if label else
                       f"This step has no final verdict yet (version 0); you started from version {version}.", current)
    now = timezone.now()
    after = {"verdict": verdict, "skeleton_refs": refs, "confidence": None, "reason": reason}
    before = label_snapshot(label)
    if before == after and label.annotator_id == user.pk:
        return label
    if label is None:
        try:
            with transaction.atomic():
                label = StepLabel.objects.create(step=step, kind=StepLabel.Kind.ADJUDICATION, annotator=user,
                                                 verdict=verdict, skeleton_refs=refs, reason=reason,
                                                 created_at=now, updated_at=now)
        except IntegrityError:
            other = StepLabel.objects.select_related("annotator").get(step=step, kind=StepLabel.Kind.ADJUDICATION)
            raise Conflict(_adjudication_conflict(other, version), other.version) from None
    else:
        label.annotator, label.verdict, label.skeleton_refs, label.reason = user, verdict, refs, reason
        label.version += 1
        label.updated_at = now
        label.save()
    LabelHistory.objects.create(step=step, label=label, kind=StepLabel.Kind.ADJUDICATION, source_name=user.username,
                                actor=user, at=now, before=before, after=after, via=via)
    send_data_changed(step.trace.study_id, study_summary.ADJUDICATION)
    return label
