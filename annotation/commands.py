"""The base of every management command: the CLI's one rendering of the refusal family.

A refusal (reasonlib.refusals) raised anywhere in a command becomes a ``CommandError`` with the same text
the API's ``detail`` and the web's message show ("cohort: cohort 9 holds none of ..."), so no command maps
a domain exception by hand; ``manage.py`` prints it and exits 1. A task queue that is down is the
refusal every door words the same way.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from kombu.exceptions import OperationalError as BrokerError

from reasonlib.refusals import Refusal

BROKER_MESSAGE = "the task queue is not reachable; try again later"


class RefusingCommand(BaseCommand):
    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except Refusal as exc:
            raise CommandError(str(exc)) from exc
        except BrokerError as exc:
            raise CommandError(f"{BROKER_MESSAGE} ({exc})") from exc
