"""The adjudication page: disagreements and their final verdicts."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.contrib import messages
from django.db.models import Prefetch, Q
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation import access
from annotation.models import Membership, Step, StepLabel, Study
from annotation.paging import CountedPaginator
from annotation.rendering import render_markdown
from annotation.review.adjudication import disagreement_count, disagreement_steps, do_adjudicate
from annotation.review.base import VIA_WEB, Conflict, ReviewError
from annotation.review.filters import study_models
from annotation.review.visibility import source_name
from annotation.views.base import member_view, page_query, safe_next, study_for
from reasonlib.ids import is_id

#: The adjudication page's "Show" filter (?status=): the words the page shows; "resolved" is the older name.
ADJUDICATION_SHOW = {"open": "open", "settled": "resolved", "resolved": "resolved", "all": "all"}


@member_view
@require_GET
def adjudication(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = study_for(request, study_id)
    access.check_adjudicator(membership, "adjudication")
    return _adjudication_page(request, study, membership)


def _adjudication_page(request: HttpRequest, study: Study, membership: Membership, *, failed: dict | None = None,
                       status: int = 200, next_url: str = "") -> HttpResponse:
    """The page of disagreements, filtered by the query string (``status``, ``model``, ``page``). ``failed``
    re-shows one item as it was posted, with its error, when a plain (non-htmx) post was refused."""
    show = request.GET.get("status", "open")
    if show not in ADJUDICATION_SHOW:
        show = "open"
    model = request.GET.get("model", "")
    qs = disagreement_steps(study, ADJUDICATION_SHOW[show], model)
    qs = qs.select_related("trace__problem__approved_skeleton").prefetch_related(
        Prefetch("labels", queryset=StepLabel.objects.select_related("annotator", "judge").order_by("kind", "pk"))
    )
    count = disagreement_count(study, ADJUDICATION_SHOW[show], model)
    page = CountedPaginator(qs, 20, count=count).get_page(request.GET.get("page"))
    items = []
    for step in page:
        if failed and failed["step"] == step.pk:
            items.append(_adjudication_item(step, study, failed["error"], failed["level"], posted=failed["posted"]))
            failed = None
        else:
            items.append(_adjudication_item(step, study))
    if failed:  # the refused step is not on this page of the filter: show it first, so the error is seen
        step = qs.model.objects.select_related("trace__problem").prefetch_related(
            Prefetch("labels", queryset=StepLabel.objects.select_related("annotator", "judge").order_by("kind", "pk"))
        ).get(pk=failed["step"])
        items.insert(0, _adjudication_item(step, study, failed["error"], failed["level"], posted=failed["posted"]))
    _add_steps_before(items)
    context = {"study": study, "membership": membership, "page": page, "items": items, "status": show,
               "query": page_query(request), "models": study_models(study), "model": request.GET.get("model", ""),
               "next_url": next_url or request.get_full_path()}
    return render(request, "annotation/adjudication.html", context, status=status)


#: How many steps before a disputed step its adjudication item shows (a claim often rests on the step before it).
STEPS_BEFORE = 3


def _add_steps_before(items: list[dict]) -> None:
    """Each item's ``before``: the disputed step's last STEPS_BEFORE predecessors in its trace, read for the whole
    page in one query (a thought can have thousands of steps: never the whole prefix)."""
    if not items:
        return
    wanted = Q()
    for item in items:
        step = item["step"]
        wanted |= Q(trace_id=step.trace_id, index__gte=step.index - STEPS_BEFORE, index__lt=step.index)
    before: dict[int, list[Step]] = {}
    for s in Step.objects.filter(wanted).only("pk", "trace_id", "index", "text", "channel").order_by("trace_id", "index"):
        before.setdefault(s.trace_id, []).append(s)
    for item in items:
        step = item["step"]
        item["before"] = [s for s in before.get(step.trace_id, []) if step.index - STEPS_BEFORE <= s.index < step.index]


def _adjudication_item(step: Step, study: Study, error: str = "", level: str = "", *, posted: dict | None = None) -> dict:
    """One disagreement. ``posted`` (verdict, refs, reason) is what a refused post sent: the form shows it
    again rather than the stored decision, so nothing typed is lost (issue 23 #11)."""
    labels = list(step.labels.all())
    final = next((lab for lab in labels if lab.kind == StepLabel.Kind.ADJUDICATION), None)
    shown = [
        {"source": source_name(lab), "kind": lab.kind, "verdict": lab.verdict, "refs": lab.skeleton_refs or [],
         "reason_html": render_markdown(lab.reason), "confidence": lab.confidence,
         "primary": lab.kind == StepLabel.Kind.JUDGE and lab.judge_id == study.primary_judge_id}
        for lab in labels if lab.kind != StepLabel.Kind.ADJUDICATION
    ]
    return {"step": step, "trace": step.trace, "labels": shown, "final": final,
            "final_reason_html": render_markdown(final.reason) if final else "",
            "version": final.version if final else 0, "l_gold": step.trace.problem.l_gold,
            "positions": range(1, step.trace.problem.l_gold + 1), "error": error, "level": level,
            "form": posted or {"verdict": final.verdict if final else "",
                               "refs": (final.skeleton_refs or []) if final else [],
                               "reason": final.reason if final else ""},
            "refused": bool(posted)}


@member_view
@require_POST
def adjudicate(request: HttpRequest, step_id: int) -> HttpResponse:
    step, membership = access.check_object(request.user, Step.objects.select_related("trace__problem", "trace__study"),
                                           step_id, study_path="trace__study_id", what="step")
    study = membership.study
    access.check_adjudicator(membership, "adjudication")
    try:
        version = int(request.POST.get("version", "0"))
    except ValueError:
        version = -1
    refs = [int(r) for r in request.POST.getlist("refs") if is_id(r)]
    error, level, status = "", "ok", 200
    try:
        do_adjudicate(step, request.user, version=version, verdict=request.POST.get("verdict", ""),
                             skeleton_refs=refs, reason=request.POST.get("reason", ""), via=VIA_WEB)
        error = "Final verdict saved."
    except (ReviewError, Conflict) as exc:  # shown on the item in place, in the refusal's words and status
        error, status = str(exc), exc.status
        level = "conflict" if isinstance(exc, Conflict) else "error"
    posted = {"verdict": request.POST.get("verdict", ""), "refs": refs, "reason": request.POST.get("reason", "")}
    back = safe_next(request, reverse("adjudication", args=[study.pk]))
    if not request.htmx:
        if status == 200:
            messages.success(request, error)
            return redirect(back)
        if status == 400:
            # The page again, at the filters it was posted from, with this item as it was typed.
            request.GET = QueryDict(urlsplit(back).query)
            return _adjudication_page(request, study, membership, status=400, next_url=back,
                                      failed={"step": step.pk, "error": error, "level": level, "posted": posted})
        messages.error(request, error)
        return redirect(back)
    step = Step.objects.select_related("trace__problem").prefetch_related(
        Prefetch("labels", queryset=StepLabel.objects.select_related("annotator", "judge").order_by("kind", "pk"))
    ).get(pk=step.pk)
    item = _adjudication_item(step, study, error, level, posted=posted if status == 400 else None)
    _add_steps_before([item])
    return render(request, "annotation/adjudication.html#item", {"item": item, "study": study, "next_url": back},
                  status=status)
