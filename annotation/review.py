"""Reviewing traces: an annotator's labels with optimistic versions, blind
mode, queues, flags, and adjudication. The web pages and the REST API both
call these functions; neither writes labels any other way.

Versions
    Each annotator has one ``TraceReview`` per trace; its ``version`` counts
    the saves of their labels, rating and completeness. A save names the
    version it started from; if the row moved on since (another tab, an API
    script, an import), :class:`Conflict` is raised and nothing is written.
    The adjudicated label of a step has its own ``StepLabel.version``.

Blind mode
    In a blind study an annotator sees no judge verdicts, other annotators'
    labels or adjudications on a trace until they have labelled every step
    of it (their review is ``complete``). Owners and adjudicators are never
    blinded: they manage and settle the labels, so they must see them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, F, FilteredRelation, Max, OuterRef, Q, QuerySet
from django.utils import timezone

from annotation import access, signals
from annotation.importing.pipeline import label_snapshot
from annotation.models import (
    Assignment,
    LabelHistory,
    Membership,
    Step,
    StepLabel,
    Study,
    Trace,
    TraceReview,
    Verdict,
)

VIA_WEB, VIA_API = "web", "api"
NOTE_MAX = 5000
UNSET = object()

_VIA_WORDS = {
    VIA_WEB: "in another browser tab or window",
    VIA_API: "through the API",
    "import": "by an import",
}


class ReviewError(ValueError):
    """Bad input; ``errors`` are (field, message) pairs."""

    def __init__(self, errors: list[tuple[str, str]]):
        self.errors = errors
        super().__init__("; ".join(f"{f}: {m}" if f else m for f, m in errors))


class Conflict(Exception):
    """The version a save started from is stale; nothing was written."""

    def __init__(self, message: str, current_version: int):
        self.current_version = current_version
        super().__init__(message)


# --------------------------------------------------------------------------
# Who sees what


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


# --------------------------------------------------------------------------
# An annotator's labels


@dataclass
class LabelIn:
    step: int
    verdict: str
    skeleton_refs: list[int] = field(default_factory=list)
    note: str = ""


def clean_labels(trace: Trace, labels: Iterable[LabelIn], l_gold: int) -> list[LabelIn]:
    errors: list[tuple[str, str]] = []
    seen: set[int] = set()
    out = []
    for i, lab in enumerate(labels):
        where = f"labels[{i}]"
        if not isinstance(lab.step, int) or isinstance(lab.step, bool) or not 1 <= lab.step <= trace.n_steps:
            errors.append((f"{where}.step", f"{lab.step!r} is not a step of this trace (1..{trace.n_steps})"))
            continue
        if lab.step in seen:
            errors.append((f"{where}.step", f"step {lab.step} is labelled twice"))
            continue
        seen.add(lab.step)
        if lab.verdict not in Verdict.values:
            errors.append((f"{where}.verdict", f"{lab.verdict!r} is not one of {', '.join(Verdict.values)}"))
            continue
        refs = sorted(set(lab.skeleton_refs or []))
        bad = [r for r in refs if not isinstance(r, int) or isinstance(r, bool) or not 1 <= r <= l_gold]
        if bad:
            why = "the problem has no approved skeleton" if l_gold == 0 else f"skeleton steps are 1..{l_gold}"
            errors.append((f"{where}.skeleton_refs", f"{bad[0]!r} is not a skeleton step ({why})"))
            continue
        note = (lab.note or "").strip()
        if len(note) > NOTE_MAX:
            errors.append((f"{where}.note", f"at most {NOTE_MAX} characters"))
            continue
        out.append(LabelIn(lab.step, lab.verdict, refs, note))
    if errors:
        raise ReviewError(errors)
    return sorted(out, key=lambda lab: lab.step)


def _conflict_message(review: TraceReview, sent: int) -> str:
    where = _VIA_WORDS.get(review.updated_via, "elsewhere")
    when = timezone.localtime(review.updated_at).strftime("%H:%M:%S")
    return (
        f"Your labels on this trace were changed {where} at {when} (now version {review.version}; "
        f"this page had version {sent}). Nothing was saved: reload to see the current labels, then redo your change."
    )


@dataclass
class SaveResult:
    review: TraceReview
    changed_labels: int
    became_complete: bool


@transaction.atomic
def do_save_labels(
    trace: Trace,
    user,
    *,
    version: int,
    labels: Iterable[LabelIn],
    complete: bool | None = None,
    rating: float | None | object = UNSET,
    answer_correct: bool | None | object = UNSET,
    via: str = VIA_WEB,
) -> SaveResult:
    """Replace ``user``'s labels on ``trace`` with ``labels`` (steps left out
    lose their label), if ``version`` is still current.

    ``complete=None`` means "complete when every step is labelled" (the web
    page); an explicit ``True`` with unlabelled steps is refused. Every label
    change is written to LabelHistory. The review row is locked for the
    duration (``SELECT ... FOR UPDATE``; SQLite serialises writers anyway).
    """
    l_gold = trace.problem.l_gold
    cleaned = clean_labels(trace, labels, l_gold)
    if complete is None:
        complete = len(cleaned) == trace.n_steps
    elif complete and len(cleaned) < trace.n_steps:
        missing = sorted(set(range(1, trace.n_steps + 1)) - {lab.step for lab in cleaned})
        raise ReviewError([("complete", f"{len(missing)} step(s) are unlabelled (first: step {missing[0]})")])
    if rating is not UNSET and rating is not None and not (0 <= float(rating) <= 10):
        raise ReviewError([("rating", "a rating is between 0 and 10")])

    now = timezone.now()
    review = TraceReview.objects.select_for_update().filter(trace=trace, annotator=user).first()
    current = review.version if review else 0
    if version != current:
        raise Conflict(_conflict_message(review, version), current) if review else Conflict(
            f"This trace has no labels of yours yet (version 0); this page had version {version}. Reload it.", 0
        )

    # Every step with my label on it, if any: one query, no model instances.
    rows = (
        Step.objects.filter(trace=trace)
        .annotate(mine=FilteredRelation("labels", condition=Q(labels__kind=StepLabel.Kind.HUMAN,
                                                                  labels__annotator=user)))
        .values_list("index", "pk", "mine__pk", "mine__verdict", "mine__skeleton_refs", "mine__reason",
                     "mine__confidence", "mine__version")
    )
    step_pks: dict[int, int] = {}
    existing: dict[int, tuple] = {}  # step pk -> (label pk, snapshot, version)
    for index, step_pk, pk, verdict, refs, reason, confidence, label_version in rows:
        step_pks[index] = step_pk
        if pk is not None:
            existing[step_pk] = (pk, {"verdict": verdict, "skeleton_refs": list(refs or []),
                                      "confidence": confidence, "reason": reason}, label_version)
    wanted = {step_pks[lab.step]: lab for lab in cleaned}
    to_create, to_update, to_delete, history = [], [], [], []
    for step_pk, lab in wanted.items():
        old = existing.get(step_pk)
        after = {"verdict": lab.verdict, "skeleton_refs": lab.skeleton_refs,
                 "confidence": old[1]["confidence"] if old else None, "reason": lab.note}
        if old is None:
            new = StepLabel(step_id=step_pk, kind=StepLabel.Kind.HUMAN, annotator=user, verdict=lab.verdict,
                            skeleton_refs=lab.skeleton_refs, reason=lab.note, created_at=now, updated_at=now)
            to_create.append(new)
            history.append((new, step_pk, None, after))
        elif old[1] != after:
            changed = StepLabel(pk=old[0], step_id=step_pk, verdict=lab.verdict, skeleton_refs=lab.skeleton_refs,
                                reason=lab.note, version=old[2] + 1, updated_at=now)
            to_update.append(changed)
            history.append((changed, step_pk, old[1], after))
    for step_pk, old in existing.items():
        if step_pk not in wanted:
            to_delete.append(old[0])
            history.append((None, step_pk, old[1], None))

    new_rating = review.rating if (rating is UNSET and review) else (None if rating is UNSET else rating)
    new_rating = None if new_rating is None else float(new_rating)
    if review is None:
        # A first save with nothing in it (an empty form) creates no review;
        # an empty trace is complete with no labels, so it does.
        review_changed = bool(complete or new_rating is not None)
    else:
        review_changed = review.complete != complete or review.rating != new_rating
    answer_changed = answer_correct is not UNSET and _answer_differs(trace, answer_correct)
    if not (history or review_changed or answer_changed):
        return SaveResult(review, 0, False)
    # Anything else saved makes (or moves on) the review: it carries the version.

    became_complete = complete and not (review and review.complete)
    if review is None:
        try:
            with transaction.atomic():
                review = TraceReview.objects.create(
                    trace=trace, annotator=user, version=1, complete=complete, rating=new_rating,
                    updated_at=now, updated_via=via,
                )
        except IntegrityError:
            # Another request created it between our read and our insert.
            other = TraceReview.objects.get(trace=trace, annotator=user)
            raise Conflict(_conflict_message(other, version), other.version) from None
    else:
        review.version += 1
        review.complete, review.rating, review.updated_at, review.updated_via = complete, new_rating, now, via
        review.save(update_fields=["version", "complete", "rating", "updated_at", "updated_via"])

    if to_create:
        StepLabel.objects.bulk_create(to_create)
    if to_update:
        StepLabel.objects.bulk_update(to_update, ["verdict", "skeleton_refs", "reason", "version", "updated_at"])
    if to_delete:
        StepLabel.objects.filter(pk__in=to_delete).delete()
    LabelHistory.objects.bulk_create([
        LabelHistory(step_id=step_pk, label_id=lab.pk if lab is not None else None, kind=StepLabel.Kind.HUMAN,
                     source_name=user.username, actor=user, at=now, before=before, after=after, via=via)
        for lab, step_pk, before, after in history
    ])
    if answer_changed:
        _set_answer(trace, user, answer_correct, via, now)
    _data_changed(trace.study_id)
    return SaveResult(review, len(history), became_complete)


def _answer_differs(trace: Trace, value) -> bool:
    if value is None:  # back to the automatic verdict
        return trace.answer_origin == Trace.AnswerOrigin.REVIEWER
    return trace.answer_origin != Trace.AnswerOrigin.REVIEWER or trace.answer_correct != value


def _set_answer(trace: Trace, user, value: bool | None, via: str, now) -> None:
    """A reviewer's verdict on the final answer wins over the automatic check,
    which stays in ``auto_answer_correct``; ``None`` hands back to it. Each
    override is kept in ``meta["answer_overrides"]``."""
    before = {"answer_correct": trace.answer_correct, "answer_origin": trace.answer_origin}
    if value is None:
        trace.answer_correct = trace.auto_answer_correct
        trace.answer_origin = Trace.AnswerOrigin.AUTOMATIC if trace.auto_answer_correct is not None else Trace.AnswerOrigin.NONE
    else:
        trace.answer_correct, trace.answer_origin = value, Trace.AnswerOrigin.REVIEWER
    meta = dict(trace.meta or {})
    meta["answer_overrides"] = [*meta.get("answer_overrides", []), {
        "by": user.username, "at": now.isoformat(), "via": via, "before": before,
        "after": {"answer_correct": trace.answer_correct, "answer_origin": trace.answer_origin},
    }]
    trace.meta = meta
    trace.save(update_fields=["answer_correct", "answer_origin", "meta"])


def _data_changed(study_id: int) -> None:
    def send() -> None:
        study = Study.objects.filter(pk=study_id).first()
        if study is not None:
            signals.data_changed.send(sender=Study, study=study, reason="labels")

    transaction.on_commit(send)


@transaction.atomic
def do_set_answer(trace: Trace, user, value: bool | None, *, via: str = VIA_WEB) -> bool:
    trace = Trace.objects.select_for_update().get(pk=trace.pk)
    if not _answer_differs(trace, value):
        return False
    _set_answer(trace, user, value, via, timezone.now())
    _data_changed(trace.study_id)
    return True


@transaction.atomic
def do_flag(trace: Trace, user, flag: str) -> TraceReview:
    """Flag the trace ("bad problem", "can't judge") or clear the flag ("").
    ``Trace.flagged`` says whether anyone's review flags it."""
    if flag not in TraceReview.Flag.values:
        raise ReviewError([("flag", f"{flag!r} is not one of {', '.join(v for v in TraceReview.Flag.values if v)}")])
    review, _ = TraceReview.objects.get_or_create(trace=trace, annotator=user, defaults={"version": 0})
    review.flag = flag
    review.save(update_fields=["flag"])
    flagged = TraceReview.objects.filter(trace=trace).exclude(flag="").exists()
    Trace.objects.filter(pk=trace.pk).update(flagged=flagged)
    trace.flagged = flagged
    return review


