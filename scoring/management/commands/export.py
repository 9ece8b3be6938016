import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Study
from scoring import exports


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = "Write an export of a study (scores, hazard, leaderboard, lucky guesses, ...) to a file or stdout."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--what", required=True, choices=exports.kinds())
        parser.add_argument("--source", help="final (default), human or judge:NAME")
        parser.add_argument("--reference", help="reference label source (agreement)")
        parser.add_argument("--candidate", help="candidate label source (agreement)")
        parser.add_argument("--profile", help="scoring profile name (default: the study's default)")
        parser.add_argument("--model", default="", help="only this model")
        parser.add_argument("--domain", default="", help="only problems of this domain")
        parser.add_argument("--group", default="model", choices=["model", "domain"], help="leaderboard rows per")
        parser.add_argument("--format", default="jsonl", choices=exports.FORMATS)
        parser.add_argument("--out", type=Path, help="output file (default: stdout)")

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        request = exports.ExportRequest(
            study=study, what=opts["what"], source=opts["source"], profile=opts["profile"],
            reference=opts["reference"], candidate=opts["candidate"], model=opts["model"], domain=opts["domain"],
            extra={"group": opts["group"]},
        )
        try:
            table = exports.build(request)
        except exports.ExportError as exc:
            raise CommandError(str(exc)) from None
        fmt = opts["format"]
        if opts["out"]:
            path = Path(opts["out"])  # call_command passes keyword options unconverted
            mode, kwargs = ("wb", {}) if fmt == "parquet" else ("w", {"encoding": "utf-8", "newline": ""})
            with path.open(mode, **kwargs) as fh:
                n = exports.write(table, fmt, fh)
            self.stderr.write(f"wrote {n} {opts['what']} row(s) to {path}")
            return
        if fmt == "parquet":
            out = getattr(self.stdout._out, "buffer", None)
            if out is None:
                raise CommandError("parquet is binary: give --out PATH")
            exports.write(table, fmt, out)
            out.flush()
            return
        exports.write(table, fmt, self.stdout._out if hasattr(self.stdout, "_out") else sys.stdout)
