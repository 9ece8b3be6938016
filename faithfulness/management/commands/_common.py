"""What the interventions and anytime commands share: finding the study and the
subject model, starting (or cancelling) a run, following it with a bar."""

from __future__ import annotations

import sys
from collections.abc import Callable

from django.core.management.base import BaseCommand, CommandError

from annotation import jobs
from annotation.models import Job, Study
from faithfulness import services
from faithfulness.models import FaithfulnessRun
from reasonaudit.celery import app as celery_app
from runs import cli
from subjects.models import SubjectModel


def find(opts: dict) -> SubjectModel:
    study = Study.objects.filter(name=opts["study"]).first()
    if study is None:
        raise CommandError(f"no study named {opts['study']!r}")
    try:
        return services.find_subject(study, opts["model"])
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def add_run_arguments(parser) -> None:
    parser.add_argument("--study", required=True)
    parser.add_argument("--model", required=True, help="subject model name")
    parser.add_argument("--mode", choices=["completions", "prefill", "instructed"],
                        help="continuation mode (default: the one the probe recorded)")
    parser.add_argument("--limit", type=int, help="only the first N traces (by id)")
    parser.add_argument("--force", action="store_true", help="ask again even where a cached answer exists")
    parser.add_argument("--budget", type=float, help="stop once the estimated cost reaches this many USD")
    parser.add_argument("--wait", action="store_true", help="show progress and wait for the end")
    parser.add_argument("--cancel", action="store_true", help="cancel the subject model's run in progress")


def start_and_follow(cmd: BaseCommand, subject: SubjectModel, opts: dict,
                     start: Callable[..., FaithfulnessRun]) -> FaithfulnessRun | None:
    if opts["cancel"]:
        active = list(services.active_runs(subject))
        if not active:
            cmd.stdout.write(f"subject model {subject.name} has no run in progress")
        for frun in active:
            job = jobs.cancel(frun.job)
            cmd.stdout.write(f"run {frun.pk} (job {job.pk}): {'cancelled' if job.finished else 'cancel requested'}")
        return None
    eager = celery_app.conf.task_always_eager
    queue = not (eager or opts["wait"])
    try:
        frun = start(queue=queue)
    except (services.RunConflict, services.ContinuationUnavailable, ValueError) as exc:
        raise CommandError(str(exc)) from None
    job = frun.job
    cmd.stdout.write(f"{frun.kind} run {frun.pk} (job {job.pk}): {subject.name} v{frun.config_version}, mode "
                     f"{frun.mode}, {frun.traces} traces, {job.total} continuation{'s' if job.total != 1 else ''}")
    if queue:
        cmd.stdout.write(f"queued; follow it on the web page of job {job.pk}")
        return frun
    job = cli.to_the_end(job, label=f"{frun.kind} {subject.name}", unit="continuation",
                         show=sys.stderr.isatty() or opts["wait"],
                         run_here=lambda bar: services.run_inline(frun, progress=bar))
    frun.refresh_from_db()
    frun.run.refresh_from_db()
    cmd.stdout.write(f"{job.status}: {job.done} of {job.total} done, {job.failed} failed; {cli.usage(frun.run)}")
    if job.error:
        cmd.stderr.write(job.error)
    if job.status != Job.Status.SUCCEEDED:
        cmd.print_summary(frun)
        sys.exit(1)
    return frun
