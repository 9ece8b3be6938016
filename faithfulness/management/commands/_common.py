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
        return (f"{record.kind} run {record.pk} (job {record.job.pk}): {record.subject.name} v{record.config_version}, mode "
                f"{record.mode}, {record.traces} traces, {n} continuation{'s' if n != 1 else ''}")
