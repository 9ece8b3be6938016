"""Job life cycle shared by every kind of background work."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.models import Job
from reasonlib.refusals import Conflicting

_PROGRESS_TTL = 24 * 3600
#: The error of a job that was created but could not be queued: it ends failed with it at once.
BROKER_DOWN = "the task queue is not reachable; the job was not started (try again once it is up)"


class RunConflict(Conflicting):
    """Work of this kind is already in progress on the same thing (one run per judge or subject model,
    one probe per subject model). One exception for every kind of run: the API answers 409 with the message
    (annotation.api.errors), the web pages show it where the form was (annotation.middleware)."""


def _key(job_id: int) -> str:
    return f"job-progress:{job_id}"


def _register(app: Any, name: str) -> None:
    """Have Celery know the task ``name``, or raise LookupError.

    The module the name starts with is imported first (``scoring.tasks`` for ``scoring.tasks.recompute_scores``):
    that registers most tasks. Only a name it does not register (a task kept under an old name) falls back to
    Celery's own discovery, which imports every app's ``tasks`` module and, through Celery's Django fixup, first
    runs every system check, the whole URL conf with it: about half a second of CPU in every CLI import that queues
    its score recompute (docs/benchmarks.md, "Import")."""
    if name in app.tasks:
        return
    module = name.rpartition(".")[0]
    try:
        import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
            raise  # a module that exists failed to import one of its own: not a question of the name
    if name not in app.tasks:
        app.loader.import_default_modules()
    if name not in app.tasks:
        raise LookupError(f"no Celery task named {name!r}")


def queue_task(name: str, *args: Any, countdown: float | None = None):
    """Queue the Celery task ``name`` (e.g. ``"scoring.tasks.recompute_scores"``)
    now; raises kombu's OperationalError when the broker is down.

    By name because tasks call services: a services module that imported its
    tasks module would close an import cycle. Celery registers an app's tasks
    when its ``tasks`` module is imported -- always in a worker, but in a web or
    CLI process only once something imports it -- so an unknown name first has
    Celery import every app's ``tasks`` module (the worker's own discovery), and
    eager mode runs the real task in-process. A wrong name fails here, in the
    caller, never on the broker.
    """
    from celery import current_app

    app = current_app
    _register(app, name)
    task = app.tasks[name]
    if countdown:
        return task.apply_async(args, countdown=countdown)
    return task.delay(*args)


def queue(task_name: str, *args: Any, countdown: float | None = None) -> None:
    """``queue_task`` once the current transaction commits, so a worker never
    looks for a row that is not committed yet. The name is checked now, so a
    wrong one fails in the caller rather than in a commit hook."""
    from celery import current_app

    _register(current_app, task_name)
    transaction.on_commit(lambda: queue_task(task_name, *args, countdown=countdown))


_LINKERS: list[Callable[[Job], str | None]] = []


def register_link(linker: Callable[[Job], str | None]) -> None:
    """A higher app tells the job page where a job's details are (runs: the page of the run's kind),
    so this app needs to know no kind of work."""
    _LINKERS.append(linker)


def details_link(job: Job) -> str | None:
    for linker in _LINKERS:
        url = linker(job)
        if url:
            return url
    return None


def report_progress(job_id: int, done: int, total: int, failed: int = 0) -> None:
    """Publish progress outside any transaction the job may hold open."""
    cache.set(_key(job_id), {"done": done, "total": total, "failed": failed}, _PROGRESS_TTL)


def live_progress(job: Job) -> dict[str, int]:
    """The freshest progress: the cache while running, the row once finished."""
    if not job.finished:
        live = cache.get(_key(job.pk))
        if live:
            return live
    return {"done": job.done, "total": job.total, "failed": job.failed}


def recompute_pending(study_id: int, job: Job | None, read_at) -> bool:
    """A score job queued for the study since ``read_at`` (each change of the data queues one, or joins one
    still queued), other than ``job``: what a job computed from data read at ``read_at`` may be older than the
    data, so the stored results it writes are stale (agreement.stored, annotation.study_summary_writer,
    faithfulness.evidence)."""
    queued = Job.objects.filter(study_id=study_id, kind=Job.Kind.SCORE, status=Job.Status.QUEUED,
                                created_at__gte=read_at)
    if job is not None:
        queued = queued.exclude(pk=job.pk)
    return queued.exists()


def claim(job_id: int) -> bool:
    """Mark the job running. Re-delivery after a worker crash finds it running
    already and may resume it; a finished or cancelled job is never re-run."""
    return bool(
        Job.objects.filter(pk=job_id)
        .filter(Q(status=Job.Status.QUEUED) | Q(status=Job.Status.RUNNING))
        .update(status=Job.Status.RUNNING, started_at=timezone.now())
    )


def finish(job_id: int, *, status: str, result: dict[str, Any] | None = None, error: str = "",
           if_running: bool = False, **counts: int) -> None:
    """End a job. ``if_running``: only a job still running (a cancel that ended it first wins)."""
    updates: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "error": error, **counts}
    if result is not None:
        updates["result"] = result
    rows = Job.objects.filter(pk=job_id)
    if if_running:
        rows = rows.filter(status=Job.Status.RUNNING)
    rows.update(**updates)
    cache.delete(_key(job_id))


# Kinds of job whose work never looks at cancel_requested (one short call, e.g. the probe of a model
# server): a cancel ends them at once, and their work finishes them only if they are still running.
_ENDED_BY_CANCEL: set[str] = set()


def end_on_cancel(kind: str) -> None:
    """Register a kind of job that a cancel ends at once (from the owning app's AppConfig.ready)."""
    _ENDED_BY_CANCEL.add(kind)


def cancel(job: Job) -> Job:
    """Ask a job to stop; one that has not started stops at once."""
    Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(
        status=Job.Status.CANCELLED, cancel_requested=True, finished_at=timezone.now()
    )
    running = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING)
    if job.kind in _ENDED_BY_CANCEL:
        running.update(status=Job.Status.CANCELLED, cancel_requested=True, finished_at=timezone.now())
    else:
        running.update(cancel_requested=True)
    job.refresh_from_db()
    return job
