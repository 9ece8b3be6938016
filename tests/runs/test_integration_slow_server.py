"""The run engine under a server slower than the lease (issue 15), through
the real stack: PostgreSQL, Redis, a `celery worker` with two prefork
processes, and the fake OpenAI-compatible server answering after 5 s while
chunks are leased for 2 s.

Today's main renewed leases and looked for a cancel only when a slot freed
up, and its prefork children shared one holder name: the chunk's lease
lapsed mid-request, `judge --wait` re-queued it, the second process took it
too and both asked the server the same questions; a cancel waited for every
retry to run out."""

from __future__ import annotations

import time

import pytest
from django.core.management import call_command
from django.db.models import Count

from annotation import jobs
from annotation.models import Job, LabelHistory, StepLabel
from judges import services
from judges.models import JudgeTraceResult
from reasonaudit.celery import app as celery_app
from tests import integration
from tests.judges.conftest import trace_records
from tests.runs.fake_openai import FakeOpenAI, Fault

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LEASE = 2.0
ANSWER = 5.0
# Worker settings: a 2 s lease; retries soon enough that a cancel has retries to stop.
WORKER_ENV = {"RUN_CHUNK_LEASE_SECONDS": str(LEASE), "RUN_RETRY_BASE_SECONDS": "0.2", "RUN_RETRY_MAX_SECONDS": "0.5"}


@pytest.fixture
def worker(tmp_path, settings):
    ok, why = integration.services_configured()
    integration.require(ok, why)
    integration.require(integration.redis_reachable(), "Redis is not reachable")
    settings.RUN_CHUNK_LEASE_SECONDS = LEASE  # the CLI's --wait re-queues after a lease without progress
    name = integration.new_queue()
    old = celery_app.conf.task_default_queue, celery_app.conf.task_always_eager
    celery_app.conf.task_default_queue, celery_app.conf.task_always_eager = name, False
    proc = integration.Worker(name, tmp_path / "worker.log", env=WORKER_ENV)  # prefork, two processes
    proc.start()
    yield proc
    proc.stop()
    celery_app.conf.task_default_queue, celery_app.conf.task_always_eager = old


@pytest.fixture
def slow_server():
    server = FakeOpenAI(latency=ANSWER).start()
    yield server
    server.stop()


def _judge(study, server, **fields):
    judge, _ = services.do_save_judge(study, {"name": "slow", "model": "fake", "base_url": server.url,
                                              "concurrency": 2, "max_retries": 3, "timeout_seconds": 30.0, **fields})
    return judge


def test_every_trace_is_requested_exactly_once_though_answers_outlast_the_lease(worker, slow_server, study,
                                                                                do_import, capsys):
    assert do_import(trace_records(6)).committed
    judge = _judge(study, slow_server)
    # `judge --wait` follows the run as a researcher would (and re-queues a chunk
    # whose lease ran out): three rounds of two 5 s answers.
    call_command("judge", "--study", study.name, "--judge", "slow", "--wait")
    out = capsys.readouterr().out
    assert "succeeded: 6 of 6 traces judged, 0 failed" in out, (out, worker.log.read_text()[-3000:])
    assert slow_server.item_counts() == {str(n): 1 for n in range(6)}
    run = judge.runs.get()
    assert run.requests == 6 and run.chunks.get().attempts == 1
    assert JudgeTraceResult.objects.filter(judge=judge, status="ok").count() == 6
    labels = StepLabel.objects.filter(judge=judge)
    assert labels.count() == 18 and not labels.values("step").annotate(n=Count("pk")).filter(n__gt=1).exists()
    assert LabelHistory.objects.filter(source_name="slow").count() == 18


def test_a_cancel_stops_new_requests_within_two_seconds_and_ends_the_run_within_one_request(worker, slow_server,
                                                                                           study, do_import):
    # Every answer is a 503 after 5 s: slots go from request to back-off to retry and never free up.
    slow_server.rule(lambda body: True, Fault(status=503, message="overloaded"))
    assert do_import(trace_records(8)).committed
    judge = _judge(study, slow_server, max_retries=10)
    run = services.do_start_run(judge)
    deadline = time.monotonic() + 60
    while slow_server.count < 2 and time.monotonic() < deadline:  # both slots busy
        time.sleep(0.05)
    assert slow_server.count >= 2, worker.log.read_text()[-3000:]
    time.sleep(1.0)  # in the middle of the requests
    cancelled_at = time.monotonic()
    jobs.cancel(Job.objects.get(pk=run.job_id))
    # Bounded waits for behaviour, generous against a loaded 2-core machine:
    # the heartbeat reads the cancel flag every 0.5 s and stops every retry
    # and queued trace; the two requests in flight end within one answer time.
    job = Job.objects.get(pk=run.job_id)
    while not job.finished and time.monotonic() < cancelled_at + 60:
        time.sleep(0.1)
        job = Job.objects.get(pk=run.job_id)
    ended = time.monotonic() - cancelled_at
    assert job.status == Job.Status.CANCELLED, worker.log.read_text()[-3000:]
    assert ended <= ANSWER + 3.0, ended
    assert slow_server.started_after(cancelled_at + 2.0) == 0
    time.sleep(ANSWER)  # and nothing more comes later either
    assert slow_server.started_after(cancelled_at + 2.0) == 0
