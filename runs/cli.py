"""What every command that starts a run of model calls shares (RunCommand): the
study, ``--force``, ``--budget``, ``--wait``, ``--cancel``, starting through the
kind's service, following the job to its end with a progress bar (``--wait``
follows a worker for every kind; with Celery eager the work runs here), the
report with the run's usage line, and exit status 1 unless every item succeeded."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.core.management.base import CommandError

from annotation import jobs
from annotation.commands import RefusingCommand
from annotation.management.commands._progress import Bar
from annotation.models import Job, Study
from runs import engine, params
from runs.engine import RunConflict
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


def run_of(row: Any) -> Run:
    """The engine's Run of a kind's row (a kind without a row of its own uses the Run itself)."""
    return row if isinstance(row, Run) else row.run


class RunCommand(RefusingCommand):
    """A command that starts (or cancels) runs of one kind. A subclass adds its own arguments in
    ``add_kind_arguments`` and calls ``start_and_follow`` with a function that starts the run through
    the kind's service; ``describe`` and ``report`` say what was started and what it did."""

    requires_system_checks: list[str] = []
    noun = "item"  # what an item is, in the progress bar and the report
    done_word = "done"  # "4 of 4 traces judged"
    # A command whose stdout is data (scan prints its validation report there as JSON, for scripts and jq)
    # writes the run's lines (what was started, "queued", the report) to stderr instead.
    data_on_stdout = False

    def say(self, line: str) -> None:
        (self.stderr if self.data_on_stdout else self.stdout).write(line)

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", required=True)
        self.add_kind_arguments(parser)
        parser.add_argument("--force", action="store_true", help="ask again even where a cached answer exists")
        parser.add_argument("--budget", type=params.cli_type("budget_usd"),
                            help=f"stop once the estimated cost reaches this many USD ({params.range_text('budget_usd')})")
        parser.add_argument("--wait", action="store_true", help="show progress and wait for the end (a worker does the work)")
        parser.add_argument("--cancel", action="store_true", help="cancel the run in progress instead")

    def add_kind_arguments(self, parser) -> None:  # noqa: B027 - a kind may have none
        pass

    def find_study(self, opts: dict) -> Study:
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        return study

    def cancel_runs(self, rows: Iterable[Any], what: str) -> None:
        rows = list(rows)
        if not rows:
            self.say(f"{what} has no run in progress")
        for row in rows:
            job = jobs.cancel(row.job)
            self.say(f"run {row.pk} (job {job.pk}): {'cancelled' if job.finished else 'cancel requested'}")

    def describe(self, row: Any) -> str:
        return f"{run_of(row).kind} run {row.pk} (job {row.job.pk}): {row.job.total} {self.noun}s"

    def report(self, row: Any) -> str:
        """The kind's own figures, after the run ended ("" for none)."""
        return ""

    def start_and_follow(self, start: Callable[[bool], Any], opts: dict, *, label: str,
                         errors: tuple[type[Exception], ...] = ()) -> tuple[Any, Job | None]:
        """Start a run with ``start(queue)``; without --wait (and not eager) say it is queued and return
        (row, None); else follow it to the end, print the report, and return (row, the ended job)."""
        from reasonaudit.celery import app as celery_app

        eager = celery_app.conf.task_always_eager
        try:
            row = start(not eager)
        except (RunConflict, ValueError, *errors) as exc:
            raise CommandError(str(exc)) from None
        run = run_of(row)
        self.say(self.describe(row))
        if not (opts["wait"] or eager):
            self.say(f"queued; follow it with --wait, or on the web page of job {row.job.pk}")
            return row, None
        job = to_the_end(row.job, label=label, unit=self.noun, show=sys.stderr.isatty() or opts["wait"],
                         run_here=(lambda bar: engine.run_inline(run, progress=bar)) if eager else None)
        row.refresh_from_db()
        run.refresh_from_db()
        extra = self.report(row)
        self.say(f"{job.status}: {job.done} of {job.total} {self.noun}s {self.done_word}, {job.failed} failed; "
                 f"{extra + '; ' if extra else ''}{usage(run)}")
        for note, n in run.notes.items():
            self.stderr.write(f"warning: {note} ({n} {self.noun}{'s' if n != 1 else ''})")
        if job.error:
            self.stderr.write(job.error)
        return row, job

    @staticmethod
    def exit_status(job: Job | None) -> None:
        """Exit 1 unless the run succeeded (failed, partial or cancelled)."""
        if job is not None and job.status != Job.Status.SUCCEEDED:
            sys.exit(1)
