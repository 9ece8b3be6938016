"""Celery tasks of runs. They take ids, re-read state, and are safe to run
twice (runs.engine: chunks are claimed, and committed only by their holder)."""

from __future__ import annotations

import logging
import time

from celery import shared_task
from celery.signals import worker_process_init, worker_ready
from django.conf import settings
from django.db import connection

from runs import engine, identity

log = logging.getLogger(__name__)


def _queue(chunk_id: int) -> None:
    for attempt in range(3):
        try:
            engine.queue_chunk(chunk_id)
            return
        except Exception:  # the broker hiccuped; a lost link is found again when a worker starts
            log.exception("could not queue run chunk %s (attempt %d)", chunk_id, attempt + 1)
            time.sleep(1 + attempt)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, name=engine.CHUNK_TASK)
def run_chunk(self, chunk_id: int) -> None:
    holder = identity.holder(self.request.hostname)
    # Go on with the next chunks in this task for up to RUN_TASK_SECONDS: a
    # hand-off through the broker costs up to a second per chunk (the
    # filesystem transport polls), yet every chunk still commits on its own
    # (while the next one's first requests are in flight), so a killed worker
    # loses two chunks at most. Eager mode loops to the end.
    deadline = time.monotonic() + float(getattr(settings, "RUN_TASK_SECONDS", 60))
    pipeline = engine.ChunkPipeline(holder)
    try:
        nxt = pipeline.process(chunk_id)
        while nxt is not None and (self.request.is_eager or time.monotonic() < deadline):
            nxt = pipeline.process(nxt)
        pipeline.flush()
    except Exception as exc:
        again = pipeline.release_failed(f"{type(exc).__name__}: {exc}")
        if again is None or self.request.is_eager:
            raise
        log.exception("run chunk %s failed; trying again", again)
        self.apply_async(args=[again], countdown=5)
        return
    if nxt is not None:
        _queue(nxt)


@shared_task(acks_late=True, reject_on_worker_lost=True, name=engine.PLAN_TASK)
def plan_run(run_id: int) -> None:
    """Plan a run's items in a worker (runs.engine.plan_run), then queue its first chunks."""
    engine.plan_run(run_id)


@shared_task(name="runs.tasks.resume_stalled_runs")
def resume_stalled_runs() -> None:
    """For celery beat (optional): re-queue chunks whose worker's lease ran out."""
    engine.resume_stalled()


@worker_ready.connect
def _resume_stalled_runs(sender=None, **kwargs) -> None:
    hostname = getattr(sender, "hostname", None)
    try:
        queued = engine.resume_stalled(hostname, identity.BOOT_ID)
        if queued:
            log.warning("resumed run chunks %s left by a stopped worker", queued)
    except Exception:  # never keep a worker from starting
        log.exception("could not look for stalled runs")
    finally:
        connection.close()  # the pool's children have their own


@worker_process_init.connect
def _import_the_model_client(**kwargs) -> None:
    """Import openai (about a second and a half of CPU) when a pool process
    starts, not inside the first chunk of the first run it is given."""
    try:
        import openai  # noqa: F401
    except ImportError:  # a worker without the client can still do the runs that call no model
        pass
