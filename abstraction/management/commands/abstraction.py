import sys

from django.core.management.base import CommandError

from abstraction import services
from abstraction.core import generators as gen
from abstraction.models import Benchmark
from abstraction.runkinds import MODES
from annotation.management.commands._progress import Bar
from annotation.models import Study
from judges.models import JudgeConfig
from runs import params
from runs.cli import RunCommand
from subjects.models import SubjectModel


class Command(RunCommand):
    noun = "item"
    help = ("The abstraction benchmark (paper 004): generate a seeded benchmark version and run a subject model "
            "on it (--wait follows the run to the end; exit 1 unless every item succeeded); --table prints Γ and Δ.")

    def add_kind_arguments(self, parser):
        parser.add_argument("--model", help="subject model name (without it: generate the benchmark only)")
        parser.add_argument("--benchmark", help="benchmark version name (default seed<S>-<remap>-<sma>)")
        parser.add_argument("--seed", type=params.cli_type("seed"), default=gen.DEFAULT_SEED)
        parser.add_argument("--remap-mode", choices=("repo", "clean"), default="repo")
        parser.add_argument("--sma-mode", choices=gen.SMA_MODES, default="paper")
        parser.add_argument("--categories", nargs="+", choices=gen.CATEGORIES, help="default: all six")
        parser.add_argument("--mode", choices=tuple(MODES), default="dp", help="prompting: dp, cot or both")
        parser.add_argument("--per-sub-dataset", type=params.cli_type("per_sub_dataset"),
                            help=f"the first N instances of every sub-dataset ({params.range_text('per_sub_dataset')})")
        parser.add_argument("--max-examples", type=params.cli_type("max_examples"), help="send only the first N of the 50 worked examples "
                            "(a cheap probe on a slow server; results are kept as MODEL@Nex)")
        parser.add_argument("--checker-judge", help="an LLM judge configuration of the study: check every answer "
                            "with the published checker prompt too, and use its verdict")
        parser.add_argument("--table", action="store_true", help="print the study's table (truncated to 2 decimals)")

    def handle(self, *args, **opts):
        study = self.find_study(opts)
        subject = None
        if opts["model"]:
            subject = SubjectModel.objects.filter(study=study, name=opts["model"]).first()
            if subject is None:
                names = ", ".join(study.subject_models.values_list("name", flat=True)) or "none"
                raise CommandError(f"no subject model named {opts['model']!r} in {study.name!r} "
                                   f"(subject models: {names})")
            if opts["cancel"]:
                return self.cancel_runs(services.active_runs(subject), f"subject model {subject.name}")
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
        record, job = self.start_and_follow(
            lambda queue: services.do_start_run(
                subject, bench, modes=MODES[opts["mode"]], categories=opts["categories"],
                per_sub_dataset=opts["per_sub_dataset"], judge=judge, force=opts["force"],
                max_examples=opts["max_examples"], budget_usd=opts["budget"], queue=queue),
            opts, label=f"abstraction {subject.name}")
        if job is not None:
            self._table(study, bench)
        self.exit_status(job)

    def describe(self, record) -> str:
        return (f"abstraction run {record.pk} (job {record.job.pk}): {record.subject.name} v{record.subject.version} on "
                f"{record.benchmark.name}, {'+'.join(record.modes)}, {record.job.total} items to ask, checker {record.checker}")

    def report(self, record) -> str:
        return f"{record.results_created} answers checked"

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
