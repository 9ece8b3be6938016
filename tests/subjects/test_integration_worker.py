"""A generation run through the real stack: the API queues it on Redis, a
Celery worker process generates against the fake OpenAI-compatible server and
writes to PostgreSQL; the worker is SIGKILLed mid-run, a new one starts, and
the run finishes with every sample a trace, none duplicated."""

from __future__ import annotations

import pytest
from django.db.models import Count
from rest_framework.test import APIClient

from annotation.models import Job, Trace
from runs.models import RunChunk
from subjects import services
from subjects.models import Generation
from tests.judges.test_integration_worker import kill_hard, queue, wait_until, workers  # noqa: F401 (fixtures)
from tests.runs.fake_openai import FakeOpenAI
from tests.subjects.conftest import problem_records

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_generation_run_survives_a_killed_worker_with_no_duplicate_trace(workers, study, owner, do_import):  # noqa: F811
    server = FakeOpenAI(latency=0.1, generation=True).start()
    try:
        assert do_import(problem_records(100)).committed
        services.do_save_subject(study, {"name": "tiny", "model": "fake", "base_url": server.url, "concurrency": 4,
                                         "n_samples": 2, "max_retries": 3})
        first = workers(1)
        client = APIClient()
        client.force_authenticate(owner)
        response = client.post(f"/api/v1/studies/{study.pk}/generation-runs/", {"model": "tiny"}, format="json")
        assert response.status_code == 202, response.content
        job_id = response.json()["id"]
        run = Job.objects.get(pk=job_id).generation_run
        assert run.run.chunks.count() == 4  # 100 problems in chunks of 26 (52 requests: 13 rounds of 4)

        wait_until(lambda: run.run.chunks.filter(status="done").exists()
                   and run.run.chunks.filter(status="running").exists()
                   and server.count > 2 * Job.objects.get(pk=job_id).done + 8, 60, "a chunk in progress")
        kill_hard(first)
        at_kill = Job.objects.get(pk=job_id)
        assert at_kill.status == Job.Status.RUNNING and 0 < at_kill.done < 100
        assert run.run.chunks.filter(status=RunChunk.Status.RUNNING).count() == 1  # orphaned

        second = workers(2)
        job = wait_until(lambda: (j := Job.objects.get(pk=job_id)).finished and j, 90, "the run to finish")
        assert job.status == Job.Status.SUCCEEDED, (job.error, second.log.read_text()[-3000:])
        assert (job.done, job.total, job.failed) == (100, 100, 0)
        traces = Trace.objects.filter(study=study, model="tiny")
        assert traces.count() == 200 and Generation.objects.count() == 200
        assert not traces.values("trace_id").annotate(n=Count("pk")).filter(n__gt=1).exists()
        assert traces.filter(answer_correct=True).count() == 200
        run.refresh_from_db()
        assert run.traces_created == 200
        # Answers that came back before the kill were cached and served again from the cache; only the
        # requests in flight at the kill (at most `concurrency`) were asked twice.
        from_cache = Generation.objects.filter(cached=True).count()
        assert from_cache > 0
        assert 0 <= server.count - run.run.requests - from_cache <= 4
    finally:
        server.stop()
