"""Celery tasks of subject models. Generation runs are tasks of the run
engine (runs.tasks); the probe of the web button and the API is this one."""

from __future__ import annotations

from celery import shared_task

from subjects import services


@shared_task(name=services.PROBE_TASK)
def probe_subject_model(job_id: int) -> None:
    """Probe a subject model's server for its continuation mode (a Job; safe to run twice)."""
    services.run_probe_job(job_id)
