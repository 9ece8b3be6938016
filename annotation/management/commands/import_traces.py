import json
import sys
from pathlib import Path

from django.core.management.base import CommandError

from annotation import services
from annotation.commands import RefusingCommand
from annotation.importing.adapters import PATH_FORMAT_OPTIONS, PATH_FORMATS, cli_formats
from annotation.management.commands._progress import Bar
from annotation.models import Study


class Command(RefusingCommand):
    # A data command: the URL/admin checks cost start-up time and check nothing it uses.
    requires_system_checks: list[str] = []
    help = "Import model traces (and problems, skeletons, labels) into a study; creates the study if missing."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--study", required=True)
        parser.add_argument("--format", default="reasonaudit", choices=cli_formats())
        parser.add_argument("--model", help="the model's name, for formats whose files do not name it "
                            "(abstraction-outputs)")
        parser.add_argument("--instances", type=int, help="instances drawn per template (gsm-symbolic; default 10, "
                            "1 to 200)")
        parser.add_argument("--seed", type=int, help="seed of the instances (gsm-symbolic; default 0)")
        parser.add_argument("--thought-segmenter", choices=Study.Segmenter.values,
                            help="how this file's thoughts are cut into steps (default: the study's thought_segmenter)")
        parser.add_argument("--skip-invalid", action="store_true", help="keep the good lines, report the bad ones")
        parser.add_argument("--json", action="store_true", help="print the report as one JSON object")

    def handle(self, *args, **opts):
        path: Path = opts["file"]
        if opts["format"] in PATH_FORMATS:
            return self._path_format(path, opts)
        if opts.get("instances") is not None or opts.get("seed") is not None:
            raise CommandError(f"--instances/--seed do not apply to --format {opts['format']}")
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        study, created = services.do_get_or_create_study(opts["study"])
        job = services.do_create_import_job(study, fmt=opts["format"], skip_invalid=opts["skip_invalid"], path=path.resolve(),
                                            thought_segmenter=opts["thought_segmenter"] or "")
        bar = Bar(f"import {path.name}", enabled=not opts["json"] and sys.stderr.isatty())
        with path.open("rb") as fh:
            report = services.run_import_job(job.pk, fh, progress=bar)
        bar.close()
        data = report.as_dict()
        keys = ("read", "problems_created", "traces_created", "steps_created", "unchanged", "rejected")
        if opts["json"]:
            out = {k: data[k] for k in keys}
            out.update(labels_created=data["labels_created"], labels_updated=data["labels_updated"],
                       committed=data["committed"], job=job.pk, study=study.name,
                       status=services.import_status(report))
            self.stdout.write(json.dumps(out))
        else:
            if created:
                self.stdout.write(f"created study {study.name!r}")
            self.stdout.write(
                f"read {data['read']} lines: {data['problems_created']} problems, {data['traces_created']} traces, "
                f"{data['steps_created']} steps, {data['labels_created']} labels created; {data['unchanged']} unchanged; "
                f"{len(data['rejected'])} rejected"
            )
            for row in data["rejected"]:
                self.stdout.write(f"line {row['line']}: {row['reason']}")
            if data["rejected"] and not data["committed"]:
                self.stdout.write("nothing was imported (all-or-nothing); fix the lines above or use --skip-invalid")
            elif data["rejected"]:
                self.stdout.write(f"partial: {len(data['rejected'])} line(s) rejected and skipped; the rest was imported")
        if data["rejected"]:
            sys.exit(1)

    def _path_format(self, path: Path, opts) -> None:
        """A format a higher app registered (annotation.importing.adapters.PATH_FORMATS): it reads PATH itself."""
        if not path.exists():
            raise CommandError(f"{path}: no such file or directory")
        bar = Bar(f"import {path.name}", enabled=not opts["json"] and sys.stderr.isatty())
        # --instances/--seed only reach the formats that draw instances (gsm-symbolic), and only when given
        extra = {k: opts[k] for k in ("instances", "seed") if opts.get(k) is not None}
        foreign = [k for k in extra if k not in PATH_FORMAT_OPTIONS.get(opts["format"], ())]
        if foreign:
            raise CommandError(f"--{'/--'.join(foreign)} does not apply to --format {opts['format']}")
        report = PATH_FORMATS[opts["format"]](opts["study"], path, model=opts["model"],
                                              skip_invalid=opts["skip_invalid"], progress=bar, **extra)
        bar.close()
        data = report.as_dict()
        if opts["json"]:
            self.stdout.write(json.dumps({**data, "study": opts["study"]}))
        else:
            self.stdout.write(f"read {data['read']} records: {data['problems_created']} problems, "
                              f"{data['traces_created']} traces created; {data['unchanged']} unchanged; "
                              f"{len(data['rejected'])} rejected")
            for row in data["rejected"]:
                self.stdout.write(row["reason"])
            for note in data.get("notes", []):  # what a format adds (thought-anchors: the chunks aligned)
                self.stdout.write(note)
            if data["rejected"] and not data["committed"]:
                self.stdout.write("nothing was imported (all-or-nothing); fix the input above or use --skip-invalid")
            elif data["rejected"]:
                self.stdout.write(f"partial: {len(data['rejected'])} rejected and skipped; the rest was imported")
        if data["rejected"]:
            sys.exit(1)
