"""Celery task of export jobs (``Job`` kind "export").

Found by Celery's autodiscovery (``agreement`` is an app). Takes
a job id and re-reads everything; a finished job is never run again.
"""

from __future__ import annotations

from celery import shared_task


@shared_task(bind=True, acks_late=True, max_retries=3)
def run_export(self, job_id: int) -> None:
    from agreement import exports as agreement_exports  # pandas, pyarrow and the core load in the worker only

    try:
        agreement_exports.run_export_job(job_id, final_attempt=self.request.retries >= self.max_retries)
    except agreement_exports.TRANSIENT_ERRORS as exc:
        if self.request.retries >= self.max_retries or self.request.is_eager:
            raise
        raise self.retry(exc=exc, countdown=min(120, 5 * 2**self.request.retries)) from exc
