import sys

from django.core.management.base import CommandError

from annotation.commands import RefusingCommand
from annotation.models import Study
from faithfulness.core import validity
from faithfulness.evidence import FORMATS, report


class Command(RefusingCommand):
    requires_system_checks: list[str] = []
    help = ("The evidence report of a study (paper 000, section 6): per model the tier reached and the reporting "
            "template filled from what the study holds, every missing item named; Markdown, LaTeX or JSON.")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--model", help="only this model (default: every model of the study)")
        parser.add_argument("--format", choices=FORMATS, default="md")
        parser.add_argument("--policy", choices=validity.POLICIES, default=validity.EXCLUDE,
                            help="neutral steps in SVR/VSR: exclude (default), valid or invalid")
        parser.add_argument("--out", help="write to this file instead of stdout")

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        try:
            text = report(study, opts["model"], opts["format"], policy=opts["policy"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if opts["out"]:
            with open(opts["out"], "w", encoding="utf-8") as f:
                f.write(text)
            self.stderr.write(f"wrote the {opts['format']} report to {opts['out']}")
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
