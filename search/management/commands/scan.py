"""Run a scanner over a study or a cohort and report its validation (docs/search.md)."""

import json
from dataclasses import asdict

from django.core.management.base import CommandError
from django.db.models import Exists, OuterRef

from annotation.models import Job, StepLabel, Study, Trace
from runs import kinds
from runs.cli import KindCommand
from runs.engine import ACTIVE
from search import scanners
from search.models import Cohort, Scanner, ScannerRun


class Command(KindCommand):
    """``run scanner`` under its own name, plus what comes around a run: creating the scanner, its validation
    sample, answers from labels and the validation report."""

    help = ("Create (with --question and --judge) or reuse a scanner and queue a run of it over the study or a cohort "
            "(the same as run scanner); --wait follows it to the end, then the validation report is printed as JSON "
            "(exit 1 unless every trace succeeded). --sample and --answers-from-labels wait for the run too: they "
            "need its answers.")
    kind = "scanner"
    done_word = "scanned"
    data_on_stdout = True  # stdout is the JSON report; the run's lines go to stderr

    def add_kind_parser(self, parser, kind) -> None:
        super().add_kind_parser(parser, kind)
        parser.add_argument("--question", help="create the scanner with this question")
        parser.add_argument("--judge", help="create it with this LLM judge configuration (name)")
        parser.add_argument("--no-run", action="store_true", help="do not run; sample and report only")
        parser.add_argument("--sample", type=int, default=0, help="draw this many answered traces into the sample")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--answers-from-labels", metavar="KIND",
                            help="answer the sample from stored labels when the question is 'does some step have an "
                                 "invalid label': yes iff a label of this kind (human, adjudication) says invalid")

    def handle(self, *args, **opts) -> None:
        study = self.find_study(opts)
        scanner = Scanner.objects.filter(study=study, name=opts["scanner"]).select_related("judge").first()
        if opts["cancel"]:
            if scanner is None:
                raise CommandError(f"no scanner named {opts['scanner']!r} in {study.name!r}")
            return self.cancel_runs(ScannerRun.objects.filter(scanner=scanner, job__status__in=ACTIVE)
                                    .select_related("job"), f"scanner {scanner.name}")
        # Refuse what would fail after the run (which may cost money) before starting it.
        if opts["sample"] and not 1 <= opts["sample"] <= scanners.MAX_SAMPLE:
            raise CommandError(f"--sample: must lie in 1..{scanners.MAX_SAMPLE}")
        if opts["answers_from_labels"] and opts["answers_from_labels"] not in StepLabel.Kind.values:
            raise CommandError(f"--answers-from-labels: choose {', '.join(StepLabel.Kind.values)}")
        scanner, cohort = self._scanner_and_cohort(study, scanner, opts)
        job = None
        if not opts["no_run"]:
            # What comes after the run (a sample of its answers, answers from labels, the report of both) needs
            # the run's end: asking for it waits as --wait does, so `scan ... --sample 50` reports as it always has.
            wait = opts["wait"] or bool(opts["sample"]) or bool(opts["answers_from_labels"])
            _, job = self.start_kind(kinds.get(self.kind), study, {**opts, "wait": wait})
            if job is None:  # queued: the report would not hold this run's answers yet
                return
        # A failed or cancelled run answered nothing worth sampling; the report shows the scanner as it stands.
        if opts["sample"] and (job is None or job.status in (Job.Status.SUCCEEDED, Job.Status.PARTIAL)):
            scanners.do_draw_sample(scanner, opts["sample"], seed=opts["seed"], cohort=cohort)
        if opts["answers_from_labels"]:
            self._answer_from_labels(scanner, opts["answers_from_labels"])
        self.stdout.write(json.dumps(self._report(scanner), indent=2))
        self.exit_status(job)

    @staticmethod
    def _scanner_and_cohort(study: Study, scanner: Scanner | None, opts: dict) -> tuple[Scanner, Cohort | None]:
        if scanner is None:
            if not (opts["question"] and opts["judge"]):
                raise CommandError(f"no scanner named {opts['scanner']!r}; give --question and --judge to create it")
            scanner = scanners.do_create_scanner(study, name=opts["scanner"], question=opts["question"],
                                                 judge_name=opts["judge"])
        cohort = None
        if opts["cohort"] is not None:
            cohort = Cohort.objects.filter(study=study, pk=opts["cohort"]).first()
            if cohort is None:
                raise CommandError(f"no cohort {opts['cohort']} in {study.name!r}")
        return scanner, cohort

    @staticmethod
    def _report(scanner: Scanner) -> dict:
        report = scanners.validation_report(scanner)
        return {"scanner": scanner.name, "counts": scanners.counts(scanner), "pending": report["pending"],
                **{split: asdict(report[split]) for split in ("dev", "test")}}

    def describe(self, record: ScannerRun) -> str:
        n = record.job.total
        scope = f"cohort {record.cohort.name!r}" if record.cohort else "the study"
        return (f"scanner run {record.pk} (job {record.job.pk}): {record.scanner.name} over "
                f"{n} trace{'s' if n != 1 else ''} of {scope}")

    def report(self, record: ScannerRun) -> str:
        c = record.counters()
        return f"{c['yes']} yes, {c['no']} no"

    def _answer_from_labels(self, scanner: Scanner, kind: str) -> None:
        labelled = StepLabel.objects.filter(step__trace=OuterRef("pk"), kind=kind)
        invalid = labelled.filter(verdict="invalid")
        # The command line's own answers (no person): traces it has not answered yet.
        todo = scanners.unanswered_by(scanner, None)
        traces = (Trace.objects.filter(pk__in=todo.values("trace"))
                  .filter(Exists(labelled)).annotate(bad=Exists(invalid)))
        for trace in traces:
            scanners.do_answer(scanner, trace, None, trace.bad)
        left = scanners.unanswered_by(scanner, None).count()
        if left:
            self.stderr.write(f"{left} sampled traces have no {kind} label and stay unanswered")
