import sys

from django.core.management.base import BaseCommand, CommandError

from annotation import jobs
from annotation.models import Job, Study
from reasonaudit.celery import app as celery_app
from runs import cli
from subjects import services
from subjects.models import GenerationRun, SubjectModel


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = ("Queue a generation run: K completions of a subject model for each problem of a study; --wait follows "
            "it to the end (exit 1 unless every problem succeeded).")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--model", required=True, help="subject model name")
        parser.add_argument("--problems", choices=GenerationRun.Scope.values, default=GenerationRun.Scope.ALL,
                            help="all, or only the problems lacking some of their K samples")
        parser.add_argument("--samples", type=int, help="K (default: the subject model's)")
        parser.add_argument("--force", action="store_true", help="ask again even where a cached answer exists")
        parser.add_argument("--budget", type=float, help="stop once the estimated cost reaches this many USD")
        parser.add_argument("--wait", action="store_true", help="show progress and wait for the end")
        parser.add_argument("--cancel", action="store_true", help="cancel the subject model's run in progress")

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        subject = SubjectModel.objects.filter(study=study, name=opts["model"]).select_related("prompt_template").first()
        if subject is None:
            names = ", ".join(study.subject_models.values_list("name", flat=True)) or "none"
            raise CommandError(f"no subject model named {opts['model']!r} in {study.name!r} (subject models: {names})")
        if opts["cancel"]:
            return self._cancel(subject)
        eager = celery_app.conf.task_always_eager
        try:
            gen_run = services.do_start_generation(subject, scope=opts["problems"], samples=opts["samples"],
                                                   force=opts["force"], budget_usd=opts["budget"], queue=not eager)
        except (services.RunConflict, ValueError) as exc:
            raise CommandError(str(exc)) from None
        job = gen_run.job
        self.stdout.write(f"generation run {gen_run.pk} (job {job.pk}): {subject.name} v{gen_run.config_version}, "
                          f"{gen_run.samples} sample(s) for each of {job.total} problem{'s' if job.total != 1 else ''}")
        if not (opts["wait"] or eager):
            self.stdout.write(f"queued; follow it on the web page of job {job.pk}")
            return
        job = cli.to_the_end(job, label=f"generate {subject.name}", unit="problem",
                             show=sys.stderr.isatty() or opts["wait"],
                             run_here=(lambda bar: services.run_inline(gen_run, progress=bar)) if eager else None)
        self._report(gen_run, job)
        if job.status != Job.Status.SUCCEEDED:
            sys.exit(1)

    def _report(self, gen_run: GenerationRun, job: Job) -> None:
        gen_run.refresh_from_db()
        run = gen_run.run
        run.refresh_from_db()
        self.stdout.write(
            f"{job.status}: {job.done} of {job.total} problems done, {job.failed} failed; traces "
            f"{gen_run.traces_created} new, {gen_run.traces_unchanged} unchanged, {gen_run.samples_failed} samples "
            f"failed; {cli.usage(run)}"
        )
        for note, n in run.notes.items():
            self.stderr.write(f"warning: {note} ({n} problem{'s' if n != 1 else ''})")
        if job.error:
            self.stderr.write(job.error)

    def _cancel(self, subject: SubjectModel) -> None:
        active = list(services.active_runs(subject))
        if not active:
            self.stdout.write(f"subject model {subject.name} has no run in progress")
            return
        for gen_run in active:
            job = jobs.cancel(gen_run.job)
            self.stdout.write(f"run {gen_run.pk} (job {job.pk}): {'cancelled' if job.finished else 'cancel requested'}")
