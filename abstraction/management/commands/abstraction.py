import sys

from django.core.management.base import BaseCommand, CommandError

from abstraction import services
from abstraction.core import generators as gen
from abstraction.models import Benchmark
from annotation.management.commands._progress import Bar
from annotation.models import Job, Study
from judges.models import JudgeConfig
from reasonaudit.celery import app as celery_app
from runs import cli
from subjects.models import SubjectModel

MODES = {"dp": ("dp",), "cot": ("cot",), "both": ("dp", "cot")}


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = ("The abstraction benchmark (paper 004): generate a seeded benchmark version and run a subject model "
            "on it (--wait follows the run to the end; exit 1 unless every item succeeded); --table prints Γ and Δ.")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--model", help="subject model name (without it: generate the benchmark only)")
        parser.add_argument("--benchmark", help="benchmark version name (default seed<S>-<remap>-<sma>)")
        parser.add_argument("--seed", type=int, default=gen.DEFAULT_SEED)
        parser.add_argument("--remap-mode", choices=("repo", "clean"), default="repo")
        parser.add_argument("--sma-mode", choices=gen.SMA_MODES, default="paper")
        parser.add_argument("--categories", nargs="+", choices=gen.CATEGORIES, help="default: all six")
        parser.add_argument("--mode", choices=tuple(MODES), default="dp", help="prompting: dp, cot or both")
        parser.add_argument("--per-sub-dataset", type=int, help="the first N instances of every sub-dataset")
        parser.add_argument("--max-examples", type=int, help="send only the first N of the 50 worked examples "
                            "(a cheap probe on a slow server; results are kept as MODEL@Nex)")
        parser.add_argument("--checker-judge", help="an LLM judge configuration of the study: check every answer "
                            "with the published checker prompt too, and use its verdict")
        parser.add_argument("--force", action="store_true", help="ask again even where an answer exists")
        parser.add_argument("--budget", type=float, help="stop once the estimated cost reaches this many USD")
        parser.add_argument("--wait", action="store_true", help="show progress and wait for the end")
        parser.add_argument("--cancel", action="store_true", help="cancel the subject model's run in progress")
        parser.add_argument("--table", action="store_true", help="print the study's table (truncated to 2 decimals)")

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        if opts["per_sub_dataset"] is not None and opts["per_sub_dataset"] < 1:
            raise CommandError("--per-sub-dataset must be at least 1")
        subject = None
        if opts["model"]:
            subject = SubjectModel.objects.filter(study=study, name=opts["model"]).first()
            if subject is None:
                names = ", ".join(study.subject_models.values_list("name", flat=True)) or "none"
                raise CommandError(f"no subject model named {opts['model']!r} in {study.name!r} "
                                   f"(subject models: {names})")
            if opts["cancel"]:
                for arun in services.active_runs(subject):
                    job = services.cancel(arun)
                    self.stdout.write(f"run {arun.pk} (job {job.pk}): {'cancelled' if job.finished else 'cancel requested'}")
                return
        bench = self._benchmark(study, opts)
        if subject is not None:
            self._run(study, subject, bench, opts)
        if opts["table"] or subject is None and not opts["benchmark"]:
            self._table(study, bench if subject is not None or opts["benchmark"] else None)

    def _benchmark(self, study: Study, opts) -> Benchmark:
        name = opts["benchmark"] or services.default_name(opts["seed"], opts["remap_mode"], opts["sma_mode"])
        existing = Benchmark.objects.filter(study=study, name=name).first()
        if existing is not None and existing.source == Benchmark.Source.IMPORTED:
            return existing
        bar = Bar(f"generate {name}", unit="item", unit_scale=False, enabled=sys.stderr.isatty())
        try:
            bench = services.do_generate_benchmark(study, name=name, seed=opts["seed"], remap_mode=opts["remap_mode"],
                                                   sma_mode=opts["sma_mode"], progress=bar)
        except (ValueError, gen.rm.RemapError) as exc:
            raise CommandError(str(exc)) from None
        finally:
            bar.close()
        counts = ", ".join(f"{c} {bench.counts.get(c, 0)}" for c in gen.CATEGORIES)
        self.stdout.write(f"benchmark {bench.name} ({bench.generator_version}, seed {bench.seed}, remap "
                          f"{bench.remap_mode}, SMA {bench.sma_mode}): {sum(bench.counts.values())} items: {counts}")
        if bench.counts.get("MA", 0) == 0:
            self.stderr.write("note: the study has no GSM8K problems with gold answers: MA is empty")
        return bench

    def _run(self, study: Study, subject: SubjectModel, bench: Benchmark, opts) -> None:
        judge = None
        if opts["checker_judge"]:
            judge = JudgeConfig.objects.filter(study=study, name=opts["checker_judge"]).first()
            if judge is None:
                raise CommandError(f"no judge configuration named {opts['checker_judge']!r} in {study.name!r}")
        eager = celery_app.conf.task_always_eager
        try:
            arun = services.do_start_run(subject, bench, modes=MODES[opts["mode"]], categories=opts["categories"],
                                         per_sub_dataset=opts["per_sub_dataset"], judge=judge, force=opts["force"],
                                         max_examples=opts["max_examples"],
                                         budget_usd=opts["budget"], queue=not eager)
        except (services.RunConflict, ValueError) as exc:
            raise CommandError(str(exc)) from None
        job = arun.job
        self.stdout.write(f"abstraction run {arun.pk} (job {job.pk}): {subject.name} v{subject.version} on "
                          f"{bench.name}, {'+'.join(arun.modes)}, {job.total} items to ask, checker {arun.checker}")
        if not (opts["wait"] or eager):
            self.stdout.write(f"queued; follow it on the web page of job {job.pk}")
            return
        job = cli.to_the_end(job, label=f"abstraction {subject.name}", unit="item",
                             show=sys.stderr.isatty() or opts["wait"],
                             run_here=(lambda bar: services.run_inline(arun, progress=bar)) if eager else None)
        arun.refresh_from_db()
        run = arun.run
        run.refresh_from_db()
        self.stdout.write(f"{job.status}: {job.done} of {job.total} items done, {job.failed} failed; "
                          f"{arun.results_created} answers checked; {cli.usage(run)}")
        if job.error:
            self.stderr.write(job.error)
        self._table(study, bench)
        if job.status not in (Job.Status.SUCCEEDED,):
            sys.exit(1)

    def _table(self, study: Study, bench: Benchmark | None) -> None:
        rows = services.table(study, benchmark=bench, n_resamples=1000)
        if not rows:
            self.stdout.write("no checked answers yet")
            return
        head = ["model", *gen.CATEGORIES, "AVG", "Δ_OP", "Δ_NUM", "Δ_ALL", "checker", "items"]
        self.stdout.write(" | ".join(head))
        for row in rows:
            cells = [c["shown"] for c in row.cells()][:10]
            self.stdout.write(" | ".join([row.model, *cells, row.checker, str(row.n_items)]))
        self.stdout.write("(two decimals truncated, as in the paper; full precision in the export)")
