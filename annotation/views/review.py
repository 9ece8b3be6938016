"""The review page of a trace: its steps in both channels, a long thought in blocks, saving labels."""

from __future__ import annotations

import json
import math

from django.contrib import messages
from django.db import transaction
from django.db.models import Case, F, TextField, Value, When
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh

from annotation.importing.regime import REGIME_KEYS
from annotation.models import Membership, SkeletonStep, Step, StepLabel, Trace, TraceReview, Verdict
from annotation.rendering import raw_with_boundaries, render_inline, render_markdown, step_rows_html
from annotation.review.base import UNSET, VIA_WEB, Conflict, ReviewError
from annotation.review.labels import LabelIn, do_flag, do_save_labels, do_skip
from annotation.review.panels import review_panels
from annotation.review.queues import next_trace_id
from annotation.review.tags import add_tags_to_rows, do_save_tags, posted_tags
from annotation.review.visibility import is_revealed, sees_everything, visible_label_rows
from annotation.views.base import member_view, trace_for
from reasonlib.ids import is_id
from reasonlib.refusals import FieldInvalid

#: Thought steps per collapsible block of the review page; a thought longer than one block is
#: shown in blocks whose rows htmx loads when they come into view (docs/review.md, "Long thoughts").
THOUGHT_BLOCK = 100


def _labels_by_step(trace: Trace, user, revealed: bool) -> tuple[dict[int, dict], dict[int, list[dict]]]:
    """My labels and the others' visible ones, by step pk (one query)."""
    mine: dict[int, dict] = {}
    others: dict[int, list[dict]] = {}
    for lab in visible_label_rows(trace, user, revealed):
        if lab["kind"] == StepLabel.Kind.HUMAN and lab["annotator_id"] == user.pk:
            mine[lab["step_id"]] = lab
        else:
            others.setdefault(lab["step_id"], []).append({
                "kind": lab["kind"], "source": lab["source"], "verdict": lab["verdict"],
                "refs": lab["skeleton_refs"] or [], "reason": lab["reason"], "confidence": lab["confidence"],
            })
    return mine, others


def _review_rows(steps, mine: dict[int, dict], others: dict[int, list[dict]], *, posted=None) -> list[dict]:
    """One dict per step (index, channel, text, my verdict/refs/note, the others' labels) in reading order."""
    rows = []
    for pk, index, text, _, _, channel in steps:
        if posted is not None and index in posted:
            verdict, refs, note = posted[index]
        else:
            lab = mine.get(pk)
            verdict, refs, note = (lab["verdict"], lab["skeleton_refs"] or [], lab["reason"]) if lab else ("", [], "")
        theirs = others.get(pk, [])
        rows.append({"index": index, "channel": channel, "text": text, "verdict": verdict, "refs": refs,
                     "note": note, "others": theirs,
                     "disagree": bool(verdict and any(o["verdict"] != verdict for o in theirs)),
                     # any two visible verdicts differ (mine or a judge's): "next disagreement" stops here
                     "conflict": _conflict(verdict, theirs)})
    return rows


def _conflict(verdict: str, theirs: list[dict]) -> bool:
    """Two visible verdicts of a step differ (mine, if any, and the others')."""
    first = verdict
    for o in theirs:
        if not first:
            first = o["verdict"]
        elif o["verdict"] != first:
            return True
    return False


def thought_blocks(steps, mine: dict[int, dict], others: dict[int, list[dict]], *, posted=None,
                   size: int = THOUGHT_BLOCK) -> list[dict]:
    """The label summary of each block of ``size`` thought steps (what a collapsed block shows), with
    no per-step objects: a 5,000-step thought must cost little more than a short trace."""
    blocks: list[dict] = []
    for n, (pk, index, *_rest) in enumerate(steps):
        if n % size == 0:
            blocks.append({"number": len(blocks) + 1, "first": index, "last": index, "n": 0, "labelled": 0,
                           "counts": dict.fromkeys(Verdict.values, 0), "first_invalid": 0, "conflicts": 0})
        b = blocks[-1]
        if posted is not None and index in posted:
            verdict = posted[index][0]
        else:
            lab = mine.get(pk)
            verdict = lab["verdict"] if lab else ""
        b["last"] = index
        b["n"] += 1
        if verdict in b["counts"]:
            b["counts"][verdict] += 1
            b["labelled"] += 1
            if verdict == Verdict.INVALID and not b["first_invalid"]:
                b["first_invalid"] = index
        theirs = others.get(pk)
        if theirs and _conflict(verdict, theirs):
            b["conflicts"] += 1
    for b in blocks:
        b["unlabelled"] = b["n"] - b["labelled"]
    return blocks


