"""The agreement reports the score job stores (agreement.stored): they equal a fresh computation from the
data, every kind of change of the data marks them stale (and the pages say so), and the next score job
writes them anew from the changed data."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from agreement import services as svc
from agreement import stored
from agreement.models import StoredReport
from annotation import signals
from annotation.models import Job, Step, StepLabel, Trace
from annotation.review.adjudication import do_adjudicate
from annotation.review.labels import LabelIn, do_save_labels
from judges import services as judge_services
from scoring import score_jobs
from tests.agreement.conftest import CANDIDATE, REFERENCE, judge_labels, labels_of, problem, trace
from tests.conftest import jsonl, signed_in

pytestmark = pytest.mark.django_db


def _fresh(study) -> tuple[dict, dict]:
    """Both reports computed from the data now, as JSON holds them (lists for tuples, text keys)."""
    sel = svc.select(study, {})
    pair = svc.pair_report(sel)
    people = svc.annotator_report(study)
    return json.loads(json.dumps(pair)), json.loads(json.dumps(people))


def _stored(study) -> tuple[StoredReport, StoredReport]:
    """The two stored rows; the pair row's ``data`` with its disagreements, as a page reads them."""
    sel = svc.select(study, {})
    pair = StoredReport.objects.get(study=study, kind=StoredReport.Kind.PAIR, key=svc.stored_pair_key(sel))
    pair.data = {**pair.data, "disagreements": list(stored.Rows(pair))}
    return pair, StoredReport.objects.get(study=study, kind=StoredReport.Kind.ANNOTATORS, key=stored.ANNOTATORS_KEY)


@pytest.fixture
def two_annotators(study, do_import):
    """The worked example of docs/agreement.md with a second annotator on tA, a judge, scored."""
    report = do_import(jsonl(
        problem("p1"),
        trace("tA", "p1", "m1", 5, labels=labels_of("ann1", REFERENCE["tA"]) + labels_of("ann2", "VVVEE")),
        trace("tB", "p1", "m2", 5, correct=False, labels=labels_of("ann1", REFERENCE["tB"])),
    ))
    assert report.committed, report.rejected
    judge_labels(study, "gpt", CANDIDATE, primary=True)
    score_jobs.recompute(study, warm=False)
    return study


def _assert_current(study) -> None:
    pair_row, people_row = _stored(study)
    assert not pair_row.stale and not people_row.stale
    pair, people = _fresh(study)
    assert pair_row.data == pair
    assert people_row.data == people


def test_the_score_job_stores_both_reports_as_a_fresh_computation_gives_them(two_annotators):
    study = two_annotators
    _assert_current(study)
    pair_row, people_row = _stored(study)
    assert pair_row.data["metrics"]["steps_compared"] == 10
    assert people_row.data["overall"]["annotators"] == 2
    # The pages read what is stored, and say it is current.
    report, status = svc.agreement_report_status(svc.select(study, {}))
    assert {**report, "disagreements": list(report["disagreements"])} == pair_row.data and status == {"computed_at": pair_row.computed_at, "stale": False}
    assert svc.annotator_report_status(study)[0] == people_row.data
    # The disagreements are read a slice at a time, as the page's paginator asks for them.
    rows, fresh = report["disagreements"], _fresh(study)[0]["disagreements"]
    assert len(rows) == len(fresh) == 3
    assert rows[1:3] == fresh[1:3] and rows[0] == fresh[0] and rows[-1] == fresh[-1] and rows[5:9] == []


def test_the_disagreements_are_read_from_chunks_of_the_stored_list(two_annotators, monkeypatch,
                                                                   django_assert_num_queries):
    """A page reads only the chunks (StoredDisagreementChunk) that hold its slice, in one query, and any
    slice equals the fresh list's, across chunk boundaries too."""
    from agreement.models import StoredDisagreementChunk

    study = two_annotators
    monkeypatch.setattr(StoredDisagreementChunk, "CHUNK_ROWS", 2)
    score_jobs.recompute(study, warm=False)
    fresh = _fresh(study)[0]["disagreements"]
    rows = svc.agreement_report_status(svc.select(study, {}))[0]["disagreements"]
    assert StoredDisagreementChunk.objects.filter(report_id=rows.pk).count() == 2  # 3 rows, 2 a chunk
    for start in range(len(fresh) + 1):
        for stop in range(start, len(fresh) + 2):
            with django_assert_num_queries(1 if start < min(stop, len(fresh)) else 0):
                assert rows[start:stop] == fresh[start:stop]
    assert [rows[i] for i in range(len(fresh))] == fresh and rows[-1] == fresh[-1]
    stored.write_chunks(rows.pk, fresh)  # written again: the same chunks, none twice
    assert StoredDisagreementChunk.objects.filter(report_id=rows.pk).count() == 2
    assert rows[0:3] == fresh


def test_another_selection_is_computed_not_read_from_the_stored_report(two_annotators):
    study = two_annotators
    sel = svc.select(study, {"seed": "7"})
    report, status = svc.agreement_report_status(sel)
    assert status is None
    assert report["metrics"]["seed"] == 7


