"""Judge runs as a client of the run engine (runs.engine): the items of a
judge run are trace pks; a chunk's work loads what the judge may see of its
traces, asks the judge's provider, and commits labels, history and per-trace
results in the engine's transaction."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

from django.db.models import F
from django.utils import timezone

from annotation import stored_claims
from annotation.bulk import db_value, insert_rows, json_text, new_pks, rows_by_key
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
    # Rows, not model objects: a chunk is a thousand traces, and building their Trace and Problem objects
    # cost more than reading them.
    traces = {
        row[0]: row for row in Trace.objects.filter(pk__in=trace_ids).values_list(
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
    skeleton_ids = {row[6] for row in traces.values()} - {None}
    skeletons: dict[int, list[tuple[str, str]]] = {}
    for skeleton_id, text, check in (
        SkeletonStep.objects.filter(skeleton_id__in=skeleton_ids).order_by("skeleton_id", "position")
        .values_list("skeleton_id", "text", "check_expr")
    ):
        skeletons.setdefault(skeleton_id, []).append((text, check))
    inputs = []
    for pk in trace_ids:
        row = traces.get(pk)
        if row is None:
            continue  # deleted since the run started
        _pk, trace_id, model, answer, statement, gold, skeleton_id = row
        inputs.append(TraceInput(
            trace_pk=pk, trace_id=trace_id, model=model, problem=statement, gold_answer=gold, answer=answer,
            steps=tuple(steps[pk]), skeleton=tuple(skeletons.get(skeleton_id, ())),
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


LABEL_FIELDS = ["id", "step", "kind", "judge", "verdict", "skeleton_refs", "confidence", "reason", "version",
                "created_at", "updated_at"]
HISTORY_FIELDS = ["step", "label", "kind", "source_name", "actor", "at", "before", "after", "via"]
RESULT_FIELDS = ["judge", "trace", "run", "status", "reason", "warnings", "answer_correct", "n_labels", "attempts",
                 "cached", "prompt_tokens", "completion_tokens", "unknown_token_calls", "cost_usd", "judge_version",
                 "prompt_version", "updated_at"]


def _snapshot(verdict: str, refs: list, confidence: float | None, reason: str) -> dict[str, Any]:
    # annotation.importing.pipeline.label_snapshot's form, from a row rather than a model object.
    return {"verdict": verdict, "skeleton_refs": refs, "confidence": confidence, "reason": reason}


_json_memo: dict[Any, str] = {}


def _json_of(value: Any) -> str:
    """JSON of a value that repeats (a verdict, a confidence): each distinct one encoded once."""
    key = (type(value), value)
    text = _json_memo.get(key)
    if text is None:
        text = _json_memo[key] = json.dumps(value)
    return text


def _snapshot_json(verdict: str, refs_json: str, confidence: float | None, reason: str) -> str:
    """``json_text(_snapshot(...))``, the same text, with only the reason encoded per label: a history row
    per new label made ``json.dumps`` of the whole snapshot a tenth of a mechanistic run's CPU."""
    return (f'{{"verdict": {_json_of(verdict)}, "skeleton_refs": {refs_json}, "confidence": {_json_of(confidence)}, '
            f'"reason": {encode_basestring_ascii(reason)}}}')


