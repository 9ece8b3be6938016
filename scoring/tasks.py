from __future__ import annotations

from celery import shared_task


@shared_task(bind=True, acks_late=True, max_retries=5)
def recompute_scores(self, job_id: int) -> None:
    # Takes an id and re-reads everything; a re-delivered or retried task
    # replaces the same score sets again (score_jobs.run_score_job).
    from scoring import score_jobs  # pandas and the core load in the worker only

    try:
        score_jobs.run_score_job(job_id, final_attempt=self.request.retries >= self.max_retries)
    except score_jobs.TRANSIENT_ERRORS as exc:
        if self.request.retries >= self.max_retries:
            raise
        raise self.retry(exc=exc, countdown=min(300, 5 * 2**self.request.retries)) from exc
