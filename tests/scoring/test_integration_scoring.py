"""Scoring through the real stack: an upload imported by a Celery worker
queues a debounced recompute that the worker runs, and ``manage.py score``
waits for a worker (PostgreSQL, Redis, a worker process)."""

from __future__ import annotations

import io
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from rest_framework.test import APIClient

from annotation.models import Job
from scoring.models import ScoreSet, TraceScore
from tests.scoring.conftest import records
from tests.test_integration_services import wait_for, worker  # noqa: F401  (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_an_import_on_the_worker_is_followed_by_one_recompute(worker, study, owner, settings):  # noqa: F811
    client = APIClient()
    client.force_authenticate(owner)
    response = client.post(f"/api/v1/studies/{study.pk}/imports/",
                           {"file": SimpleUploadedFile("a.jsonl", records()), "format": "reasonaudit"},
                           format="multipart")
    assert wait_for(response.json()["id"]).status == Job.Status.SUCCEEDED
    deadline = time.monotonic() + 60
    while not Job.objects.filter(study=study, kind=Job.Kind.SCORE).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    score_job = Job.objects.get(study=study, kind=Job.Kind.SCORE)  # exactly one
    job = wait_for(score_job.pk)
    assert job.status == Job.Status.SUCCEEDED, (job.error, worker.log.read_text()[-3000:])
    assert ScoreSet.objects.filter(study=study).count() == 8
    assert TraceScore.objects.filter(score_set__study=study).count() == 24


def test_the_score_command_waits_for_the_worker(worker, study, do_import, settings):  # noqa: F811
    do_import(records())
    settings.CELERY_TASK_ALWAYS_EAGER = False
    out = io.StringIO()
    call_command("score", study=study.name, profile="no-hazard", timeout=90, stdout=out)
    assert "scored 5 traces" in out.getvalue()
    assert set(ScoreSet.objects.filter(study=study).values_list("profile__name", flat=True)) == {"no-hazard"}
