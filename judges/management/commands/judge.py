import sys

from django.core.management.base import BaseCommand, CommandError

from annotation import jobs
from annotation.models import Job, Study
from judges import services
from judges.models import JudgeConfig, JudgeRun
from reasonaudit.celery import app as celery_app
from runs import cli


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = ("Queue a judge run over a study's traces; --wait follows it to the end "
            "(exit 1 unless every trace succeeded: failed, partial or cancelled).")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--judge", required=True, help="judge name, e.g. mechanistic")
        parser.add_argument("--traces", choices=JudgeRun.Scope.values, default=JudgeRun.Scope.ALL)
        parser.add_argument("--model", help="only the traces of this model")
        parser.add_argument("--force", action="store_true", help="ask again even where a cached answer exists")
        parser.add_argument("--budget", type=float, help="stop once the estimated cost reaches this many USD")
        parser.add_argument("--wait", action="store_true", help="show progress and wait for the end")
        parser.add_argument("--cancel", action="store_true", help="cancel the judge's run in progress instead")

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        judge = JudgeConfig.objects.filter(study=study, name=opts["judge"]).first()
        if judge is None:
            names = ", ".join(study.judges.values_list("name", flat=True))
            raise CommandError(f"no judge named {opts['judge']!r} in {study.name!r} (judges: {names})")
        if opts["cancel"]:
            return self._cancel(judge)
        eager = celery_app.conf.task_always_eager
        try:
            run = services.do_start_run(judge, scope=opts["traces"], filters={"model": opts["model"]},
                                        force=opts["force"], budget_usd=opts["budget"], queue=not eager)
        except (services.RunConflict, ValueError) as exc:
            raise CommandError(str(exc)) from None
        job = run.job
        self.stdout.write(f"judge run {run.pk} (job {job.pk}): {judge.name} over {job.total} trace"
                          f"{'s' if job.total != 1 else ''}")
        if not (opts["wait"] or eager):
            self.stdout.write(f"queued; follow it with: judge --study {study.name!r} --judge {judge.name} ... --wait, "
                              f"or on the web page of job {job.pk}")
            return
        job = cli.to_the_end(job, label=f"judge {judge.name}", unit="trace", show=sys.stderr.isatty() or opts["wait"],
                             run_here=(lambda bar: services.run_inline(run, progress=bar)) if eager else None)
        self._report(run, job)
        if job.status != Job.Status.SUCCEEDED:
            sys.exit(1)

    def _report(self, run: JudgeRun, job: Job) -> None:
        run.refresh_from_db()
        self.stdout.write(
            f"{job.status}: {job.done} of {job.total} traces judged, {job.failed} failed; labels "
            f"{run.labels_created} new, {run.labels_changed} changed, {run.labels_unchanged} unchanged; "
            f"{cli.usage(run.run)}; {run.warnings} warnings"
        )
        for note, n in run.notes.items():
            self.stderr.write(f"warning: {note} ({n} trace{'s' if n != 1 else ''})")
        if job.error:
            self.stderr.write(job.error)

    def _cancel(self, judge: JudgeConfig) -> None:
        active = list(services.active_runs([judge]))
        if not active:
            self.stdout.write(f"judge {judge.name} has no run in progress")
            return
        for run in active:
            job = jobs.cancel(run.job)
            self.stdout.write(f"run {run.pk} (job {job.pk}): {'cancelled' if job.finished else 'cancel requested'}")
