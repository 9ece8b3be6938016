"""What the interventions, anytime and early answering commands share: each is ``run KIND`` under its own name
(runs.cli.KindCommand: the options are the kind's parameters), saying what it started in the kind's words and
printing the kind's summary once the run ended."""

from __future__ import annotations

from faithfulness.models import FaithfulnessRun
from runs.cli import KindCommand


class FaithfulnessCommand(KindCommand):
    noun = "continuation"

    def describe(self, record: FaithfulnessRun) -> str:
        n = record.job.total
        planned = (f"{record.traces} traces, {n} continuation{'s' if n != 1 else ''}" if n
                   else "traces planned in its job")
        return (f"{record.kind} run {record.pk} (job {record.job.pk}): {record.subject.name} v{record.config_version}, mode "
                f"{record.mode}, {planned}")

    def print_summary(self, record: FaithfulnessRun) -> None:
        """The run as planned (its job picks the traces: unknown when it started), then the kind's figures."""
        record.refresh_from_db()
        record.job.refresh_from_db()
        self.stdout.write(self.describe(record))
        self.summary(record)

    def summary(self, record: FaithfulnessRun) -> None:
        raise NotImplementedError