def write_outcomes(record: JudgeRun, judge: JudgeConfig, outcomes: Sequence[TraceOutcome],
                   step_pks: dict[int, list[int]], *, actor=None) -> None:
    """Upsert the labels (one per step and judge: the unique constraint is the
    last guard against duplicates), record what changed in LabelHistory, store each trace's claim keys
    when the provider parsed them (annotation.stored_claims), and store per-trace results and the run's
    label counters (runs.engine stores the calls and the engine's counters). Call inside a transaction.

    New labels, every history row and new per-trace results are written as plain rows (COPY on
    PostgreSQL, many-row INSERTs on SQLite: annotation.bulk.insert_rows), not model objects, with their
    keys handed out first (no look-up of the new labels afterwards) and their JSON and time stamp
    prepared once here: building, preparing and compiling model objects was most of a mechanistic run's
    time, then adapting each value of each row a fifth of what was left."""
    now = timezone.now()
    stamp = db_value(StepLabel, "updated_at", now)
    ok = [o for o in outcomes if o.status == "ok"]
    existing = {
        row[0]: row[1:] for row in _labels_on(
            judge, [pk for o in ok for pk in step_pks.get(o.trace_pk, [])],
            ["pk", "verdict", "skeleton_refs", "confidence", "reason", "version"])
    }
    kind = StepLabel.Kind.JUDGE
    name = judge.name
    actor_id = actor.pk if actor is not None else None
    created: list[tuple] = []
    changed: list[StepLabel] = []
    removed: list[int] = []
    history: list[tuple] = []
    unchanged = 0
    n_new = sum(1 for o in ok for pks in (step_pks.get(o.trace_pk, []),) for lab in o.labels
                if pks[lab.step - 1] not in existing)
    label_pks = iter(new_pks(StepLabel, n_new))
    refs_text: dict[tuple, str] = {}  # a few distinct lists of skeleton steps: each written once

    for outcome in ok:
        pks = step_pks.get(outcome.trace_pk, [])
        given = set()
        for lab in outcome.labels:
            step_id = pks[lab.step - 1]
            given.add(step_id)
            refs = list(lab.skeleton_refs)
            old = existing.get(step_id)
            if old is None:
                key = tuple(refs)
                refs_json = refs_text.get(key)
                if refs_json is None:
                    refs_json = refs_text[key] = json_text(refs)
                label_pk = next(label_pks)
                created.append((label_pk, step_id, kind, judge.pk, lab.verdict, refs_json, lab.confidence,
                                lab.reason, 1, stamp, stamp))
                history.append((step_id, label_pk, kind, name, actor_id, stamp, None,
                                _snapshot_json(lab.verdict, refs_json, lab.confidence, lab.reason), "judge run"))
                continue
            pk, verdict, old_refs, confidence, reason, version = old
            before = _snapshot(verdict, list(_decoded(old_refs) or []), confidence, reason)
            after = _snapshot(lab.verdict, refs, lab.confidence, lab.reason)
            if before == after:
                unchanged += 1
                continue
            changed.append(StepLabel(pk=pk, step_id=step_id, verdict=lab.verdict, skeleton_refs=refs,
                                     confidence=lab.confidence, reason=lab.reason, version=version + 1,
                                     updated_at=now))
            history.append((step_id, pk, kind, name, actor_id, stamp, json_text(before), json_text(after),
                            "judge run"))
        # A step the judge left out this time keeps no stale verdict.
        for step_id in pks:
            old = existing.get(step_id)
            if step_id not in given and old is not None:
                pk, verdict, old_refs, confidence, reason, _version = old
                removed.append(pk)
                before = _snapshot(verdict, list(_decoded(old_refs) or []), confidence, reason)
                history.append((step_id, None, kind, name, actor_id, stamp, json_text(before), None, "judge run"))

    insert_rows(StepLabel, LABEL_FIELDS, created, prepared=True)
    StepLabel.objects.bulk_update(changed, ["verdict", "skeleton_refs", "confidence", "reason", "version", "updated_at"],
                                  batch_size=500)
    if removed:
        StepLabel.objects.filter(pk__in=removed).delete()
    insert_rows(LabelHistory, HISTORY_FIELDS, history, prepared=True)
    stored_claims.write([(o.trace_pk, o.claims) for o in ok if o.claims is not None])
    _write_results(record, judge, [o for o in outcomes if o.status != "skipped"], now, stamp)
    JudgeRun.objects.filter(pk=record.pk).update(
        labels_created=F("labels_created") + len(created),
        labels_changed=F("labels_changed") + len(changed),
        labels_removed=F("labels_removed") + len(removed),
        labels_unchanged=F("labels_unchanged") + unchanged,
    )


def _write_results(record: JudgeRun, judge: JudgeConfig, outcomes: Sequence[TraceOutcome], now, stamp) -> None:
    """Each trace's newest result: new ones as rows (a first run has only those), those of traces the judge
    judged before replaced through the ORM's upsert."""
    if not outcomes:
        return
    seen = {trace for trace, _pk in rows_by_key(JudgeTraceResult, "trace", [o.trace_pk for o in outcomes], ["pk"],
                                                 judge=judge.pk)}

    def status(o: TraceOutcome) -> str:
        return JudgeTraceResult.Status.OK if o.status == "ok" else JudgeTraceResult.Status.FAILED

    insert_rows(JudgeTraceResult, RESULT_FIELDS, [
        (judge.pk, o.trace_pk, record.pk, status(o), o.reason[:5000], json_text(o.warnings), o.answer_correct,
         len(o.labels), len(o.calls), o.cached, o.prompt_tokens, o.completion_tokens, o.unknown_token_calls,
         o.cost_usd, record.judge_version, record.prompt_version, stamp)
        for o in outcomes if o.trace_pk not in seen
    ], prepared=True)
    again = [
        JudgeTraceResult(
            judge=judge, trace_id=o.trace_pk, run=record, status=status(o), reason=o.reason[:5000],
            warnings=o.warnings, answer_correct=o.answer_correct, n_labels=len(o.labels), attempts=len(o.calls),
            cached=o.cached, prompt_tokens=o.prompt_tokens, completion_tokens=o.completion_tokens,
            unknown_token_calls=o.unknown_token_calls, cost_usd=o.cost_usd,
            judge_version=record.judge_version, prompt_version=record.prompt_version, updated_at=now,
        )
        for o in outcomes if o.trace_pk in seen
    ]
    JudgeTraceResult.objects.bulk_create(
        again, batch_size=1000, update_conflicts=True, unique_fields=["judge", "trace"],
        update_fields=RESULT_FIELDS[2:],
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
