"""What every review operation shares: where a change came from, the two
refusals (bad input, a stale version), and the ``data_changed`` signal a saved
label sends once its transaction commits.
"""

from __future__ import annotations

from django.db import transaction

from annotation import signals
from annotation.models import Study

VIA_WEB, VIA_API = "web", "api"
NOTE_MAX = 5000
UNSET = object()


class ReviewError(ValueError):
    """Bad input; ``errors`` are (field, message) pairs."""

    def __init__(self, errors: list[tuple[str, str]]):
        self.errors = errors
        super().__init__("; ".join(f"{f}: {m}" if f else m for f, m in errors))


class Conflict(Exception):
    """The version a save started from is stale; nothing was written."""

    def __init__(self, message: str, current_version: int):
        self.current_version = current_version
        super().__init__(message)


def send_data_changed(study_id: int) -> None:
    def send() -> None:
        study = Study.objects.filter(pk=study_id).first()
        if study is not None:
            signals.data_changed.send(sender=Study, study=study, reason="labels")

    transaction.on_commit(send)