@transaction.atomic
def do_skip(trace: Trace, user, skipped: bool = True) -> TraceReview:
    review, _ = TraceReview.objects.get_or_create(trace=trace, annotator=user, defaults={"version": 0})
    review.skipped = skipped
    review.save(update_fields=["skipped"])
    return review


# --------------------------------------------------------------------------
# Queues


def _done_or_skipped(user) -> Exists:
    return Exists(
        TraceReview.objects.filter(trace=OuterRef("trace"), annotator=user).filter(Q(complete=True) | Q(skipped=True))
    )


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


class AssignError(ValueError):
    pass


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
    if not 1 <= k <= len(annotators):
        raise AssignError(f"k (annotators per trace) must be between 1 and {len(annotators)}")
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


# --------------------------------------------------------------------------
# Disagreements and adjudication


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
        StepLabel.objects.filter(step__trace__study=study)
        .filter(_source_filter(study))
        .values("step")
        .annotate(n_verdicts=Count("verdict", distinct=True), n_human=Count("pk", filter=Q(kind=StepLabel.Kind.HUMAN)))
        .filter(n_verdicts__gt=1, n_human__gte=1)
    )
    if open_only:
        qs = qs.exclude(Exists(StepLabel.objects.filter(step=OuterRef("step"), kind=StepLabel.Kind.ADJUDICATION)))
    return qs.values("step")


