"""An export job through the real stack: the API queues the task by its
name (``scoring.tasks.run_export``, annotation.jobs.queue_task) and a Celery worker
process runs it (PostgreSQL, Redis, a worker)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from annotation.models import Job
from tests.scoring.conftest import records
from tests.test_integration_services import wait_for, worker  # noqa: F401  (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_an_export_job_runs_on_the_worker(worker, study, owner, do_import, settings):  # noqa: F811
    do_import(records())
    settings.CELERY_TASK_ALWAYS_EAGER = False
    client = APIClient()
    client.force_authenticate(owner)
    response = client.post(f"/api/v1/studies/{study.pk}/exports/", {"what": "labels", "format": "jsonl"},
                           format="json")
    assert response.status_code == 202, response.content
    job = wait_for(response.json()["id"])
    assert job.status == Job.Status.SUCCEEDED, (job.error, worker.log.read_text()[-3000:])
    assert job.result["rows"] > 0 and job.output_file