def _my_choice(pk: int, index: int, mine: dict[int, dict], posted) -> tuple[str, list[int] | tuple[()]]:
    if posted is not None and index in posted:
        return posted[index][0], posted[index][1]
    lab = mine.get(pk)
    return (lab["verdict"], lab["skeleton_refs"] or ()) if lab else ("", ())


def _review_context(request: HttpRequest, trace: Trace, membership: Membership, *, posted=None,
                    posted_tags=None) -> dict:
    """Everything the review page shows, in a fixed number of queries."""
    user = request.user
    my_review = TraceReview.objects.filter(trace=trace, annotator=user).first()
    revealed = is_revealed(membership, my_review)
    skeleton_steps = (
        list(SkeletonStep.objects.filter(skeleton_id=trace.problem.approved_skeleton_id).order_by("position"))
        if trace.problem.approved_skeleton_id else []
    )
    # A long thought is shown in blocks loaded on demand; the answer's rows are always on the page.
    windowed = trace.n_thought_steps > THOUGHT_BLOCK
    steps_qs = trace.steps.order_by("index")
    if windowed:  # the blocks' texts come with the blocks: not read here
        steps_qs = steps_qs.annotate(shown=Case(When(channel=Step.Channel.THOUGHT, then=Value("")), default=F("text"),
                                                output_field=TextField()))
    steps = list(steps_qs.values_list("pk", "index", "shown" if windowed else "text", "start", "end", "channel"))
    mine, others = _labels_by_step(trace, user, revealed)
    thought_steps = [s for s in steps if s[5] == Step.Channel.THOUGHT]
    answer_steps = [s for s in steps if s[5] != Step.Channel.THOUGHT]
    # The rows on the page: all of them, or the answer's when the thought comes in blocks.
    rows = _review_rows(answer_steps if windowed else steps, mine, others, posted=posted)
    blocks = thought_blocks(thought_steps, mine, others, posted=posted) if windowed else []
    add_tags_to_rows(rows, trace, user, revealed, posted=posted_tags)
    first_error = None
    covered: set[int] = set()
    labelled = 0
    # Over every step, from the rows; a windowed thought from my labels (posted ones after a refused save).
    if not windowed:
        verdicts = ((r["index"], r["verdict"], r["refs"]) for r in rows)
    elif posted is None:
        index_of = {pk: index for pk, index, *_ in steps}
        verdicts = sorted((index_of[pk], lab["verdict"], lab["skeleton_refs"] or ()) for pk, lab in mine.items()
                          if pk in index_of)
    else:
        verdicts = ((index, *_my_choice(pk, index, mine, posted)) for pk, index, *_ in steps)
    for index, verdict, refs in verdicts:
        if verdict:
            labelled += 1
        if verdict == Verdict.INVALID and first_error is None:
            first_error = index
        if verdict == Verdict.VALID:
            covered.update(refs)
    positions = [k.position for k in skeleton_steps]
    page_rows = [r for r in rows if r["channel"] != Step.Channel.THOUGHT]
    return {
        "trace": trace, "study": trace.study, "problem": trace.problem, "membership": membership,
        "review": my_review, "version": my_review.version if my_review else 0, "revealed": revealed,
        "blind_hidden": not revealed, "sees_everything": sees_everything(membership),
        "skeleton": [{"position": k.position, "html": render_inline(k.text), "covered": k.position in covered}
                     for k in skeleton_steps],
        "positions": positions, "rows": rows, "n_rows": len(steps), "labelled": labelled, "first_error": first_error,
        "rows_html": step_rows_html(page_rows, positions, first_error),
        "windowed": windowed, "blocks": blocks, "n_thought": trace.n_thought_steps,
        "block_url": reverse("trace-thought", args=[trace.pk]),
        "thought_rows_html": (step_rows_html([r for r in rows if r["channel"] == Step.Channel.THOUGHT], positions,
                                             first_error) if trace.n_thought_steps and not windowed else ""),
        "coverage": len(covered & set(positions)),
        "statement_html": render_markdown(trace.problem.statement),
        "raw_html": raw_with_boundaries(trace.raw, [(index, start, end) for _, index, _, start, end, _ in answer_steps]),
        "has_offsets": any(start is not None for _, _, _, start, _, _ in answer_steps),
        # The separate reasoning field with its thought steps marked (all of them loaded only when not windowed).
        "thought_raw_html": raw_with_boundaries(trace.thought, [(i, a, b) for _, i, _, a, b, _ in thought_steps])
        if trace.n_thought_steps and not windowed else "",
        "regime_rows": regime_rows(trace.regime or {}),
        "verdicts": Verdict.values, "flags": [f for f in TraceReview.Flag.choices if f[0]],
        "ratings": range(11),
        # What other apps show of the trace (annotation.review.panels: step importance, ...).
        "review_panels": review_panels(request, trace, membership),
    }


