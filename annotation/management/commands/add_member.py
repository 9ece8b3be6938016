from django.core.management.base import CommandError

from annotation import services
from annotation.commands import RefusingCommand
from annotation.models import Membership, Study


class Command(RefusingCommand):
    help = "Create the user if missing and set their role in a study."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--user", required=True)
        parser.add_argument("--role", required=True, choices=Membership.Role.values)
        parser.add_argument("--password")

    def handle(self, *args, **opts):
        study = Study.objects.filter(name=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study named {opts['study']!r}")
        membership, created = services.do_add_member(study, opts["user"], opts["role"], password=opts["password"])
        verb = "created user and added" if created else "set"
        self.stdout.write(f"{verb} {membership.user.username} as {membership.role} in {study.name}")
