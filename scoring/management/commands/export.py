import json
import sys
from pathlib import Path

from django.core.management.base import CommandError

from annotation.commands import RefusingCommand
from annotation.models import Study
from scoring import exports


class Command(RefusingCommand):
    requires_system_checks: list[str] = []
    help = ("Write an export of a study (scores, labels, agreement, PRM training data, ...) to a file or stdout. "
            "With --out, a manifest (study, profile version, sources, counts, code version, time) is written "
            "next to the file as <file>.manifest.json.")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--what", required=True, choices=exports.kinds())
        parser.add_argument("--source", help="final (default), human or judge:NAME; labels: all sources by default")
        parser.add_argument("--reference", help="reference label source (agreement; default human)")
        parser.add_argument("--candidate", help="candidate label source (agreement; default the primary judge)")
        parser.add_argument("--profile", help="scoring profile name (default: the study's default)")
        parser.add_argument("--model", default="", help="only this model")
        parser.add_argument("--domain", default="", help="only problems of this domain")
        parser.add_argument("--calibration", default="", help="only the traces of this calibration study (name or id)")
        parser.add_argument("--cohort", default="", help="only the traces of this saved cohort (id; docs/search.md)")
        parser.add_argument("--seed", default="", help="bootstrap seed of the agreement intervals (default 0)")
        parser.add_argument("--query", default="",
                            help="search: the search page's URL parameters, e.g. 'q=wait&model=m1' (docs/search.md)")
        parser.add_argument("--versus", default="", help="cohort-compare: the other cohort's id (--cohort is the first)")
        parser.add_argument("--scanner", default="", help="scanner-validation, scanner-answers: the scanner (name or id)")
        parser.add_argument("--group", default="model", choices=["model", "domain"], help="leaderboard rows per")
        parser.add_argument("--format", default="jsonl", choices=exports.FORMATS)
        parser.add_argument("--out", type=Path, help="output file (default: stdout)")
        parser.add_argument("--manifest", type=Path, help="where to write the manifest (default: <out>.manifest.json)")

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        extra = {"group": opts["group"]}
        for key in ("calibration", "cohort", "seed", "query", "versus", "scanner"):
            if opts[key]:
                extra[key] = str(opts[key])
        request = exports.ExportRequest(
            study=study, what=opts["what"], source=opts["source"], profile=opts["profile"],
            reference=opts["reference"], candidate=opts["candidate"], model=opts["model"], domain=opts["domain"],
            extra=extra,
        )
        fmt = opts["format"]
        table = exports.build(request)
        if opts["out"]:
            path = Path(opts["out"])  # call_command passes keyword options unconverted
            info = exports.write_file(table, fmt, path, request)
            if opts["manifest"]:
                Path(opts["manifest"]).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
            self.stderr.write(f"wrote {info['counts']['rows']} {opts['what']} row(s) to {path} "
                              f"(manifest: {exports.manifest_path(path).name})")
            return
        if fmt == "parquet":
            out = getattr(self.stdout._out, "buffer", None)
            if out is None:
                raise CommandError("parquet is binary: give --out PATH")
            n = exports.write(table, fmt, out)
            out.flush()
        else:
            n = exports.write(table, fmt, self.stdout._out if hasattr(self.stdout, "_out") else sys.stdout)
        if opts["manifest"]:
            info = exports.manifest(request, table, fmt, n)
            Path(opts["manifest"]).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
