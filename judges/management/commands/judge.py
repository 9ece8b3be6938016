from judges.models import JudgeRun
from runs.cli import KindCommand


class Command(KindCommand):
    """``run judge`` under its own name."""

    help = ("Queue a judge run over a study's traces (the same as run judge); --wait follows it to the end "
            "(exit 1 unless every trace succeeded: failed, partial or cancelled).")
    kind = "judge"
    done_word = "judged"

    def describe(self, record: JudgeRun) -> str:
        n = record.job.total
        return (f"judge run {record.run_id} (job {record.job.pk}): {record.judge.name} over {n} "
                f"trace{'s' if n != 1 else ''}")
