"""Celery tasks of judge runs. They take ids, re-read state, and are safe to
run twice (see judges.services: chunks are claimed and committed once)."""

from __future__ import annotations

import logging
import time
import uuid

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import connection

from judges import services

log = logging.getLogger(__name__)

# One id per worker process tree: prefork children inherit it from the parent
# that imported this module before forking. A worker started again under the
# same node name has another id, so it knows the chunks of the earlier one are orphans.
BOOT_ID = uuid.uuid4().hex[:12]


def _queue(chunk_id: int) -> None:
    for attempt in range(3):
        try:
            services.queue_chunk(chunk_id)
            return
        except Exception:  # the broker hiccuped; a lost link is found again when a worker starts
            log.exception("could not queue judge chunk %s (attempt %d)", chunk_id, attempt + 1)
            time.sleep(1 + attempt)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True)
def judge_chunk(self, chunk_id: int) -> None:
    holder = f"{self.request.hostname or 'worker'}/{BOOT_ID}"
    # Go on with the next chunks in this task for up to JUDGE_TASK_SECONDS: a
    # hand-off through the broker costs up to a second per chunk (the
    # filesystem transport polls), yet every chunk still commits on its own, so
    # a killed worker loses one chunk at most. Eager mode loops to the end.
    deadline = time.monotonic() + float(getattr(settings, "JUDGE_TASK_SECONDS", 60))
    current = chunk_id
    try:
        nxt = services.process_chunk(current, holder)
        while nxt is not None and (self.request.is_eager or time.monotonic() < deadline):
            current = nxt
            nxt = services.process_chunk(current, holder)
    except Exception as exc:
        again = services.release_failed_chunk(current, holder, f"{type(exc).__name__}: {exc}")
        if again is None or self.request.is_eager:
            raise
        log.exception("judge chunk %s failed; trying again", chunk_id)
        self.apply_async(args=[again], countdown=5)
        return
    if nxt is not None:
        _queue(nxt)


@shared_task
def resume_stalled_runs() -> None:
    """For celery beat (optional): re-queue chunks whose worker's lease ran out."""
    services.resume_stalled()


@worker_ready.connect
def _resume_stalled_runs(sender=None, **kwargs) -> None:
    hostname = getattr(sender, "hostname", None)
    try:
        queued = services.resume_stalled(hostname, BOOT_ID)
        if queued:
            log.warning("resumed judge chunks %s left by a stopped worker", queued)
    except Exception:  # never keep a worker from starting
        log.exception("could not look for stalled judge runs")
    finally:
        connection.close()  # the pool's children have their own
