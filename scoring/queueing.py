"""Queue a Celery task by its name, so that the module that queues work need
not import the module of the task (which imports it back: tasks call
services). Used by ``scoring.services`` and ``agreement.exports``.

Celery registers an app's tasks when its ``tasks`` module is imported:
always in a worker (autodiscovery at start-up), but in a web or CLI process
only once something imports it. A name that is not registered yet makes
Celery import every app's ``tasks`` module (``import_default_modules``, the
worker's own discovery; the modules are light) before queueing, so eager
mode (tests, ``CELERY_TASK_ALWAYS_EAGER``) runs the real task in-process
instead of sending an unknown name to the broker.
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from celery.result import AsyncResult


def queue_task(name: str, *args: Any, countdown: float = 0) -> AsyncResult:
    """Queue the task ``name`` (e.g. ``"scoring.tasks.recompute_scores"``)
    with ``args``; raises kombu's OperationalError when the broker is down."""
    app = current_app
    if name not in app.tasks:
        app.loader.import_default_modules()
    if name not in app.tasks:
        raise LookupError(f"no Celery task named {name!r}")
    task = app.tasks[name]
    if countdown > 0:
        return task.apply_async(args, countdown=countdown)
    return task.delay(*args)
