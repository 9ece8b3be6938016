import json
from pathlib import Path

from django.core.management.base import CommandError

from annotation.commands import RefusingCommand
from annotation.models import Study
from subjects import services


class Command(RefusingCommand):
    requires_system_checks: list[str] = []
    help = ("Save a prompt template of a study for subject models: a new version of NAME when it differs from the "
            "newest one. The template is a Django template over problem, problem_id and exemplars.")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--file", required=True, type=Path, help="the template text")
        parser.add_argument("--exemplars", type=Path,
                            help='a JSON file: [{"question": ..., "answer": ...}, ...] (k-shot)')

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        exemplars = []
        try:
            source = opts["file"].read_text(encoding="utf-8")
            if opts["exemplars"]:
                exemplars = json.loads(opts["exemplars"].read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CommandError(str(exc)) from None
        try:
            template = services.do_save_template(study, opts["name"], source, exemplars=exemplars)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"template {template.name} v{template.version} ({template.kind}, "
                          f"{len(template.exemplars)} exemplars) in {study.name!r}")
