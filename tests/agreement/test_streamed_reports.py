"""The stored agreement reports read chunk by chunk (agreement.streamed) equal the whole-study computation
(services.pair_report, services.annotator_report), whatever the chunk size: a study with three
annotators, adjudications, an LLM judge with confidences and the mechanistic judge, two domains, ratings
and ProcessBench items."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agreement import services as svc
from agreement import stored, stored_writer, streamed
from agreement.core.packed_rows import PackedRows
from agreement.models import StoredReport
from annotation.models import Step
from annotation.review.adjudication import do_adjudicate
from scoring import score_jobs
from tests.agreement.conftest import judge_labels, labels_of, problem, trace
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

WORDS = "VEN"


def _word(rng, n: int, p=(0.6, 0.3, 0.1)) -> str:
    return "".join(rng.choice(list(WORDS), size=n, p=list(p)))


@pytest.fixture
def busy(study, do_import, owner):
    rng = np.random.default_rng(7)
    records = [problem("p1"), problem("p2", domain="algebra"), problem("p3", domain="algebra")]
    ids = [f"t{i}" for i in range(14)] + ["processbench/gsm8k-1", "processbench/math-2"]
    lengths = {}
    for i, tid in enumerate(ids):
        n = int(rng.integers(2, 7))
        lengths[tid] = n
        labels = []
        for who in ("ann1", "ann2", "ann3"):
            if rng.random() < 0.6:
                labels += labels_of(who, _word(rng, n))
        records.append(trace(tid, f"p{1 + i % 3}", f"m{i % 2}", n, correct=bool(i % 3), labels=labels,
                             rating=int(rng.integers(0, 11)) if labels and i % 2 else None))
    report = do_import(jsonl(*records))
    assert report.committed, report.rejected
    llm = {tid: _word(rng, n, (0.5, 0.35, 0.15)) for tid, n in lengths.items() if tid != "t3"}  # t3 unjudged
    confidence = {(tid, s): float(np.round(rng.random(), 3)) for tid, w in llm.items() for s in range(1, len(w) + 1)
                  if rng.random() < 0.5}
    judge_labels(study, "llm", llm, confidence, primary=True)
    judge_labels(study, "mechanistic", {tid: _word(rng, n, (0.8, 0.15, 0.05)) for tid, n in lengths.items()})
    for tid, index, verdict in (("t1", 1, "invalid"), ("t4", 2, "valid"), ("t6", 1, "neutral")):
        step = Step.objects.filter(trace__study=study, trace__trace_id=tid, index=index).first()
        if step is not None:
            do_adjudicate(step, owner, version=0, verdict=verdict, skeleton_refs=[], reason="decided")
    score_jobs.recompute(study, warm=False)
    return study


def _whole(study) -> tuple[dict, list, dict]:
    sel = svc.select(study, {})
    pair = json.loads(json.dumps(svc.pair_report(sel)))
    return pair["metrics"], pair["disagreements"], json.loads(json.dumps(svc.annotator_report(study)))


@pytest.mark.parametrize("chunk_size", [1, 3, 100_000])
def test_a_chunked_read_gives_the_whole_study_reports(busy, chunk_size):
    metrics, rows, people = _whole(busy)
    assert metrics["steps_compared"] > 20 and rows and metrics["pb_splits"] and metrics["ece"] is not None
    assert people["overall"]["annotators"] == 3 and len(people["by_domain"]) == 2
    got = streamed.reports(svc.select(busy, {}), chunk_size=chunk_size)
    assert got is not None
    s_metrics, s_rows, s_people = got
    assert json.loads(json.dumps(s_metrics)) == metrics
    assert list(s_rows) == rows and len(s_rows) == len(rows)
    assert json.loads(json.dumps(s_people)) == people


def test_the_writer_stores_the_chunked_reports_and_the_page_reads_them_by_slice(busy):
    metrics, rows, people = _whole(busy)
    stored_writer.store(busy, chunk_size=2)
    sel = svc.select(busy, {})
    row = StoredReport.objects.get(study=busy, kind=StoredReport.Kind.PAIR, key=svc.stored_pair_key(sel))
    assert row.data == {"metrics": metrics}
    assert row.n_disagreements == len(rows) and list(stored.Rows(row)) == rows
    assert stored.Rows(row)[2:5] == rows[2:5]
    assert StoredReport.objects.get(study=busy, kind=StoredReport.Kind.ANNOTATORS).data == people


def test_the_disagreements_are_written_a_few_chunks_at_a_time_from_the_packed_rows(busy, monkeypatch,
                                                                                 django_assert_num_queries):
    """The writer never holds the rows as one list: write_chunks takes them as they come (here a generator
    over the packed arrays) and inserts a few chunks at a time; read back by slice they are the whole-study
    list."""
    from agreement.models import StoredDisagreementChunk

    _, rows, _ = _whole(busy)
    packed = streamed.reports(svc.select(busy, {}), chunk_size=3)[1]
    assert isinstance(packed, PackedRows) and len(rows) > 7
    monkeypatch.setattr(StoredDisagreementChunk, "CHUNK_ROWS", 2)
    monkeypatch.setattr(stored, "_CHUNKS_PER_INSERT", 3)
    row = StoredReport.objects.get(study=busy, kind=StoredReport.Kind.PAIR)
    chunks = -(-len(rows) // 2)
    with django_assert_num_queries(1 + -(-chunks // 3)):  # the old chunks deleted, then an INSERT per 3 chunks
        stored.write_chunks(row.pk, (r for r in packed))
    assert StoredDisagreementChunk.objects.filter(report=row).count() == chunks
    row.n_disagreements = len(rows)
    assert list(stored.Rows(row)) == rows and stored.Rows(row)[3:8] == rows[3:8]


def test_a_source_without_stored_scores_is_read_whole(busy):
    sel = svc.select(busy, {"reference": "adjudicated"})
    assert not streamed.streamable(sel) and streamed.reports(sel) is None
