"""What every command that starts a run of model calls shows on the terminal:
following a queued job with a progress bar, and the run's usage line."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.core.management.base import CommandError

from annotation import jobs
from annotation.management.commands._progress import Bar
from annotation.models import Job
from runs import engine
from runs.models import Run


def follow(job: Job, bar: Bar) -> Job:
    """Poll a queued job until it ends, drawing its live progress. Ctrl-C stops
    waiting, not the job."""
    last, changed = None, time.monotonic()
    try:
        while True:
            job.refresh_from_db()
            progress = jobs.live_progress(job)
            bar(progress["done"], progress["total"])
            if job.finished:
                return job
            if progress != last:
                last, changed = progress, time.monotonic()
            elif time.monotonic() - changed > engine.lease_seconds():
                # No progress for a whole lease: a worker may have died with our chunk
                # (a live worker renews its lease, so its chunk is left alone).
                engine.resume_stalled()
                changed = time.monotonic()
            time.sleep(0.5)
    except KeyboardInterrupt:
        bar.close()
        raise CommandError(f"stopped waiting; job {job.pk} goes on (cancel it with --cancel)") from None


def to_the_end(job: Job, *, label: str, unit: str, show: bool, run_here: Callable[[Bar], Job] | None = None) -> Job:
    """Draw a progress bar until a run's job ends: the work done in this process by ``run_here`` (Celery
    eager, or a command that runs its own work), else the worker's progress followed."""
    bar = Bar(label, unit=unit, unit_scale=False, enabled=show)
    try:
        return run_here(bar) if run_here is not None else follow(job, bar)
    finally:
        bar.close()


def usage(run: Run) -> str:
    """Requests, cache hits, tokens and cost; with calls whose tokens the server
    never reported, the cost is a lower bound ("+")."""
    unknown = f" (+ unknown in {run.unknown_token_calls} calls)" if run.unknown_token_calls else ""
    return (f"{run.requests} requests, {run.cache_hits} cache hits, {run.prompt_tokens}+{run.completion_tokens} tokens"
            f"{unknown}, ${run.cost_usd:.4f}{'+' if run.unknown_token_calls else ''}")
