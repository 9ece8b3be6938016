import sys

from django.core.management.base import CommandError

from abstraction import services
from abstraction.core import generators as gen
from abstraction.models import Benchmark
from annotation.management.commands._progress import Bar
from annotation.models import Study
from runs import kinds, params
from runs.cli import KindCommand
from subjects.models import SubjectModel


class Command(KindCommand):
    """``run abstraction`` under its own name, plus what comes around a run: generating the benchmark version it
    asks and printing the study's table."""

    kind = "abstraction"
    noun = "item"
    help = ("The abstraction benchmark (paper 004): generate a seeded benchmark version and run a subject model "
            "on it (the same as run abstraction; --wait follows the run to the end; exit 1 unless every item "
            "succeeded); --table prints Γ and Δ.")

    def add_kind_parser(self, parser, kind) -> None:
        super().add_kind_parser(parser, kind)  # --model (without it: generate the benchmark only), --benchmark, ...
        parser.add_argument("--seed", type=params.cli_type("seed"), default=gen.DEFAULT_SEED,
                            help="the benchmark's seed (a new version only)")
        parser.add_argument("--remap-mode", choices=("repo", "clean"), default="repo")
        parser.add_argument("--sma-mode", choices=gen.SMA_MODES, default="paper")
        parser.add_argument("--table", action="store_true", help="print the study's table (truncated to 2 decimals)")

    def handle(self, *args, **opts):
        study = self.find_study(opts)
        if isinstance(opts.get("categories"), (list, tuple)):  # call_command(..., categories=["BC", "SMA"])
            opts["categories"] = ",".join(opts["categories"])
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
            _, job = self.start_kind(kinds.get(self.kind), study, {**opts, "benchmark": bench.name})
            if job is not None:
                self._table(study, bench)
            if opts["table"]:
                self._table(study, bench)
            self.exit_status(job)
            return
        if opts["table"] or not opts["benchmark"]:
            self._table(study, bench if opts["benchmark"] else None)

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
