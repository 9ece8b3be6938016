"""What the interventions and anytime commands share beyond runs.cli.RunCommand: the subject
model, the continuation mode, the trace limit, and the kind's summary once the run ended."""

from __future__ import annotations

from collections.abc import Callable

from django.core.management.base import CommandError

from faithfulness.models import FaithfulnessRun
from faithfulness.running import ContinuationUnavailable, active_runs, find_subject
from runs import params
from runs.cli import RunCommand
from subjects.models import SubjectModel


class FaithfulnessCommand(RunCommand):
    noun = "continuation"

    def add_kind_arguments(self, parser) -> None:
        parser.add_argument("--model", required=True, help="subject model name")
        parser.add_argument("--mode", choices=["completions", "prefill", "instructed"],
                            help="continuation mode (default: the one the probe recorded)")
        parser.add_argument("--limit", type=params.cli_type("limit"),
                            help=f"only the first N traces (by id; {params.range_text('limit')})")
        params.add_cohort_argument(parser)

    def find_subject(self, opts: dict) -> SubjectModel:
        study = self.find_study(opts)
        try:
            return find_subject(study, opts["model"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None

    def describe(self, record: FaithfulnessRun) -> str:
        n = record.job.total
        return (f"{record.kind} run {record.pk} (job {record.job.pk}): {record.subject.name} v{record.config_version}, mode "
                f"{record.mode}, {record.traces} traces, {n} continuation{'s' if n != 1 else ''}")

    def run_kind(self, opts: dict, start: Callable[[SubjectModel, bool], FaithfulnessRun]) -> None:
        """Cancel, or start and follow (--wait follows a worker, as for every kind), then print the summary."""
        subject = self.find_subject(opts)
        if opts["cancel"]:
            return self.cancel_runs(active_runs(subject), f"subject model {subject.name}")
        record, job = self.start_and_follow(lambda queue: start(subject, queue), opts,
                                          label=f"{self.noun} {subject.name}",
                                          errors=(ContinuationUnavailable,))
        if job is not None:
            self.print_summary(record)
        self.exit_status(job)

    def print_summary(self, record: FaithfulnessRun) -> None:
        raise NotImplementedError
