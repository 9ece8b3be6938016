"""Counts over every trace and label of a study that pages need on each request: the review
progress of the study list and the study page (traces, reviewed completely by me and by anyone,
judged, open disagreements), the disagreement steps (adjudication, the disagreement filter), the
traces per model and domain (analytics, the study page's table), each judge's labels and
disagreements (the judges' pages), and who reviewed a trace of the study and the models of its traces
(the agreement pages' menus of sources and models).

Only "mine" depends on who asks. The rest group every trace and label of the study (seconds at a
million labels), so the score job, which every change of the data queues, stores them
(annotation.study_summary_writer.refresh, hooked in by scoring.apps) in a StudySummary row, and the change itself
marks the row stale (``invalidate``, on annotation.signals.data_changed). A page reads the row when there is
one, and counts from the data only when there is none (a study never scored). While the row is stale, the page
says when its counts were computed and that the score job is recomputing them (``status``,
templates/annotation/_summary_status.html): it never shows numbers older than the data as current. Counting
from the data instead took a minute or more a page at a million traces, for as long as the job ran (twelve
minutes there) after every label (issue 33).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Sum
from django.utils import timezone

from annotation.models import (
    Membership,
    Problem,
    Step,
    StepLabel,
    Study,
    StudySummary,
    SummaryDisagreement,
    Trace,
    TraceReview,
)

#: The counts a StudySummary holds as they are (every key of a study's progress but "mine" and "disagreements").
STORED = ("traces", "anyone", "judged")
#: The key of the stored disagreement steps per model of their trace, adjudicated or not. The open disagreements a
#: page shows are these less the adjudicated ones among them, counted when read (a few rows: people adjudicate one
#: step at a time), so an adjudication changes nothing stored (``invalidate``) and the adjudication page, reloaded
#: after each decision, keeps reading the stored steps instead of grouping every label of the study (issue 33).
DISAGREEMENT_STEPS = "disagreement_steps"


def study_progress(study_ids: list[int], user, stored: dict[int, dict] | None = None) -> dict[int, dict[str, int]]:
    """Per study: the STORED counts (from its summary, else counted) and "mine".
    A fixed number of grouped queries. ``stored``: the studies' summaries (study id -> counts)
    when the caller has read them already (stored_counts)."""
    out: dict[int, dict[str, int]] = {
        sid: {"traces": 0, "mine": 0, "anyone": 0, "judged": 0, "disagreements": 0} for sid in study_ids
    }
    if not study_ids:
        return out
    if stored is None:
        stored = dict(StudySummary.objects.filter(study_id__in=study_ids).values_list("study_id", "counts"))
    stored = {sid: counts for sid, counts in stored.items() if DISAGREEMENT_STEPS in counts}  # else written before
    adjudicated = adjudicated_in_stored(list(stored))
    for sid, counts in stored.items():
        out[sid].update({key: counts[key] for key in STORED})
        out[sid]["disagreements"] = sum(counts[DISAGREEMENT_STEPS].values()) - adjudicated.get(sid, 0)
    live = [sid for sid in study_ids if sid not in stored]
    if live:
        for sid, counts in count(live).items():
            out[sid].update(counts)
    own = Trace.objects.filter(study_id__in=study_ids).own().values("pk")  # benchmark items are not progress
    complete = TraceReview.objects.filter(trace__in=own, complete=True)
    for sid, n in complete.filter(annotator=user).values("trace__study").annotate(n=Count("pk")).values_list("trace__study", "n"):
        out[sid]["mine"] = n
    return out


def count(study_ids: list[int], *, disagreements: bool = True) -> dict[int, dict[str, int]]:
    """The STORED counts and (``disagreements``) the open disagreements of each study, from the data."""
    out = {sid: dict.fromkeys((*STORED, "disagreements"), 0) for sid in study_ids}
    for sid, n in Trace.objects.filter(study_id__in=study_ids).own().values("study").annotate(n=Count("pk")) \
            .values_list("study", "n"):
        out[sid]["traces"] = n
    # Every count is of the study's own traces: a suite's variants and a benchmark's items are counted on their pages.
    own = Trace.objects.filter(study_id__in=study_ids).own()
    complete = TraceReview.objects.filter(trace__in=own.values("pk"), complete=True)
    for sid, n in complete.values("trace__study").annotate(n=Count("trace", distinct=True)).values_list("trace__study", "n"):
        out[sid]["anyone"] = n
    judged = own.filter(
        Exists(StepLabel.objects.filter(step__trace=OuterRef("pk"), kind=StepLabel.Kind.JUDGE))
    )
    for sid, n in judged.values("study").annotate(n=Count("pk")).values_list("study", "n"):
        out[sid]["judged"] = n
    if not disagreements:
        return out
    # One query for every study: steps whose human labels (and the study's
    # primary judge) disagree on the verdict, not yet adjudicated.
    steps = (
        StepLabel.objects.filter(step__trace__in=own.values("pk"))
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


def adjudicated_in_stored(study_ids: list[int], model: str = "") -> dict[int, int]:
    """Per study, its stored disagreement steps (of ``model``'s traces, if given) that have a final verdict: driven
    from the adjudications (the partial unique index of their steps), each probing the stored steps' (study, step)
    index."""
    if not study_ids:
        return {}
    final = StepLabel.objects.filter(kind=StepLabel.Kind.ADJUDICATION, step=OuterRef("step"))
    stored = SummaryDisagreement.objects.filter(study_id__in=study_ids).filter(Exists(final))
    if model:
        stored = stored.filter(trace__model=model)
    return dict(stored.values("study").annotate(n=Count("pk")).values_list("study", "n"))


def stored_disagreements(study: Study) -> QuerySet | None:
    """The stored disagreement steps of the study (SummaryDisagreement rows), or None when none are stored
    (no StudySummary: never stored). Stale ones too: the page says so (``status``)."""
    if stored_disagreement_counts(study) is None:
        return None
    return SummaryDisagreement.objects.filter(study=study)


def stored_disagreement_counts(study: Study) -> dict[str, int] | None:
    """The stored disagreement steps per model of their trace, adjudicated or not, or None when none are stored
    (or the summary was written before they were counted)."""
    counts = stored_counts(study)
    return None if counts is None or DISAGREEMENT_STEPS not in counts else dict(counts[DISAGREEMENT_STEPS])


def disagreement_steps_by_model(study: Study) -> dict[str, int]:
    """The stored disagreement steps per model of their trace (the writer's count, after it stored them)."""
    return dict(SummaryDisagreement.objects.filter(study=study).values("trace__model").annotate(n=Count("pk"))
                .order_by().values_list("trace__model", "n"))


def by_model_and_domain(study: Study) -> list[tuple[str, str, int, int, int]]:
    """(model, domain, traces, answers correct, traces with steps) of the study's own traces."""
    return [tuple(row) for row in (
        Trace.objects.filter(study=study).own()  # suite variants' traces belong to their suite
        .values_list("model", "problem__domain")
        .annotate(traces=Count("id"), correct=Count("id", filter=Q(answer_correct=True)),
                  with_steps=Count("id", filter=Q(n_steps__gt=0)))
        .order_by()
    )]


def by_model(study: Study) -> dict:
    """The study page's table: per model its own traces, answers checked and correct and steps (each trace's
    n_steps, both channels, as the review checks completeness against: not a join of every step
    row), and the number of the study's own problems."""
    rows = list(Trace.objects.filter(study=study).own().values("model").annotate(
        traces=Count("id"), correct=Count("id", filter=Q(answer_correct=True)), steps=Sum("n_steps"),
        checked=Count("id", filter=Q(answer_correct__isnull=False)),
    ).order_by("model"))
    for row in rows:
        row["steps"] = row["steps"] or 0
    return {"models": rows, "problems": Problem.objects.filter(study=study).own().count()}


def stored_counts(study: Study) -> dict | None:
    """The study's summary as the score job stored it (every count of this module), or None when
    none is stored. A stale one too (``status`` says so)."""
    return StudySummary.objects.filter(study=study).values_list("counts", flat=True).first()


@dataclass(frozen=True)
class Stored:
    """The study's summary as one query reads it: its counts, when they were computed, and whether (since when)
    the data changed since."""

    counts: dict
    computed_at: datetime
    stale: bool
    marked_at: datetime | None

    @property
    def status(self) -> dict | None:
        """As ``status`` gives it: None when current."""
        return {"computed_at": self.computed_at, "marked_at": self.marked_at} if self.stale else None


def stored(study: Study) -> Stored | None:
    """The study's summary with its times, or None when none is stored: for a page that shows the counts and the
    note in one query (the study page, the subject models' table)."""
    row = StudySummary.objects.filter(study=study).values_list("counts", "computed_at", "stale", "marked_at").first()
    return None if row is None else Stored(*row)


def status(study_ids: list[int]) -> dict[int, dict]:
    """Per study with a stale summary: when its counts were computed and when the data last changed since
    (``computed_at``, ``marked_at``), for the pages that show them (templates/annotation/_summary_status.html).
    A study with a current summary, or none, is not in the answer."""
    rows = StudySummary.objects.filter(study_id__in=study_ids, stale=True) \
        .values_list("study_id", "computed_at", "marked_at")
    return {sid: {"computed_at": computed, "marked_at": marked} for sid, computed, marked in rows}


def judge_counts(study: Study) -> dict[str, list[int]]:
    """Judge id (as text: a JSON key) -> [its labels, the steps where its verdict differs from at
    least one annotator's] (judges.services.judge_list and a judge's page)."""
    labels = StepLabel.objects.filter(kind=StepLabel.Kind.JUDGE, judge__study=study)
    out = {str(judge): [n, 0] for judge, n in labels.values("judge").annotate(n=Count("pk")).values_list("judge", "n")}
    human_differs = StepLabel.objects.filter(step=OuterRef("step"), kind=StepLabel.Kind.HUMAN).exclude(
        verdict=OuterRef("verdict"))
    for judge, n in labels.filter(Exists(human_differs)).values("judge").annotate(n=Count("pk")) \
            .values_list("judge", "n"):
        out.setdefault(str(judge), [0, 0])[1] = n
    return out


def stored_judge_counts(study: Study) -> dict[int, tuple[int, int]] | None:
    """judge_counts as the score job stored them (a judge without labels has no entry), else None."""
    counts = StudySummary.objects.filter(study=study).values_list("counts", flat=True).first()
    if counts is None or "judges" not in counts:  # none stored, or written before judges were counted
        return None
    return {int(k): (v[0], v[1]) for k, v in counts["judges"].items()}


def stored_by_model_and_domain(study: Study) -> list[tuple[str, str, int, int, int]] | None:
    """by_model_and_domain as the score job stored it, or None when none is stored."""
    counts = StudySummary.objects.filter(study=study).values_list("counts", flat=True).first()
    return None if counts is None else [tuple(row) for row in counts["by_model_and_domain"]]


def reviewer_ids(study: Study) -> list[int]:
    """The pks of everyone who reviewed one of the study's own traces, in order. Every human label has its
    annotator's TraceReview, so these are the annotators of agreement's menus (agreement.data); the query
    reads every review of the study (a second at 300,000 traces), hence stored."""
    return sorted(TraceReview.objects.filter(trace__in=Trace.objects.of_study(study).values("pk"))
                  .values_list("annotator", flat=True).distinct())


def stored_reviewer_ids(study: Study) -> list[int] | None:
    """reviewer_ids as the score job stored them, else None (none stored, or written before the reviewers
    were stored). While the summary is stale, with the members whose first review of the study came since:
    an EXISTS probe per member not stored (a few), so the agreement menus and sources never miss an annotator
    (agreement.data.annotator_names)."""
    summary = stored(study)
    if summary is None or "reviewers" not in summary.counts:
        return None
    ids = list(summary.counts["reviewers"])
    if summary.stale:
        reviewed = TraceReview.objects.filter(annotator=OuterRef("user"),
                                              trace__in=Trace.objects.of_study(study).values("pk"))
        ids = sorted({*ids, *Membership.objects.filter(study=study).exclude(user__in=ids).filter(Exists(reviewed))
                      .values_list("user", flat=True)})
    return ids


def trace_models(study: Study) -> list[str]:
    """The models of the study's own traces, in order (the calibration form's choices): from the stored
    summary's table by model when stored, else a DISTINCT over every trace of the study."""
    counts = stored_counts(study)
    if counts is not None:
        return [row["model"] for row in counts["by_model"]["models"]]
    return list(Trace.objects.of_study(study).order_by("model").values_list("model", flat=True).distinct())


#: The data_changed reason of a final verdict (annotation.review.adjudication): it changes no stored count (the
#: open disagreements are counted when read, DISAGREEMENT_STEPS), so the summary stays.
ADJUDICATION = "adjudication"


def invalidate(sender, study: Study, reason: str = "", **kwargs) -> None:
    """Receiver of annotation.signals.data_changed: the stored counts describe older data (but after an
    adjudication, ADJUDICATION). They stay, marked, until the score job that the same change queued writes them
    anew; the disagreement steps stay with them."""
    if reason == ADJUDICATION:
        return
    StudySummary.objects.filter(study=study).update(stale=True, marked_at=timezone.now())
