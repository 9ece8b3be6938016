from __future__ import annotations

from celery import shared_task


@shared_task(bind=True, acks_late=True, max_retries=5)
def recompute_scores(self, job_id: int) -> None:
    # Takes an id and re-reads everything; a re-delivered or retried task
    # replaces the same score sets again (services.run_score_job).
    from scoring import services  # pandas and the core load in the worker only

    try:
        services.run_score_job(job_id, final_attempt=self.request.retries >= self.max_retries)
    except services.TRANSIENT_ERRORS as exc:
        if self.request.retries >= self.max_retries:
            raise
        raise self.retry(exc=exc, countdown=min(300, 5 * 2**self.request.retries)) from exc


# Autodiscovery imports this module only; the export task lives beside the
# export code and registers through this import (it is light: no pandas).
from scoring import agreement_tasks  # noqa: E402,F401