@member_view
@require_GET
def trace_thought(request: HttpRequest, trace_id: int) -> HttpResponse:
    """The rows of one block of a long thought (``?block=k``, the review page's htmx loads), or with
    ``?q=text`` the steps of both channels whose text contains it (JSON: the page's search)."""
    trace, membership = trace_for(request, trace_id)
    query = request.GET.get("q")
    if query is not None:
        query = query.strip()
        if not query:
            return JsonResponse({"q": "", "steps": []})
        hits = list(trace.steps.filter(text__icontains=query).order_by("index").values_list("index", flat=True)[:5000])
        return JsonResponse({"q": query, "steps": hits})
    text = request.GET.get("block", "")
    if not text.isascii() or not text.isdigit():  # the refusal family's 400 (annotation.middleware), not a hand one
        raise FieldInvalid("block", "give the block's number (1, 2, ...)")
    block = int(text)
    first = (block - 1) * THOUGHT_BLOCK + 1
    last = min(trace.n_thought_steps, block * THOUGHT_BLOCK)
    if block < 1 or first > trace.n_thought_steps:
        return HttpResponse(f"block: this thought has {math.ceil(trace.n_thought_steps / THOUGHT_BLOCK)} block(s)",
                            status=404, content_type="text/plain")
    my_review = TraceReview.objects.filter(trace=trace, annotator=request.user).first()
    revealed = is_revealed(membership, my_review)
    steps = list(trace.steps.filter(index__gte=first, index__lte=last).order_by("index")
                 .values_list("pk", "index", "text", "start", "end", "channel"))
    mine, others = _labels_by_step(trace, request.user, revealed)
    rows = _review_rows(steps, mine, others)
    add_tags_to_rows(rows, trace, request.user, revealed)
    positions = list(SkeletonStep.objects.filter(skeleton_id=trace.problem.approved_skeleton_id)
                     .order_by("position").values_list("position", flat=True)) if trace.problem.approved_skeleton_id else []
    first_error = next((r["index"] for r in rows if r["verdict"] == Verdict.INVALID), None)
    return HttpResponse(step_rows_html(rows, positions, first_error))


def regime_rows(values: dict) -> list[tuple[str, str | None]]:
    """The regime's keys in the spec's order (PostgreSQL's jsonb keeps no order), then the source's own;
    lists and numbers as JSON (["Question:"], 0.0), not Python's repr; None stays None ("not recorded")."""
    keys = [k for k in REGIME_KEYS if k in values] + sorted(k for k in values if k not in REGIME_KEYS)
    return [(k, values[k] if isinstance(values[k], str) or values[k] is None else json.dumps(values[k])) for k in keys]


@member_view
@require_GET
def trace(request: HttpRequest, trace_id: int) -> HttpResponse:
    trace, membership = trace_for(request, trace_id)
    return render(request, "annotation/review.html", _review_context(request, trace, membership))


def _posted_labels(request: HttpRequest, trace: Trace) -> tuple[dict, list[LabelIn], list[tuple[str, str]]]:
    posted: dict[int, tuple[str, list[int], str]] = {}
    labels: list[LabelIn] = []
    errors: list[tuple[str, str]] = []
    # A page that shows a long thought in blocks posts only the blocks it loaded: the steps it did
    # not show keep my labels as they are (every shown step posts its verdict radio, even "none").
    windowed = request.POST.get("windowed") == "1"
    kept: dict[int, tuple[str, list[int], str]] = {}
    if windowed:
        kept = {index: (verdict, list(refs or []), reason or "") for index, verdict, refs, reason in StepLabel.objects.filter(
            step__trace=trace, kind=StepLabel.Kind.HUMAN, annotator=request.user,
        ).values_list("step__index", "verdict", "skeleton_refs", "reason")}
    for i in range(1, trace.n_steps + 1):
        if windowed and f"v{i}" not in request.POST:
            if i in kept:
                verdict, refs, note = kept[i]
                labels.append(LabelIn(i, verdict, refs, note))
            continue
        verdict = request.POST.get(f"v{i}", "")
        refs = []
        for r in request.POST.getlist(f"r{i}"):
            if is_id(r):
                refs.append(int(r))
        note = request.POST.get(f"n{i}", "")
        posted[i] = (verdict, refs, note)
        if verdict:
            labels.append(LabelIn(i, verdict, refs, note))
        elif note.strip():
            errors.append((f"step {i}", "has a note but no verdict"))
    return posted, labels, errors


