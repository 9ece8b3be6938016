from runs.cli import KindCommand
from subjects.models import GenerationRun


class Command(KindCommand):
    """``run generation`` under its own name."""

    help = ("Queue a generation run (the same as run generation): K completions of a subject model for each problem "
            "of a study; --wait follows it to the end (exit 1 unless every problem succeeded).")
    kind = "generation"

    def describe(self, record: GenerationRun) -> str:
        n = record.job.total
        return (f"generation run {record.run_id} (job {record.job.pk}): {record.subject.name} v{record.config_version}, "
                f"{record.samples} sample(s) for each of {n} problem{'s' if n != 1 else ''}")
