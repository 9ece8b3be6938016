"""Review queues: the next trace to review, and assigning traces to annotators.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from django.db import transaction
from django.db.models import Exists, Max, OuterRef, Q, QuerySet
from django.utils import timezone

from annotation.models import Assignment, Membership, Study, Trace, TraceReview
from reasonlib.refusals import Invalid


def _done_or_skipped(user) -> Exists:
    return Exists(
        TraceReview.objects.filter(trace=OuterRef("trace"), annotator=user).filter(Q(complete=True) | Q(skipped=True))
    )


def my_assignments(study: Study, user) -> QuerySet[Assignment]:
    """``user``'s assignments in queue order, each with ``done`` (my review is complete), ``skipped`` (skipped
    and not finished) and ``started`` (saved at least once): the queue page's and the API's rows."""
    mine = TraceReview.objects.filter(trace=OuterRef("trace"), annotator=user)
    return (Assignment.objects.filter(study=study, annotator=user).select_related("trace__problem")
            .annotate(done=Exists(mine.filter(complete=True)), skipped=Exists(mine.filter(skipped=True, complete=False)),
                      started=Exists(mine.filter(version__gt=0)))
            .order_by("position"))


def with_status(assignments: QuerySet[Assignment], status: str) -> QuerySet[Assignment]:
    """The rows of ``my_assignments`` to do (neither done nor skipped), done or skipped; any other value: all."""
    if status == "todo":
        return assignments.filter(done=False, skipped=False)
    if status == "done":
        return assignments.filter(done=True)
    if status == "skipped":
        return assignments.filter(skipped=True)
    return assignments


def next_trace_id(study: Study, user, after: Trace | None = None) -> int | None:
    """The next trace to review: the first unfinished, unskipped one of my
    queue after ``after`` (wrapping round); without assignments, the next
    such trace of the study."""
    mine = Assignment.objects.filter(study=study, annotator=user)
    if mine.exists():
        todo = mine.exclude(_done_or_skipped(user))
        if after is not None:
            todo = todo.exclude(trace=after)
            pos = mine.filter(trace=after).values_list("position", flat=True).first()
            if pos is not None:
                later = todo.filter(position__gt=pos).order_by("position").values_list("trace_id", flat=True).first()
                if later:
                    return later
        return todo.order_by("position").values_list("trace_id", flat=True).first()
    finished = TraceReview.objects.filter(trace=OuterRef("pk"), annotator=user).filter(Q(complete=True) | Q(skipped=True))
    # The queue of the study's own traces: suite variants are reviewed only when queued explicitly.
    todo = Trace.objects.filter(study=study).own().exclude(Exists(finished)).order_by("pk")
    if after is not None:
        later = todo.filter(pk__gt=after.pk).values_list("pk", flat=True).first()
        if later:
            return later
        todo = todo.exclude(pk=after.pk)
    return todo.values_list("pk", flat=True).first()


class AssignError(Invalid):
    """An assignment refused; ``field`` is the parameter at fault (``annotators`` or ``k``), so every road
    names the same one."""

    def __init__(self, message: str, field: str = "annotators") -> None:
        super().__init__(message, field=field)


#: Annotators per trace (``k``) in one assignment: one declaration of the range for the review page's form,
#: the assignment endpoints (studies, cohorts, calibration samples) and ``do_assign`` itself (docs/review.md).
#: Two or three give the overlap agreement needs; 20 is already more people than a study puts on one trace,
#: and an unbounded k reached the service as a 10-digit number from the API.
ANNOTATORS_PER_TRACE = (1, 20)
ANNOTATORS_PER_TRACE_HELP = f"annotators per trace, {ANNOTATORS_PER_TRACE[0]} to {ANNOTATORS_PER_TRACE[1]}"


@transaction.atomic
def do_assign(study: Study, by, annotators: list, k: int = 1, *, stratify: bool = True,
              only_unassigned: bool = True, trace_ids: Sequence[int] | None = None) -> int:
    """Put traces in annotators' queues, ``k`` annotators per trace.

    Round-robin with one cursor that runs on from model to model, so every
    annotator gets (within one) the same number of traces of each model.
    Queue positions interleave the models, so nobody reviews one model's
    traces in a block. With ``trace_ids`` (e.g. a calibration sample), those
    traces are queued in the given order instead, after everything already
    queued. A (trace, annotator) pair already queued is kept as it is.
    Returns the number of assignments made.
    """
    annotators = list(dict.fromkeys(annotators))
    if not annotators:
        raise AssignError("choose at least one annotator")
    low, high = ANNOTATORS_PER_TRACE
    if not low <= k <= min(high, len(annotators)):
        raise AssignError(f"k (annotators per trace) must be between {low} and {min(high, len(annotators))}", "k")
    members = set(Membership.objects.filter(study=study, user__in=annotators).values_list("user_id", flat=True))
    outsiders = [u.username for u in annotators if u.pk not in members]
    if outsiders:
        raise AssignError(f"not members of the study: {', '.join(outsiders)}")
    existing = Assignment.objects.filter(study=study)
    if trace_ids is not None:
        ordered_groups = [list(dict.fromkeys(trace_ids))]
        interleaved = ordered_groups[0]
        taken = set(existing.filter(trace_id__in=interleaved).values_list("trace_id", "annotator_id"))
    else:
        traces = Trace.objects.filter(study=study).own()  # not the suite variants' traces
        if only_unassigned:
            traces = traces.exclude(Exists(Assignment.objects.filter(trace=OuterRef("pk"))))
        rows = list(traces.order_by("problem__problem_id", "model", "pk").values_list("pk", "model"))
        groups: dict[str, list[int]] = defaultdict(list)
        for pk, model in rows:
            groups[model if stratify else ""].append(pk)
        ordered_groups = [groups[m] for m in sorted(groups)]
        # Queue order: one trace of each model in turn.
        interleaved = [g[i] for i in range(max((len(g) for g in ordered_groups), default=0)) for g in ordered_groups
                       if i < len(g)]
        taken = set(existing.values_list("trace_id", "annotator_id")) if not only_unassigned else set()
    base = (existing.aggregate(m=Max("position"))["m"] or 0) + 1
    position = {pk: base + i for i, pk in enumerate(interleaved)}
    now = timezone.now()
    new: list[Assignment] = []
    cursor = 0
    n = len(annotators)
    for group in ordered_groups:
        for pk in group:
            for j in range(k):
                user = annotators[(cursor + j) % n]
                if (pk, user.pk) not in taken:
                    new.append(Assignment(study=study, trace_id=pk, annotator=user, position=position[pk],
                                          created_by=by, created_at=now))
            cursor += k
    Assignment.objects.bulk_create(new, batch_size=2000)
    return len(new)


def do_clear_assignments(study: Study) -> int:
    deleted, _ = Assignment.objects.filter(study=study).delete()
    return deleted
