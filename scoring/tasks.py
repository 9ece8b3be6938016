from __future__ import annotations

from typing import Any

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


def _run_export(task: Any, job_id: int) -> None:
    # Takes a job id and re-reads everything; a finished job is never run again (export_jobs.run_export_job).
    from scoring import export_jobs  # pandas, pyarrow and the core load in the worker only

    try:
        export_jobs.run_export_job(job_id, final_attempt=task.request.retries >= task.max_retries)
    except export_jobs.TRANSIENT_ERRORS as exc:
        if task.request.retries >= task.max_retries or task.request.is_eager:
            raise
        raise task.retry(exc=exc, countdown=min(120, 5 * 2**task.request.retries)) from exc


@shared_task(bind=True, acks_late=True, max_retries=3)
def run_export(self, job_id: int) -> None:
    """An export job (``Job`` kind "export"), queued by name by scoring.export_jobs."""
    _run_export(self, job_id)


@shared_task(bind=True, acks_late=True, max_retries=3, name="agreement.tasks.run_export")
def run_export_under_its_old_name(self, job_id: int) -> None:
    """The task's name before it moved here from agreement.tasks: an export queued before a deploy waits in
    the broker under that name (and a late-acknowledged one is re-delivered under it), so it stays registered."""
    _run_export(self, job_id)
