"""A judge run through the real stack: the API queues it on Redis, a Celery
worker process runs it against the fake OpenAI-compatible server and writes
to PostgreSQL; the worker is SIGKILLed mid-run, a new one starts, and the run
finishes with no label lost and none duplicated."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from django.db.models import Count
from rest_framework.test import APIClient

from annotation.models import Job, LabelHistory, Step, StepLabel
from judges import services
from judges.models import JudgeTraceResult
from reasonaudit.celery import app as celery_app
from runs.models import RunChunk
from tests import integration
from tests.judges.conftest import trace_records
from tests.runs.fake_openai import FakeOpenAI

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def queue(tmp_path):
    ok, why = integration.services_configured()
    integration.require(ok, why)
    integration.require(integration.redis_reachable(), "Redis is not reachable")
    name = integration.new_queue()
    # Publish to the workers' private queue, and really publish (tests default to eager).
    old = celery_app.conf.task_default_queue, celery_app.conf.task_always_eager
    celery_app.conf.task_default_queue, celery_app.conf.task_always_eager = name, False
    yield name
    celery_app.conf.task_default_queue, celery_app.conf.task_always_eager = old


@pytest.fixture
def workers(queue, tmp_path):
    started: list[integration.Worker] = []

    def start(n: int) -> integration.Worker:
        worker = integration.Worker(queue, tmp_path / f"worker-{n}.log")
        worker.start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(entry.name))
    return kids


def kill_hard(worker: integration.Worker) -> None:
    """SIGKILL the worker and its pool processes: no shutdown, no acks."""
    pids = [worker.proc.pid, *_children(worker.proc.pid)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    worker.proc.wait(10)


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_run_survives_a_killed_worker_with_no_lost_and_no_duplicated_labels(workers, study, owner, do_import):
    server = FakeOpenAI(latency=0.1).start()
    try:
        assert do_import(trace_records(300)).committed
        judge, _ = services.do_save_judge(study, {"name": "gpt", "model": "fake", "base_url": server.url,
                                                  "concurrency": 4, "max_retries": 3})
        first = workers(1)
        client = APIClient()
        client.force_authenticate(owner)
        response = client.post(f"/api/v1/studies/{study.pk}/judge-runs/", {"judge": "gpt"}, format="json")
        assert response.status_code == 202, response.content
        job_id = response.json()["job"]
        run = Job.objects.get(pk=job_id).judge_run
        assert run.chunks.count() == 6  # 300 traces in chunks of 52 (13 rounds of 4)

        # Kill it in the middle of a chunk, after at least one chunk was committed.
        wait_until(lambda: run.chunks.filter(status="done").exists() and run.chunks.filter(status="running").exists()
                   and server.count > Job.objects.get(pk=job_id).done + 8, 60, "a chunk in progress")
        kill_hard(first)
        at_kill = Job.objects.get(pk=job_id)
        assert at_kill.status == Job.Status.RUNNING and 0 < at_kill.done < 300
        assert run.chunks.filter(status=RunChunk.Status.RUNNING).count() == 1  # orphaned

        second = workers(2)  # same queue, same node name: it takes the orphaned chunk over
        job = wait_until(lambda: (j := Job.objects.get(pk=job_id)).finished and j, 90, "the run to finish")
        assert job.status == Job.Status.SUCCEEDED, (job.error, second.log.read_text()[-3000:])
        assert (job.done, job.total, job.failed) == (300, 300, 0)

        steps = Step.objects.filter(trace__study=study).count()
        labels = StepLabel.objects.filter(kind=StepLabel.Kind.JUDGE, judge=judge)
        assert steps == 900 and labels.count() == 900
        assert not labels.values("step").annotate(n=Count("pk")).filter(n__gt=1).exists()
        assert JudgeTraceResult.objects.filter(judge=judge, status="ok").count() == 300
        # each label was created once: the killed chunk's transaction left nothing behind
        assert LabelHistory.objects.filter(source_name="gpt").count() == 900
        run.refresh_from_db()
        assert run.labels_created == 900
        # Answers received before the kill were cached and not asked for again;
        # only the requests in flight at the kill (at most `concurrency`) were lost.
        assert run.cache_hits > 0
        assert 0 <= server.count - (run.requests + run.cache_hits) <= 4
        assert "resumed run chunks" in second.log.read_text()
    finally:
        server.stop()


def test_the_cli_waits_for_a_run_on_a_real_worker_and_reports(workers, study, do_import, capsys):
    from django.core.management import call_command

    assert do_import(trace_records(40)).committed
    workers(1)
    call_command("judge", "--study", study.name, "--judge", "mechanistic", "--wait")
    out = capsys.readouterr()
    assert "succeeded: 40 of 40 traces judged, 0 failed" in out.out and "120 new" in out.out
    assert "trace" in out.err  # the progress bar
    assert StepLabel.objects.filter(kind=StepLabel.Kind.JUDGE).count() == 120
