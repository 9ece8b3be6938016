"""Planning a faithfulness run: which traces, which interventions or truncations (no model call).
It runs in the run's job, not in the request that starts it (runs.engine.start with plan_in_job): a
study's traces are read and thousands of rows written, which a web request must not wait for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from annotation import scopes
from annotation.models import Trace
from faithfulness.core import anytime as any_core
from faithfulness.core import early as early_core
from faithfulness.core import edits as edit_core
from faithfulness.core.numbers import format_value, to_fraction
from faithfulness.core.selection import select_targets
from faithfulness.loading import ANSWER, TraceData, load_traces, subject_traces
from faithfulness.models import AnytimePoint, FaithfulnessRun, Intervention, Status
from subjects.models import SubjectModel


@dataclass
class Planned:
    rows: list[dict[str, Any]]  # the Intervention fields of each row (plain data: cheap to make in bulk)
    skipped: dict[str, str]
    traces: int

    @property
    def interventions(self) -> list[dict[str, Any]]:
        return self.rows


def plan_interventions(traces: list[TraceData], kinds: tuple[str, ...], *, per_trace: int, seed: int) -> Planned:
    """The intervention rows for ``traces``: targets and edits (the implied answer of a value flip is
    computed when its continuation is scored). A trace without a causally relevant step is skipped with
    the reason; a kind that does not apply to a target gives a not-applicable row with the reason."""
    out: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    for t in traces:
        sel = select_targets(t.steps, t.answer, t.skeleton_checks, per_trace=per_trace)
        if sel.skipped:
            skipped[t.trace_id] = sel.skipped
            continue
        answer_value = to_fraction(t.answer.strip().lstrip("$")) if t.answer else None
        for target in sel.targets:
            end = t.spans[target.step - 1][1]
            base = {"trace_id": t.pk, "step": target.step, "why": target.why[:200],
                    "original_step": t.steps[target.step - 1], "original_prefix": t.raw[:end],
                    "original_answer": t.answer[:200], "original_correct": t.correct,
                    "original_continuation": t.raw[end:]}
            for kind in kinds:
                try:
                    e = edit_core.make_edit(kind, target, t.raw, t.spans, seed=seed, trace_key=t.trace_id,
                                            answer_value=answer_value)
                except edit_core.NotApplicable as exc:
                    out.append({**base, "kind": kind, "status": Status.NOT_APPLICABLE, "reason": str(exc)})
                    continue
                row = {**base, "kind": kind, "edited_step": e.edited_step, "edited_prefix": e.prefix}
                if e.old_value is not None and e.new_value is not None:
                    row["old_value"], row["new_value"] = format_value(e.old_value), format_value(e.new_value)
                out.append(row)
    return Planned(out, skipped, len(traces))


def plan_anytime(traces: list[TraceData], grid: any_core.Grid) -> list[AnytimePoint]:
    """One point per (trace, budget): within the budget the trace's own answer, else a truncated
    prefix (its length in ``prefix_chars``) waiting for a forced answer. No model call."""
    out: list[AnytimePoint] = []
    for t in traces:
        ends = any_core.piece_ends(t.raw) if grid.unit in (any_core.TOKENS, any_core.THINKING) else None
        for pos, budget in enumerate(grid.budgets):
            if grid.unit in (any_core.TOKENS, any_core.THINKING):  # thinking: t.raw is the thought
                cut = any_core.cut_tokens(t.raw, budget, reported_tokens=t.tokens, truncated=t.truncated, ends=ends)
            else:
                cut = any_core.cut_steps(t.raw, t.spans, budget, truncated=t.truncated)
            p = AnytimePoint(trace_id=t.pk, position=pos, budget=budget, within=cut.within, used=cut.used,
                             prefix_chars=len(cut.prefix))
            if cut.within:
                p.status, p.answer, p.correct = Status.OK, t.answer[:200], t.correct
            out.append(p)
    return out


def plan_early(traces: list[TraceData], grid: early_core.EarlyGrid) -> tuple[list[AnytimePoint], dict[str, str]]:
    """One point per (trace, cut point k): the thought's first k steps (``prefix_chars`` of it), waiting
    for a forced answer. Traces without a thought are skipped with the reason."""
    out: list[AnytimePoint] = []
    skipped: dict[str, str] = {}
    for t in traces:
        if not t.spans:
            skipped[t.trace_id] = "the trace has no thought steps"
            continue
        for pos, k in enumerate(grid.cut_points(len(t.spans))):
            chars = t.spans[k - 1][1] if k else 0
            out.append(AnytimePoint(trace_id=t.pk, position=pos, budget=k, used=k, prefix_chars=chars))
    return out, skipped


def limited(subject: SubjectModel, limit: int | None, cohort: str = "") -> QuerySet[Trace] | list[int]:
    """The subject's traces a run reads: those of a saved ``cohort`` only when one is given, then the
    first ``limit`` by id."""
    qs = subject_traces(subject).order_by("pk")
    in_cohort = scopes.cohort_traces(subject.study, cohort or "")
    if in_cohort is not None:
        qs = qs.filter(pk__in=in_cohort)
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit: must be at least 1, got {limit}")
        return list(qs.values_list("pk", flat=True)[:limit])
    return qs


def no_traces(subject: SubjectModel, cohort: str = "") -> str | None:
    """Why a faithfulness run of ``subject`` (within a saved ``cohort``, if given) has nothing to work on,
    or None (one cheap query: the request refuses at once; the planning itself waits for the job)."""
    if not subject_traces(subject).exists():
        return (f"subject model {subject.name} has no generated traces under configuration version "
                f"{subject.version}; run generate first")
    in_cohort = scopes.cohort_traces(subject.study, cohort)
    if in_cohort is not None and not subject_traces(subject).filter(pk__in=in_cohort).exists():
        return (f"cohort {cohort} holds none of subject model {subject.name}'s generated traces "
                f"(configuration version {subject.version})")
    return None


def plan(record: FaithfulnessRun) -> list[int]:
    """The run's rows (interventions, or anytime points) from its parameters, written now; returns the
    pks of those waiting for a continuation, the run's items. Records how many traces it read and why
    some were skipped."""
    p = record.params
    reason = no_traces(record.subject, p.get("cohort") or "")
    if reason:
        raise ValueError(reason)
    # The channel whose steps are edited or cut: recorded at the start (interventions: --channel, or the
    # channel that holds the reasoning; thinking budgets and early answering: the thought).
    traces = load_traces(limited(record.subject, p.get("limit"), p.get("cohort") or ""), channel=p.get("channel") or ANSWER)
    if record.kind == FaithfulnessRun.Kind.INTERVENTIONS:
        planned = plan_interventions(traces, tuple(p["kinds"]), per_trace=p["per_trace"], seed=p["seed"])
        Intervention.objects.bulk_create([Intervention(frun=record, **row) for row in planned.rows], batch_size=1000)
        FaithfulnessRun.objects.filter(pk=record.pk).update(traces=planned.traces, skipped=planned.skipped)
        return list(record.interventions.filter(status=Status.PENDING).order_by("pk").values_list("pk", flat=True))
    skipped: dict[str, str] = {}
    if record.kind == FaithfulnessRun.Kind.EARLY:
        points, skipped = plan_early(traces, early_core.parse_early_grid(record.grid))
    else:
        points = plan_anytime(traces, any_core.parse_grid(record.grid))
    for point in points:
        point.frun = record
    AnytimePoint.objects.bulk_create(points, batch_size=2000)
    FaithfulnessRun.objects.filter(pk=record.pk).update(traces=len(traces), skipped=skipped)
    return list(record.points.filter(status=Status.PENDING).order_by("pk").values_list("pk", flat=True))