def _change_and_check(study, change, client, django_capture_on_commit_callbacks) -> None:
    """``change`` the data through its real operation: the stored reports go stale (the pages say so),
    and the score job then stores what a fresh computation gives on the new data."""
    before = _stored(study)[0].data
    with django_capture_on_commit_callbacks() as sent:
        change()
    # What the commit runs: data_changed is sent. The score job it queues waits (in production on the
    # queue, here forever: it registers on the test's transaction, which never commits).
    for callback in sent:
        callback()
    pair_row, people_row = _stored(study)
    assert pair_row.stale and people_row.stale
    for name in ("scoring-agreement", "scoring-annotators"):
        page = client.get(reverse(name, args=[study.pk]))
        assert page.status_code == 200
        assert b'id="stored-stale"' in page.content, name
    score_jobs.recompute(study, warm=False)
    _assert_current(study)
    assert _stored(study)[0].data != before  # the change moved the numbers
    for name in ("scoring-agreement", "scoring-annotators"):
        assert b'id="stored-stale"' not in client.get(reverse(name, args=[study.pk])).content


def test_a_label_save_marks_them_stale_and_the_next_job_refreshes_them(two_annotators, owner,
                                                                        django_capture_on_commit_callbacks):
    study = two_annotators
    t = Trace.objects.get(study=study, trace_id="tA")
    ann1 = t.reviews.get(annotator__username="ann1")

    def save():
        do_save_labels(t, ann1.annotator, version=ann1.version,
                       labels=[LabelIn(i, "invalid" if i == 2 else "valid") for i in range(1, 6)])

    _change_and_check(study, save, signed_in(owner), django_capture_on_commit_callbacks)


def test_an_adjudication_marks_them_stale_and_the_next_job_refreshes_them(two_annotators, owner,
                                                                           django_capture_on_commit_callbacks):
    study = two_annotators
    step = Step.objects.get(trace__study=study, trace__trace_id="tA", index=4)

    def adjudicate():
        do_adjudicate(step, owner, version=0, verdict="invalid", skeleton_refs=[], reason="ann2 is right")

    before_people = _stored(study)[1].data
    _change_and_check(study, adjudicate, signed_in(owner), django_capture_on_commit_callbacks)
    assert _stored(study)[1].data != before_people  # the annotators are measured against the adjudication


def test_a_judge_run_marks_them_stale_and_the_next_job_refreshes_them(two_annotators, owner,
                                                                      django_capture_on_commit_callbacks):
    study = two_annotators
    judge = judge_services.ensure_mechanistic(study)
    study.primary_judge = judge
    study.save(update_fields=["primary_judge"])
    score_jobs.recompute(study, warm=False)  # the default candidate is now judge:mechanistic, without labels
    assert _stored(study)[0].data["metrics"]["steps_compared"] == 0

    def run():
        judge_services.run_inline(judge_services.do_start_run(judge, queue=False))

    _change_and_check(study, run, signed_in(owner), django_capture_on_commit_callbacks)
    assert _stored(study)[0].data["metrics"]["steps_compared"] == 10


def test_an_import_marks_them_stale_and_the_next_job_refreshes_them(two_annotators, owner, do_import,
                                                                    django_capture_on_commit_callbacks):
    study = two_annotators

    def more():
        report = do_import(jsonl(problem("p2"), trace("tC", "p2", "m1", 2, labels=labels_of("ann1", "VE"))))
        assert report.committed, report.rejected
        StepLabel.objects.bulk_create([StepLabel(step=s, kind=StepLabel.Kind.JUDGE, judge=study.primary_judge,
                                                 verdict="valid")
                                       for s in Step.objects.filter(trace__trace_id="tC", trace__study=study)])
        # What the import job sends once its import has committed (annotation.services._after_import).
        transaction.on_commit(lambda: signals.data_changed.send(sender=type(study), study=study, reason="import"))

    _change_and_check(study, more, signed_in(owner), django_capture_on_commit_callbacks)
    assert _stored(study)[0].data["metrics"]["steps_compared"] == 12


def test_a_change_while_the_job_reads_leaves_its_report_stale(two_annotators):
    """The job began to read before the change: what it writes describes the data before it."""
    study = two_annotators
    sel = svc.select(study, {})
    key = svc.stored_pair_key(sel)
    row = stored.read(study, StoredReport.Kind.PAIR, key)
    signals.data_changed.send(sender=type(study), study=study, reason="labels")
    row.refresh_from_db()
    # The job's read began before the mark (read_at earlier than marked_at): stays stale.
    written = stored.write(study, StoredReport.Kind.PAIR, key, row.data, read_at=row.marked_at - timedelta(seconds=1),
                           job=None)
    assert written.stale
    # A job that began to read after the mark writes a current report.
    written = stored.write(study, StoredReport.Kind.PAIR, key, row.data, read_at=written.marked_at + timedelta(seconds=1),
                           job=None)
    assert not written.stale


def test_a_score_job_queued_after_the_read_leaves_a_new_report_stale(two_annotators):
    """No report stored yet (nothing to mark): a score job queued since the read means the data changed."""
    study = two_annotators
    StoredReport.objects.filter(study=study).delete()
    read_at = timezone.now()
    Job.objects.create(study=study, kind=Job.Kind.SCORE, params={"profiles": None, "reason": "labels"})
    written = stored.write(study, StoredReport.Kind.ANNOTATORS, stored.ANNOTATORS_KEY, {}, read_at=read_at, job=None)
    assert written.stale
