"""An annotator's step-function tags on a trace (reasonlib.step_functions: what a step *does*), and which
tags of a trace a member may see.

Tags belong to the annotator's review of the trace: a save names the review's ``version`` (the one
``TraceReview`` row the labels lock on, annotation.review.labels) and moves it on, so a stale tab or
script gets the same :class:`~annotation.review.base.Conflict` as a stale label save and nothing is
written. The review page saves labels and tags in one request: :func:`do_save_tags` runs after
``do_save_labels`` in the same transaction, from the version that save left.

Blind mode: a member sees her own tags; the other sources' (peers, judges, published analyses) only
where she sees their labels -- the same ``revealed`` of annotation.review.visibility on one trace, and
the gate (annotation.gate) across traces.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.models import Step, StepTag, Trace, TraceReview
from annotation.review.base import VIA_WEB, Conflict, ReviewError, send_data_changed
from annotation.review.labels import conflict_message
from reasonlib.step_functions import FUNCTION_LABELS, FUNCTION_NAMES


def clean_tags(trace: Trace, tags: Mapping[int, Iterable[str]]) -> dict[int, frozenset[str]]:
    """The tags by step number, checked: every step a step of ``trace``, every tag one of the eight."""
    errors: list[tuple[str, str]] = []
    out: dict[int, frozenset[str]] = {}
    for step, names in tags.items():
        where = f"steps[{step}]"
        if not isinstance(step, int) or isinstance(step, bool) or not 1 <= step <= trace.n_steps:
            errors.append((f"{where}.step", f"{step!r} is not a step of this trace (1..{trace.n_steps})"))
            continue
        names = list(names)
        bad = [n for n in names if n not in FUNCTION_LABELS]
        if bad:
            errors.append((f"{where}.tags", f"{bad[0]!r} is not one of {', '.join(FUNCTION_NAMES)}"))
            continue
        out[step] = frozenset(names)
    if errors:
        raise ReviewError(errors)
    return out


@dataclass
class TagSaveResult:
    review: TraceReview | None
    added: int
    removed: int


@transaction.atomic
def do_save_tags(trace: Trace, user, *, version: int, tags: Mapping[int, Iterable[str]],
                 via: str = VIA_WEB) -> TagSaveResult:
    """Set ``user``'s tags of the steps named in ``tags`` (step number -> tag names; an empty set clears a
    step; steps not named keep theirs), if ``version`` is still the review's. A change moves the version
    on by one; no change writes nothing."""
    cleaned = clean_tags(trace, tags)
    review = TraceReview.objects.select_for_update().filter(trace=trace, annotator=user).first()
    current = review.version if review else 0
    if version != current:
        raise Conflict(conflict_message(review, version), current) if review else Conflict(
            f"This trace has no labels of yours yet (version 0); this page had version {version}. Reload it.", 0)
    if not cleaned:
        return TagSaveResult(review, 0, 0)
    step_pks = dict(Step.objects.filter(trace=trace, index__in=list(cleaned)).values_list("index", "pk"))
    have: dict[int, set[str]] = {}
    for step_id, tag in StepTag.objects.filter(step_id__in=list(step_pks.values()), kind=StepTag.Kind.HUMAN,
                                               annotator=user).values_list("step_id", "tag"):
        have.setdefault(step_id, set()).add(tag)
    now = timezone.now()
    added: list[StepTag] = []
    removed: list[tuple[int, str]] = []
    for index, wanted in cleaned.items():
        step_id = step_pks[index]
        old = have.get(step_id, set())
        added += [StepTag(step_id=step_id, kind=StepTag.Kind.HUMAN, annotator=user, tag=t, created_at=now)
                  for t in sorted(wanted - old)]
        removed += [(step_id, t) for t in sorted(old - wanted)]
    if not (added or removed):
        return TagSaveResult(review, 0, 0)
    if review is None:
        try:
            with transaction.atomic():
                review = TraceReview.objects.create(trace=trace, annotator=user, version=1, updated_at=now,
                                                    updated_via=via)
        except IntegrityError:  # created by another request between our read and our insert
            other = TraceReview.objects.get(trace=trace, annotator=user)
            raise Conflict(conflict_message(other, version), other.version) from None
    else:
        review.version += 1
        review.updated_at, review.updated_via = now, via
        review.save(update_fields=["version", "updated_at", "updated_via"])
    for step_id, tag in removed:
        StepTag.objects.filter(step_id=step_id, kind=StepTag.Kind.HUMAN, annotator=user, tag=tag).delete()
    StepTag.objects.bulk_create(added)
    send_data_changed(trace.study_id)
    return TagSaveResult(review, len(added), len(removed))


def my_tags(trace: Trace, user) -> dict[int, list[str]]:
    """``user``'s tags by step number, each step's in the taxonomy's order."""
    out: dict[int, list[str]] = {}
    for index, tag in StepTag.objects.filter(step__trace=trace, kind=StepTag.Kind.HUMAN, annotator=user).values_list(
            "step__index", "tag"):
        out.setdefault(index, []).append(tag)
    order = {name: i for i, name in enumerate(FUNCTION_NAMES)}
    return {index: sorted(names, key=order.__getitem__) for index, names in sorted(out.items())}


