"""annotation.jobs.queue: services queue their Celery tasks by name, after
commit, so no services module imports the tasks module that imports it."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation import jobs, services
from annotation.models import Job, Trace
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

RECORDS = jsonl(
    {"kind": "problem", "problem_id": "p1", "statement": "2+2?", "gold_answer": "4"},
    {"kind": "trace", "problem_id": "p1", "model": "m", "trace_id": "t1", "raw": "2+2 = 4\nA: 4"},
)


def test_a_queued_import_runs_only_once_its_job_is_committed(study, owner, django_capture_on_commit_callbacks):
    upload = SimpleUploadedFile("traces.jsonl", RECORDS)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = services.do_queue_import(study, upload, fmt="reasonaudit", skip_invalid=False, user=owner)
    assert len(callbacks) == 1
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED and not Trace.objects.filter(problem__study=study).exists()
    callbacks[0]()  # the commit hook; the test settings run the task eagerly
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    assert Trace.objects.filter(problem__study=study).count() == 1


def test_a_wrong_task_name_fails_in_the_caller_not_in_the_commit_hook(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks, pytest.raises(LookupError):
        jobs.queue("annotation.tasks.no_such_task", 1)
    assert callbacks == []
