from django.core.management.base import BaseCommand, CommandError

from runs import kinds_doc


class Command(BaseCommand):
    help = ("Write the list of kinds of run and their parameters (label, value and range, default) into docs/runs.md "
            "from the registry (runs.kinds); --check only says whether the file is up to date (exit 1 if not).")
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("--check", action="store_true", help="exit 1 when docs/runs.md is out of date; write nothing")

    def handle(self, *args, **opts) -> None:
        path = kinds_doc.doc_path()
        text = path.read_text(encoding="utf-8")
        try:
            new = kinds_doc.updated(text)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if opts["check"]:
            if new != text:
                raise CommandError("docs/runs.md is out of date: run python manage.py run_kinds_doc")
            self.stdout.write("docs/runs.md is up to date")
            return
        path.write_text(new, encoding="utf-8")
        self.stdout.write(f"wrote the {len(kinds_doc.render().splitlines())} lines of the run kinds into {path}")