def disagreement_steps(study: Study, status: str = "open") -> QuerySet[Step]:
    """``status``: "open" (not adjudicated), "resolved" (adjudicated) or "all"."""
    ids = disagreement_step_ids(study, open_only=False)
    qs = Step.objects.filter(pk__in=ids)
    adjudicated = Exists(StepLabel.objects.filter(step=OuterRef("pk"), kind=StepLabel.Kind.ADJUDICATION))
    if status == "open":
        qs = qs.exclude(adjudicated)
    elif status == "resolved":
        qs = qs.filter(adjudicated)
    return qs.order_by("trace_id", "index")


def traces_with_disagreement(study: Study) -> QuerySet:
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
    _data_changed(step.trace.study_id)
    return label


# --------------------------------------------------------------------------
# Study progress


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


# --------------------------------------------------------------------------
# Trace filters shared by the trace list, the queue and the API


def study_models(study: Study) -> list[str]:
    """The distinct model names of a study's traces, for the filter menus.

    On PostgreSQL a recursive "loose index scan" over (study, model) reads one
    index entry per model instead of every trace (SELECT DISTINCT scans all
    100k rows of a big study: ~30 ms against ~0.1 ms).
    """
    from django.db import connection

    if connection.vendor != "postgresql":
        return list(Trace.objects.filter(study=study).values_list("model", flat=True).distinct().order_by("model"))
    table = Trace._meta.db_table
    sql = f"""
        WITH RECURSIVE m(model) AS (
            (SELECT model FROM {table} WHERE study_id = %s ORDER BY model LIMIT 1)
            UNION ALL
            SELECT (SELECT t.model FROM {table} t WHERE t.study_id = %s AND t.model > m.model ORDER BY t.model LIMIT 1)
            FROM m WHERE m.model IS NOT NULL
        )
        SELECT model FROM m WHERE model IS NOT NULL"""
    with connection.cursor() as cur:
        cur.execute(sql, [study.pk, study.pk])
        return [row[0] for row in cur.fetchall()]


