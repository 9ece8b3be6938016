"""Judge runs as a client of the run engine (runs.engine): the items of a
judge run are trace pks; a chunk's work loads what the judge may see of its
traces, asks the judge's provider, and commits labels, history and per-trace
results in the engine's transaction."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from django.db.models import F
from django.utils import timezone

from annotation.bulk import insert_rows, rows_by_key
from annotation.importing.pipeline import label_snapshot
from annotation.models import LabelHistory, SkeletonStep, Step, StepLabel, Trace
from judges.models import JudgeConfig, JudgeRun, JudgeTraceResult
from judges.providers import JudgeProvider, TraceInput, TraceOutcome, get_provider, provider_class
from runs import cache
from runs.clients import ChunkWork, RunClient, Sizing
from runs.models import Run
from runs.transport import Control

KIND = "judge"


def load_inputs(trace_ids: Sequence[int]) -> tuple[list[TraceInput], dict[int, list[int]]]:
    """What judges see of these traces (in the given order), and each trace's step pks by index."""
    traces = {
        t.pk: t
        for t in Trace.objects.filter(pk__in=trace_ids).select_related("problem").only(
            "pk", "trace_id", "model", "answer", "problem__statement", "problem__gold_answer",
            "problem__approved_skeleton_id",
        )
    }
    steps: dict[int, list[str]] = {pk: [] for pk in traces}
    step_pks: dict[int, list[int]] = {pk: [] for pk in traces}
    for trace_pk, pk, text in (
        Step.objects.filter(trace_id__in=list(traces)).order_by("trace_id", "index").values_list("trace_id", "pk", "text")
    ):
        steps[trace_pk].append(text)
        step_pks[trace_pk].append(pk)
    skeleton_ids = {t.problem.approved_skeleton_id for t in traces.values()} - {None}
    skeletons: dict[int, list[tuple[str, str]]] = {}
    for skeleton_id, text, check in (
        SkeletonStep.objects.filter(skeleton_id__in=skeleton_ids).order_by("skeleton_id", "position")
        .values_list("skeleton_id", "text", "check_expr")
    ):
        skeletons.setdefault(skeleton_id, []).append((text, check))
    inputs = []
    for pk in trace_ids:
        t = traces.get(pk)
        if t is None:
            continue  # deleted since the run started
        inputs.append(TraceInput(
            trace_pk=t.pk, trace_id=t.trace_id, model=t.model, problem=t.problem.statement,
            gold_answer=t.problem.gold_answer, answer=t.answer, steps=tuple(steps[pk]),
            skeleton=tuple(skeletons.get(t.problem.approved_skeleton_id, ())),
        ))
    return inputs, step_pks



