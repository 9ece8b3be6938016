from django.core.management.base import CommandError

from judges import services
from judges.models import JudgeConfig, JudgeRun
from runs.cli import RunCommand


class Command(RunCommand):
    help = ("Queue a judge run over a study's traces; --wait follows it to the end "
            "(exit 1 unless every trace succeeded: failed, partial or cancelled).")
    noun = "trace"
    done_word = "judged"

    def add_kind_arguments(self, parser):
        parser.add_argument("--judge", required=True, help="judge name, e.g. mechanistic")
        parser.add_argument("--traces", choices=JudgeRun.Scope.values, default=JudgeRun.Scope.ALL)
        parser.add_argument("--model", help="only the traces of this model")

    def handle(self, *args, **opts):
        study = self.find_study(opts)
        judge = JudgeConfig.objects.filter(study=study, name=opts["judge"]).first()
        if judge is None:
            names = ", ".join(study.judges.values_list("name", flat=True))
            raise CommandError(f"no judge named {opts['judge']!r} in {study.name!r} (judges: {names})")
        if opts["cancel"]:
            return self.cancel_runs(services.active_runs([judge]), f"judge {judge.name}")
        _, job = self.start_and_follow(
            lambda queue: services.do_start_run(judge, scope=opts["traces"], filters={"model": opts["model"]},
                                                force=opts["force"], budget_usd=opts["budget"], queue=queue),
            opts, label=f"judge {judge.name}")
        self.exit_status(job)

    def describe(self, run: JudgeRun) -> str:
        n = run.job.total
        return f"judge run {run.pk} (job {run.job.pk}): {run.judge.name} over {n} trace{'s' if n != 1 else ''}"

    def report(self, run: JudgeRun) -> str:
        return (f"labels {run.labels_created} new, {run.labels_changed} changed, {run.labels_unchanged} unchanged; "
                f"{run.warnings} warnings")