# Trace conditions that other apps contribute to the trace filters by name
# (e.g. scoring's "lucky_guess"): annotation is the lowest app and never
# imports the apps above it, so they register here from their AppConfig.ready.
# A condition takes (study, prefix) -- prefix is the path from the filtered
# model to Trace -- and returns an expression to filter on.
TraceCondition = Callable[[Study, str], Exists | Q]
_TRACE_CONDITIONS: dict[str, TraceCondition] = {}


def register_trace_condition(name: str, condition: TraceCondition) -> None:
    _TRACE_CONDITIONS[name] = condition


def lucky_guess_available() -> bool:
    return "lucky_guess" in _TRACE_CONDITIONS


TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    v = value.strip().lower()
    return True if v in TRUE else False if v in FALSE else None


def filter_traces(qs: QuerySet, params, study: Study, membership: Membership, *, prefix: str = "") -> QuerySet:
    """Apply the trace filters of ``params`` (a QueryDict or dict) to ``qs``.

    ``prefix`` is the path from the queryset's model to Trace (``"trace__"``
    for assignments). ``disagreement`` only shows a blinded annotator the
    traces they have finished, so it leaks nothing.
    """
    p = prefix
    if params.get("model"):
        qs = qs.filter(**{f"{p}model": params["model"]})
    if params.get("domain"):
        qs = qs.filter(**{f"{p}problem__domain": params["domain"]})
    if (v := _flag(params.get("answer_correct"))) is not None:
        qs = qs.filter(**{f"{p}answer_correct": v})
    if (v := _flag(params.get("flagged"))) is not None:
        qs = qs.filter(**{f"{p}flagged": v})
    for name, condition in _TRACE_CONDITIONS.items():
        if (v := _flag(params.get(name))) is not None:
            cond = condition(study, p)
            qs = qs.filter(cond if v else ~cond)
    user = membership.user
    mine_done = TraceReview.objects.filter(trace=OuterRef(f"{p}pk"), annotator=user, complete=True)
    if (v := _flag(params.get("needs_review"))) is not None:
        qs = qs.exclude(Exists(mine_done)) if v else qs.filter(Exists(mine_done))
    if (v := _flag(params.get("disagreement"))) is not None:
        cond = Q(**{f"{p}pk__in": traces_with_disagreement(study)})
        qs = qs.filter(cond) if v else qs.exclude(cond)
        if v and not sees_everything(membership):
            qs = qs.filter(Exists(mine_done))
    return qs