def _decoded(value: Any) -> Any:
    """A JSON column as the database driver returns it (text on both backends, a value on some drivers)."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def _labels_on(judge: JudgeConfig, step_ids: Sequence[int], columns: list[str]) -> list[tuple]:
    """``(step id, *columns)`` of the judge's labels on ``step_ids``. The query names the steps only, and the
    rows of other sources are dropped here: with ``kind`` and ``judge`` in it too, PostgreSQL planned by its
    statistics of a table that held none of this judge's labels when the run began, chose the (kind,
    verdict) index and compared every label of the judge with every step id of the chunk (18 s a chunk at
    200,000 labels); by the steps alone it reads the step index, a few rows per step, whatever the
    statistics say."""
    rows = rows_by_key(StepLabel, "step", list(step_ids), ["kind", "judge", *columns])
    return [(row[0], *row[3:]) for row in rows if row[1] == StepLabel.Kind.JUDGE and row[2] == judge.pk]


def existing_labels(judge: JudgeConfig, step_ids: Sequence[int]) -> dict[int, StepLabel]:
    """The judge's labels on ``step_ids``, by step: looked up by the steps' own ids, so a chunk reads only its
    own labels however many the judge has written (a join through the steps' traces read every label of the
    judge, for each chunk: quadratic over a run)."""
    rows = _labels_on(judge, step_ids, ["pk", "verdict", "skeleton_refs", "confidence", "reason", "version"])
    return {
        step_id: StepLabel(pk=pk, step_id=step_id, kind=StepLabel.Kind.JUDGE, judge=judge, verdict=verdict,
                           skeleton_refs=_decoded(refs) or [], confidence=confidence, reason=reason, version=version)
        for step_id, pk, verdict, refs, confidence, reason, version in rows
    }


LABEL_FIELDS = ["step", "kind", "judge", "verdict", "skeleton_refs", "confidence", "reason", "version", "created_at",
                "updated_at"]
HISTORY_FIELDS = ["step", "label", "kind", "source_name", "actor", "at", "before", "after", "via"]


def write_outcomes(record: JudgeRun, judge: JudgeConfig, outcomes: Sequence[TraceOutcome],
                   step_pks: dict[int, list[int]], *, actor=None) -> None:
    """Upsert the labels (one per step and judge: the unique constraint is the
    last guard against duplicates), record what changed in LabelHistory, and
    store per-trace results and the run's label counters (runs.engine stores the
    calls and the engine's counters). Call inside a transaction.

    New labels and every history row are written as plain rows (COPY on PostgreSQL, many-row INSERTs on
    SQLite: annotation.bulk.insert_rows), not model objects: building, preparing and
    compiling them was most of a mechanistic run's time."""
    now = timezone.now()
    ok = [o for o in outcomes if o.status == "ok"]
    existing = existing_labels(judge, [pk for o in ok for pk in step_pks.get(o.trace_pk, [])])
    kind = StepLabel.Kind.JUDGE
    actor_id = actor.pk if actor is not None else None
    created: list[tuple] = []
    created_after: list[tuple[int, dict]] = []  # their history, once their pks are known
    changed: list[StepLabel] = []
    removed: list[StepLabel] = []
    history: list[tuple] = []
    unchanged = 0

    def log_change(step_id: int, label_id: int | None, before, after) -> None:
        history.append((step_id, label_id, kind, judge.name, actor_id, now, before, after, "judge run"))

    for outcome in ok:
        pks = step_pks.get(outcome.trace_pk, [])
        given = set()
        for lab in outcome.labels:
            step_id = pks[lab.step - 1]
            given.add(step_id)
            refs = list(lab.skeleton_refs)
            after = {"verdict": lab.verdict, "skeleton_refs": refs, "confidence": lab.confidence, "reason": lab.reason}
            old = existing.get(step_id)
            if old is None:
                created.append((step_id, kind, judge.pk, lab.verdict, refs, lab.confidence, lab.reason, 1, now, now))
                created_after.append((step_id, after))
                continue
            before = label_snapshot(old)
            if before == after:
                unchanged += 1
                continue
            old.verdict, old.skeleton_refs, old.confidence, old.reason = lab.verdict, refs, lab.confidence, lab.reason
            old.version += 1
            old.updated_at = now
            changed.append(old)
            log_change(step_id, old.pk, before, after)
        # A step the judge left out this time keeps no stale verdict.
        for step_id in pks:
            old = existing.get(step_id)
            if step_id not in given and old is not None:
                removed.append(old)
                log_change(step_id, None, label_snapshot(old), None)

    insert_rows(StepLabel, LABEL_FIELDS, created)
    if created:
        new_pks = dict(_labels_on(judge, [row[0] for row in created], ["pk"]))
        for step_id, after in created_after:
            log_change(step_id, new_pks[step_id], None, after)
    StepLabel.objects.bulk_update(changed, ["verdict", "skeleton_refs", "confidence", "reason", "version", "updated_at"],
                                  batch_size=500)
    if removed:
        StepLabel.objects.filter(pk__in=[label.pk for label in removed]).delete()
    insert_rows(LabelHistory, HISTORY_FIELDS, history)

    results = [
        JudgeTraceResult(
            judge=judge, trace_id=o.trace_pk, run=record, status=JudgeTraceResult.Status.OK if o.status == "ok" else
            JudgeTraceResult.Status.FAILED, reason=o.reason[:5000], warnings=o.warnings,
            answer_correct=o.answer_correct, n_labels=len(o.labels), attempts=len(o.calls), cached=o.cached,
            prompt_tokens=o.prompt_tokens, completion_tokens=o.completion_tokens,
            unknown_token_calls=o.unknown_token_calls, cost_usd=o.cost_usd,
            judge_version=record.judge_version, prompt_version=record.prompt_version, updated_at=now,
        )
        for o in outcomes if o.status != "skipped"
    ]
    JudgeTraceResult.objects.bulk_create(
        results, batch_size=1000, update_conflicts=True, unique_fields=["judge", "trace"],
        update_fields=["run", "status", "reason", "warnings", "answer_correct", "n_labels", "attempts", "cached",
                       "prompt_tokens", "completion_tokens", "unknown_token_calls", "cost_usd", "judge_version", "prompt_version",
                       "updated_at"],
    )
    JudgeRun.objects.filter(pk=record.pk).update(
        labels_created=F("labels_created") + len(created),
        labels_changed=F("labels_changed") + len(changed),
        labels_unchanged=F("labels_unchanged") + unchanged,
        labels_removed=F("labels_removed") + len(removed),
    )


class JudgeWork(ChunkWork):
    def __init__(self, record: JudgeRun) -> None:
        self.record = record
        self.judge = record.judge
        self.step_pks: dict[int, list[int]] = {}
        self.provider: JudgeProvider | None = None

    def load(self, items: Sequence[int]) -> list[TraceInput]:
        inputs, self.step_pks = load_inputs(items)
        return inputs

    def execute(self, inputs: Sequence[TraceInput], control: Control) -> Iterator[TraceOutcome]:
        judge = self.judge
        run = self.record.run

        def remember(output_mode: str) -> None:
            JudgeConfig.objects.filter(pk=judge.pk).update(output_mode_resolved=output_mode)

        store = cache.DbStore(f"judge:{judge.pk}", force=run.force, remember=remember)
        self.provider = get_provider(judge, store, force=run.force)
        yield from self.provider.judge(inputs, control)

    def commit(self, outcomes: Sequence[TraceOutcome]) -> None:
        write_outcomes(self.record, self.judge, outcomes, self.step_pks, actor=self.record.job.created_by)

    def close(self) -> None:
        if self.provider is not None:
            self.provider.close()


class JudgeClient(RunClient):
    kind = KIND
    noun = "trace"
    label = "Judge"
    url_name = "judge-run"
    record_model = JudgeRun
    record_related = ("judge__study",)

    def sizing(self, run: Run) -> Sizing:
        judge = self.record(run).judge
        return provider_class(judge).sizing(judge)

    def open(self, run: Run) -> JudgeWork:
        return JudgeWork(self.record(run))

    def failure_reasons(self, run: Run, limit: int) -> list[str]:
        # A trace's newest result is the truth (a later run may have fixed it); the record keeps no copy.
        return list(JudgeTraceResult.objects.filter(run__run=run, status=JudgeTraceResult.Status.FAILED)
                    .order_by("trace_id").values_list("reason", flat=True)[:limit])
