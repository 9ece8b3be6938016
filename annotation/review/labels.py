"""An annotator's labels on a trace, with optimistic versions; the final
answer's verdict, flags and skips.

Each annotator has one ``TraceReview`` per trace; its ``version`` counts
the saves of their labels, rating and completeness. A save names the
version it started from; if the row moved on since (another tab, an API
script, an import), :class:`~annotation.review.base.Conflict` is raised and
nothing is written. Every label change appends a ``LabelHistory`` row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.db.models import FilteredRelation, Q
from django.utils import timezone

from annotation.models import LabelHistory, Step, StepLabel, Trace, TraceReview, Verdict
from annotation.review.base import NOTE_MAX, UNSET, VIA_API, VIA_WEB, Conflict, ReviewError, send_data_changed

_VIA_WORDS = {
    VIA_WEB: "in another browser tab or window",
    VIA_API: "through the API",
    "import": "by an import",
}


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


def conflict_message(review: TraceReview, sent: int) -> str:
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
        raise Conflict(conflict_message(review, version), current) if review else Conflict(
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
            raise Conflict(conflict_message(other, version), other.version) from None
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
    send_data_changed(trace.study_id)
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


@transaction.atomic
def do_set_answer(trace: Trace, user, value: bool | None, *, via: str = VIA_WEB) -> bool:
    trace = Trace.objects.select_for_update().get(pk=trace.pk)
    if not _answer_differs(trace, value):
        return False
    _set_answer(trace, user, value, via, timezone.now())
    send_data_changed(trace.study_id)
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