def visible_tag_rows(trace: Trace, user, revealed: bool) -> list[dict]:
    """The tags of ``trace`` this user may see, as plain dicts (step index, kind, source name, tag): her
    own, and every source's once ``revealed`` (annotation.review.visibility.is_revealed)."""
    qs = StepTag.objects.filter(step__trace=trace)
    if not revealed:
        qs = qs.filter(kind=StepTag.Kind.HUMAN, annotator=user)
    rows = list(qs.order_by("step__index", "kind", "annotator__username", "judge__name", "origin", "tag").values(
        "step__index", "kind", "annotator_id", "annotator__username", "judge__name", "origin", "tag"))
    for r in rows:
        r["step"] = r.pop("step__index")
        r["mine"] = r["kind"] == StepTag.Kind.HUMAN and r["annotator_id"] == user.pk
        r["source"] = tag_source_name(r["kind"], r["annotator__username"], r["judge__name"], r["origin"])
    return rows


def tag_source_name(kind: str, username: str | None, judge_name: str | None, origin: str) -> str:
    """A tag source's name as the pages, the API and the agreement tables write it:
    ``annotator:NAME``, ``judge:NAME`` or ``imported:ORIGIN``."""
    if kind == StepTag.Kind.JUDGE:
        return f"judge:{judge_name}"
    if kind == StepTag.Kind.IMPORTED:
        return f"imported:{origin}"
    return f"annotator:{username}"


def tags_by_step(trace: Trace, user, revealed: bool) -> tuple[dict[int, list[str]], dict[int, list[dict]]]:
    """Mine and the others' visible tags, by step number (one query): what the review page's rows show."""
    mine: dict[int, list[str]] = {}
    others: dict[int, list[dict]] = {}
    for r in visible_tag_rows(trace, user, revealed):
        if r["mine"]:
            mine.setdefault(r["step"], []).append(r["tag"])
        else:
            others.setdefault(r["step"], []).append({"source": r["source"], "kind": r["kind"], "tag": r["tag"]})
    return mine, others


def add_tags_to_rows(rows: list[dict], trace: Trace, user, revealed: bool, *,
                     posted: Mapping[int, Iterable[str]] | None = None) -> None:
    """Put each review row's tags in it: ``tags`` (mine, or what a refused save posted) and ``other_tags``."""
    mine, others = tags_by_step(trace, user, revealed)
    for r in rows:
        index = r["index"]
        r["tags"] = list(posted[index]) if posted is not None and index in posted else mine.get(index, [])
        r["other_tags"] = others.get(index, [])


def posted_tags(post, n_steps: int) -> dict[int, list[str]]:
    """The review form's tags (``f{i}``, one value per checked tag) of the steps the page showed: a shown
    step posts its verdict radio (``v{i}``, even "none"), so a step with no ``f{i}`` and a ``v{i}`` has no
    tags, and a step the page did not load (a long thought's closed block) keeps its tags."""
    return {i: post.getlist(f"f{i}") for i in range(1, n_steps + 1) if f"v{i}" in post}