_REVIEW_ACTIONS = {"save", "next", "skip", *(f"flag:{v}" for v in TraceReview.Flag.values)}


def _answer_choice(value: str):
    return {"correct": True, "wrong": False, "auto": None}.get(value, UNSET)


@member_view
@require_POST
def trace_review(request: HttpRequest, trace_id: int) -> HttpResponse:
    """Save my labels (htmx or plain form), then stay, go to the next trace,
    skip, or flag. Answers 409 when the page's version is stale."""
    trace, membership = trace_for(request, trace_id)
    action = request.POST.get("action", "save")
    if action not in _REVIEW_ACTIONS:
        action = "save"
    posted, labels, errors = _posted_labels(request, trace)
    tags = posted_tags(request.POST, trace.n_steps)
    try:
        version = int(request.POST.get("version", "0"))
    except ValueError:
        version = -1
    rating_raw = request.POST.get("rating", "").strip()
    try:
        rating = float(rating_raw) if rating_raw else None
    except ValueError:
        errors.append(("rating", "a rating is a number from 0 to 10"))
        rating = None
    message, status, result = "", 200, None
    if not errors:
        try:
            with transaction.atomic():  # labels and step-function tags: one save, one version
                result = do_save_labels(
                    trace, request.user, version=version, labels=labels, rating=rating,
                    answer_correct=_answer_choice(request.POST.get("answer", "")), via=VIA_WEB,
                )
                tagged = do_save_tags(trace, request.user, tags=tags, via=VIA_WEB,
                                      version=result.review.version if result.review else version)
                if tagged.review is not None:
                    result.review = tagged.review
        except ReviewError as exc:
            errors = exc.errors
        except Conflict as exc:
            message, status = str(exc), exc.status
    if errors:
        message, status = "Not saved: " + "; ".join(f"{f} {m}" if f.startswith("step") else f"{f}: {m}"
                                                   for f, m in errors), 400
    if status == 200:
        if action == "skip":
            do_skip(trace, request.user, True)
        elif action.startswith("flag:"):
            do_flag(trace, request.user, action[5:])
        if action in ("next", "skip"):
            nxt = next_trace_id(trace.study, request.user, after=trace)
            url = reverse("trace", args=[nxt]) if nxt else reverse("queue", args=[trace.study_id]) + "?done=1"
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
        if request.htmx and result and result.became_complete and not sees_everything(membership):
            # The others' labels are now visible: reload the page to show them.
            messages.success(request, "Trace complete: the other labels are now shown beside yours.")
            return HttpResponseClientRefresh()
        rev = result.review if result else None
        saved = rev.version if rev else version
        if action.startswith("flag:"):
            message = "Flag cleared." if action == "flag:" else f"Flagged: {dict(TraceReview.Flag.choices)[action[5:]]}."
        elif result and result.changed_labels == 0 and rev is None:
            message = "Nothing to save yet."
        else:
            message = f"Saved (version {saved}) · {len(labels)}/{trace.n_steps} steps labelled" + (
                " · complete" if rev and rev.complete else "")
        if not request.htmx:
            messages.success(request, message)
            return redirect("trace", trace_id=trace.pk)
        return render(request, "annotation/review.html#status",
                      {"message": message, "level": "ok", "version": saved, "oob": True})
    # 400 or 409
    if request.htmx:
        return render(request, "annotation/review.html#status",
                      {"message": message, "level": "conflict" if status == 409 else "error",
                       "reload_url": reverse("trace", args=[trace.pk]) if status == 409 else ""},
                      status=status)
    context = _review_context(request, trace, membership, posted=None if status == 409 else posted,
                              posted_tags=None if status == 409 else tags)
    context.update({"message": message, "level": "conflict" if status == 409 else "error"})
    return render(request, "annotation/review.html", context, status=status)


# --------------------------------------------------------------------------
