"""The import path through the real stack: API upload -> Redis -> a Celery
worker process -> PostgreSQL, and the CLI on PostgreSQL."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from annotation.models import Job, Trace
from reasonaudit.celery import app as celery_app
from tests import integration

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

GSM8K = Path(__file__).resolve().parent.parent / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"


@pytest.fixture
def worker(tmp_path, settings):
    ok, why = integration.services_configured()
    integration.require(ok, why)
    integration.require(integration.redis_reachable(), "Redis is not reachable")
    queue = integration.new_queue()
    # The producer (this process) must publish to the worker's private queue,
    # and really publish: the test settings default to eager execution.
    old = celery_app.conf.task_default_queue, celery_app.conf.task_always_eager
    celery_app.conf.task_default_queue, celery_app.conf.task_always_eager = queue, False
    w = integration.Worker(queue, tmp_path / "worker.log")
    w.start()
    yield w
    w.stop()
    celery_app.conf.task_default_queue, celery_app.conf.task_always_eager = old


def wait_for(job_id: int, timeout: float = 90) -> Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        if job.finished:
            return job
        time.sleep(0.25)
    raise AssertionError(f"job {job_id} did not finish in {timeout}s (status {job.status})")


def test_an_uploaded_file_is_imported_by_a_real_worker(worker, study, owner):
    client = APIClient()
    client.force_authenticate(owner)
    lines = GSM8K.read_bytes().splitlines(keepends=True)[:50]
    upload = SimpleUploadedFile("gsm8k-50.jsonl", b"".join(lines), content_type="application/jsonl")
    response = client.post(f"/api/v1/studies/{study.pk}/imports/", {"file": upload, "format": "gsm8k-solutions"},
                           format="multipart")
    assert response.status_code == 202, response.content
    job = wait_for(response.json()["id"])
    assert job.status == Job.Status.SUCCEEDED, (job.error, worker.log.read_text()[-3000:])
    assert job.result["traces_created"] == 200
    assert Trace.objects.filter(study=study).count() == 200
    shown = client.get(f"/api/v1/imports/{job.pk}/").json()
    assert shown["status"] == "succeeded" and shown["result"]["problems_created"] == 50


def test_a_bad_upload_fails_on_the_worker_and_writes_nothing(worker, study, owner):
    client = APIClient()
    client.force_authenticate(owner)
    good = {"kind": "problem", "problem_id": "p1", "statement": "1+1?", "gold_answer": "2"}
    data = (json.dumps(good) + "\n" + "{not json}\n").encode()
    response = client.post(f"/api/v1/studies/{study.pk}/imports/",
                           {"file": SimpleUploadedFile("bad.jsonl", data)}, format="multipart")
    job = wait_for(response.json()["id"])
    assert job.status == Job.Status.FAILED
    assert job.result["rejected"][0]["line"] == 2
    assert not study.problems.exists()


def test_the_cli_imports_the_whole_gsm8k_file_on_postgresql(study, capsys):
    ok, why = integration.services_configured()
    integration.require(ok, why)
    from annotation.importing.pipeline import import_stream

    with GSM8K.open("rb") as fh:
        report = import_stream(study, fh, "gsm8k-solutions")
    assert report.committed and report.traces_created == 5276 and report.steps_created == 17876
    with GSM8K.open("rb") as fh:
        again = import_stream(study, fh, "gsm8k-solutions")
    assert again.traces_created == 0 and again.unchanged == 1319 + 5276
    assert Trace.objects.filter(study=study).count() == 5276
