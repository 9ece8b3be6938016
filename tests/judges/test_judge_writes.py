"""How a judge chunk reads and writes its labels (issue 33): the existing labels are looked up by the chunk's
own step ids, so a chunk's cost does not grow with the labels the judge wrote before; new labels and their
history are written as rows, with the same outcome as before (labels, history, counters)."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from annotation.bulk import json_text
from annotation.models import Job, LabelHistory, Step, StepLabel
from judges import services
from judges.models import MECHANISTIC, JudgeConfig
from judges.providers.mechanistic.provider import MechanisticProvider
from judges.runclient import _snapshot, _snapshot_json
from runs import engine
from runs.models import RunChunk
from tests.judges.conftest import run_judge

pytestmark = pytest.mark.django_db


def _label_reads(statements: list[str]) -> list[str]:
    table = StepLabel._meta.db_table
    return [s for s in statements if re.match(r"\s*SELECT", s, re.I) and re.search(rf'\bFROM\s+"?{table}"?', s)]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="reads every statement through sqlite3's trace hook")
def test_a_chunk_looks_up_the_labels_of_its_own_steps_not_through_their_traces(study, make_traces):
    make_traces(8, steps=3)
    judge = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    run_judge(judge, filters={"model": "m1"})  # the judge already holds the labels of half the traces
    connection.ensure_connection()
    statements: list[str] = []
    connection.connection.set_trace_callback(statements.append)  # every statement, raw cursors included
    try:
        run, _ = run_judge(judge, scope="all")
    finally:
        connection.connection.set_trace_callback(None)
    reads = _label_reads(statements)
    assert reads, "the chunk looked up no existing label"
    step_table = Step._meta.db_table
    # A join through the steps' traces reads every label of the judge for each chunk (quadratic over a run):
    # the lookup goes by the steps' ids through the step index, and reads only the chunk's own labels.
    assert not [s for s in reads if re.search(rf'\bJOIN\s+"?{step_table}"?', s)], reads
    assert all(re.search(r'"?step_id"?\s+IN\s*\(', s) for s in reads), reads
    assert (run.labels_created, run.labels_unchanged) == (12, 12)


def test_new_labels_and_their_history_are_written_with_their_ids(study, make_traces):
    make_traces(4, steps=3, wrong={1: 2})
    judge = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    run, _ = run_judge(judge)
    labels = StepLabel.objects.filter(kind=StepLabel.Kind.JUDGE, judge=judge)
    assert labels.count() == 12 == run.labels_created
    history = LabelHistory.objects.filter(via="judge run", source_name=MECHANISTIC)
    # every history row points at its label, on its step, with what the label holds
    assert sorted(history.values_list("label_id", "step_id")) == sorted(labels.values_list("pk", "step_id"))
    for h in history.select_related("label"):
        assert h.before is None and h.after["verdict"] == h.label.verdict and h.after["reason"] == h.label.reason
        assert h.after["skeleton_refs"] == h.label.skeleton_refs and h.kind == StepLabel.Kind.JUDGE
    assert labels.exclude(skeleton_refs=[]).exists()
    # a change of a label is recorded against the same label
    first = labels.order_by("pk").first()
    StepLabel.objects.filter(pk=first.pk).update(verdict="neutral" if first.verdict != "neutral" else "valid")
    run2, _ = run_judge(judge)
    assert (run2.labels_created, run2.labels_changed, run2.labels_unchanged) == (0, 1, 11)
    last = LabelHistory.objects.filter(label_id=first.pk).order_by("pk").last()
    assert last.after["verdict"] == first.verdict and last.before["verdict"] != first.verdict


def test_a_mechanistic_run_spreads_its_chunks_over_every_task_that_takes_them(study, make_traces, monkeypatch):
    # Spread (Sizing.spread): a task per chunk is queued, and a task whose own lane is done, or whose chunk
    # another task took, goes on with any pending chunk of the run -- no chain of one process.
    monkeypatch.setattr(MechanisticProvider, "chunk_size", 2)
    make_traces(10, steps=2)
    judge = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    record = services.do_start_run(judge, queue=False)
    run = record.run
    run.refresh_from_db()
    chunks = list(run.chunks.order_by("index").values_list("pk", flat=True))
    assert len(chunks) == 5 and run.lanes == 5 and engine.is_spread(run)
    a, b = "node-a/boot/1", "node-b/boot/2"
    # Worker a does chunk 0; its lane has no other chunk, so it goes on with the lowest pending one of another lane.
    assert engine.process_chunk(chunks[0], a) == chunks[1]
    # Worker b's task for chunk 1 arrives first and does it; a's attempt at chunk 1 finds it taken and goes on.
    assert engine.process_chunk(chunks[1], b) == chunks[2]
    assert engine.process_chunk(chunks[1], a) == chunks[2]
    assert engine.process_chunk(chunks[2], a) == chunks[3]
    assert engine.process_chunk(chunks[3], b) == chunks[4]
    assert engine.process_chunk(chunks[4], b) is None
    record.refresh_from_db()
    job = Job.objects.get(pk=record.job_id)
    assert job.status == Job.Status.SUCCEEDED and (job.done, job.total) == (10, 10)
    assert record.labels_created == 20 == StepLabel.objects.filter(judge=judge).count()
    holders = set(RunChunk.objects.filter(run=run).values_list("holder", flat=True))
    assert holders == {a, b}


def test_an_llm_judge_run_keeps_its_one_chain(study, make_traces, llm_judge):
    make_traces(4)
    record = services.do_start_run(llm_judge(), queue=False)
    record.run.refresh_from_db()
    assert record.run.lanes == 1 and not engine.is_spread(record.run)


@pytest.mark.parametrize("verdict, refs, confidence, reason", [
    ("valid", [], 1.0, 'claim "2 + 2 = 4" holds'),
    ("invalid", [1, 3], 1.0, "claim \"16 − 3 = 14\" is false: 16 − 3 = 13\n\ttab\\ and é"),
    ("neutral", [], None, "nothing checkable"),
    ("valid", [2], 1, ""),
    ("invalid", [], 0.25, "\x00\x1f\u2028 ☃"),
])
def test_the_history_snapshot_text_is_json_of_the_snapshot(verdict, refs, confidence, reason):
    text = _snapshot_json(verdict, json_text(refs), confidence, reason)
    assert text == json_text(_snapshot(verdict, refs, confidence, reason))
