"""Run a scanner over a study or a cohort and report its validation (docs/search.md)."""

import json
import sys
from dataclasses import asdict

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Exists, OuterRef

from annotation.models import Job, StepLabel, Study, Trace
from reasonaudit.celery import app as celery_app
from runs import cli, params
from search import scanners
from search.models import Cohort, ScanLabel, Scanner


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = ("Create (with --question and --judge) or reuse a scanner, run it over the study or a cohort, "
            "optionally draw a validation sample, and print its validation report as JSON.")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--scanner", required=True, help="the scanner's name")
        parser.add_argument("--question", help="create the scanner with this question")
        parser.add_argument("--judge", help="create it with this LLM judge configuration (name)")
        parser.add_argument("--cohort", type=int, help="only this cohort's traces (id)")
        parser.add_argument("--force", action="store_true", help="ask again even where a cached answer exists")
        parser.add_argument("--budget", type=params.cli_type("budget_usd"),
                            help=f"stop once the estimated cost reaches this many USD ({params.range_text('budget_usd')})")
        parser.add_argument("--no-run", action="store_true", help="do not run; sample and report only")
        parser.add_argument("--sample", type=int, default=0, help="draw this many answered traces into the sample")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--answers-from-labels", metavar="KIND",
                            help="answer the sample from stored labels when the question is 'does some step have an "
                                 "invalid label': yes iff a label of this kind (human, adjudication) says invalid")

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        scanner = Scanner.objects.filter(study=study, name=opts["scanner"]).select_related("judge").first()
        try:
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
            if not opts["no_run"]:
                eager = celery_app.conf.task_always_eager
                record = scanners.do_start_scan(scanner, cohort=cohort, force=opts["force"], budget_usd=opts["budget"],
                                              queue=False)
                job = cli.to_the_end(record.job, label=f"scanner {scanner.name}", unit="trace",
                                     show=sys.stderr.isatty(), run_here=lambda bar: scanners.run_inline(record))
                self.stderr.write(f"{job.status}: {job.done} of {job.total} traces, {job.failed} failed; "
                                  f"{cli.usage(record.run)}" + (" (eager)" if eager else ""))
                if job.status not in (Job.Status.SUCCEEDED, Job.Status.PARTIAL):
                    sys.exit(1)
            if opts["sample"]:
                scanners.do_draw_sample(scanner, opts["sample"], seed=opts["seed"], cohort=cohort)
        except (scanners.ScannerError, scanners.ScanConflict) as exc:
            raise CommandError(str(exc)) from None
        if opts["answers_from_labels"]:
            self._answer_from_labels(scanner, opts["answers_from_labels"])
        report = scanners.validation_report(scanner)
        out = {"scanner": scanner.name, "counts": scanners.counts(scanner), "pending": report["pending"],
               **{split: asdict(report[split]) for split in ("dev", "test")}}
        self.stdout.write(json.dumps(out, indent=2))

    @staticmethod
    def _answer_from_labels(scanner: Scanner, kind: str) -> None:
        if kind not in StepLabel.Kind.values:
            raise CommandError(f"--answers-from-labels: choose {', '.join(StepLabel.Kind.values)}")
        labelled = StepLabel.objects.filter(step__trace=OuterRef("pk"), kind=kind)
        invalid = labelled.filter(verdict="invalid")
        traces = (Trace.objects.filter(scan_labels__scanner=scanner, scan_labels__answer__isnull=True)
                  .filter(Exists(labelled)).annotate(bad=Exists(invalid)))
        for trace in traces:
            scanners.do_answer(scanner, trace, None, trace.bad)
        left = ScanLabel.objects.filter(scanner=scanner, answer__isnull=True).count()
        if left:
            sys.stderr.write(f"{left} sampled traces have no {kind} label and stay unanswered\n")
