from __future__ import annotations

from celery import shared_task

from annotation import services


@shared_task(bind=True, acks_late=True, autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=5)
def import_job(self, job_id: int) -> None:
    # Safe to run twice: a finished job is not claimed again, and a re-run after
    # a crash finds the rolled-back transaction and imports from scratch.
    services.run_import_job(job_id)
