from django.core.management.base import CommandError

from runs import params
from runs.cli import RunCommand
from subjects import services
from subjects.models import GenerationRun, SubjectModel


class Command(RunCommand):
    help = ("Queue a generation run: K completions of a subject model for each problem of a study; --wait follows "
            "it to the end (exit 1 unless every problem succeeded).")
    noun = "problem"

    def add_kind_arguments(self, parser):
        parser.add_argument("--model", required=True, help="subject model name")
        parser.add_argument("--problems", default=GenerationRun.Scope.ALL,
                            help=f"all, missing (the problems lacking some of their K samples), or a filter: "
                                 f"{services.PROBLEM_FILTERS}")
        parser.add_argument("--samples", type=params.cli_type("samples"),
                            help=f"K (default: the subject model's; {params.range_text('samples')})")
        params.add_cohort_argument(parser)

    def handle(self, *args, **opts):
        study = self.find_study(opts)
        subject = SubjectModel.objects.filter(study=study, name=opts["model"]).select_related("prompt_template").first()
        if subject is None:
            names = ", ".join(study.subject_models.values_list("name", flat=True)) or "none"
            raise CommandError(f"no subject model named {opts['model']!r} in {study.name!r} (subject models: {names})")
        if opts["cancel"]:
            return self.cancel_runs(services.active_runs(subject), f"subject model {subject.name}")
        _, job = self.start_and_follow(
            lambda queue: services.do_start_generation(subject, scope=opts["problems"], samples=opts["samples"],
                                                       force=opts["force"], budget_usd=opts["budget"], queue=queue,
                                                       cohort=opts["cohort"]),
            opts, label=f"generate {subject.name}")
        self.exit_status(job)

    def describe(self, record: GenerationRun) -> str:
        n = record.job.total
        return (f"generation run {record.pk} (job {record.job.pk}): {record.subject.name} v{record.config_version}, "
                f"{record.samples} sample(s) for each of {n} problem{'s' if n != 1 else ''}")

    def report(self, record: GenerationRun) -> str:
        return (f"traces {record.traces_created} new, {record.traces_unchanged} unchanged, "
                f"{record.samples_failed} samples failed")
