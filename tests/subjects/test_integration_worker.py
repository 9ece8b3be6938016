"""A generation run through the real stack: the API queues it on Redis, a
Celery worker process generates against the fake OpenAI-compatible server and
writes to PostgreSQL; the worker is SIGKILLed mid-run, a new one starts, and
the run finishes with every sample a trace, none duplicated."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from django.db.models import Count
from rest_framework.test import APIClient

from annotation.models import Job, Trace
from runs.models import ResponseCache, RunChunk
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
        # A seed makes each sample's request body its own (seed + sample index), so the server's log tells
        # which sample was asked twice.
        concurrency = 4
        services.do_save_subject(study, {"name": "tiny", "model": "fake", "base_url": server.url,
                                         "concurrency": concurrency, "n_samples": 2, "max_retries": 3, "seed": 0})
        first = workers(1)
        client = APIClient()
        client.force_authenticate(owner)
        response = client.post(f"/api/v1/studies/{study.pk}/generation-runs/", {"model": "tiny"}, format="json")
        assert response.status_code == 202, response.content
        job_id = response.json()["job"]
        run = Job.objects.get(pk=job_id).generation_run
        assert run.run.chunks.count() == 4  # 100 problems in chunks of 26 (52 requests: 13 rounds of 4)

        # Kill while a chunk is in progress with answers already in the cache (a chunk commits whole, so a
        # stored answer beyond the committed samples belongs to the chunk in progress).
        wait_until(lambda: run.run.chunks.filter(status="done").exists()
                   and run.run.chunks.filter(status="running").exists()
                   and ResponseCache.objects.count() > Generation.objects.count(), 60, "a chunk in progress")
        kill_hard(first)
        at_kill = Job.objects.get(pk=job_id)
        assert at_kill.status == Job.Status.RUNNING and 0 < at_kill.done < 100
        assert run.run.chunks.filter(status=RunChunk.Status.RUNNING).count() == 1  # orphaned
        # What the kill left, read after it: the worker is dead, nothing changes until the second starts.
        stored_at_kill, committed_at_kill = ResponseCache.objects.count(), Generation.objects.count()

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
        # No answer is paid for twice once it is stored: the samples served from the cache are exactly
        # those whose answers were stored but not committed when the worker died -- every one of them,
        # whatever the timing of the kill.
        from_cache = Generation.objects.filter(cached=True).count()
        assert from_cache == stored_at_kill - committed_at_kill > 0
        # Each sample is paid for once in the run's accounting: asked by a committed chunk, or from the cache.
        assert run.run.requests + from_cache == 200
        # The server saw every sample, and a sample twice only when the dead worker had sent it and its answer
        # never reached the cache; the server's count is exactly that.
        asked = Counter(json.dumps(seen.body, sort_keys=True) for seen in server.requests)
        again = sum(n - 1 for n in asked.values())
        odd = sorted(asked, key=len)[:2]  # on a failure, the bodies least like a sample's
        assert len(asked) == 200 and max(asked.values()) <= 2, (len(asked), odd)
        assert server.count == 200 + again
        # How many that can be is fixed by the pool (runs.transport.ModelPool._call_all), not by timing: at
        # most 2 x concurrency requests are handed to its threads at once, and the answers of one wait (at
        # most as many again) are being written when the kill may come. It used to be asserted as at most
        # `concurrency`, which a loaded machine broke: threads go on with the queued requests while the
        # chunk's thread stores and commits, so answers come back during its last wait and die uncached.
        assert again <= 4 * concurrency
    finally:
        server.stop()
