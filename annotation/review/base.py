"""What every review operation shares: where a change came from, the two
refusals (bad input, a stale version), and the ``data_changed`` signal a saved
label sends once its transaction commits.
"""

from __future__ import annotations

from django.db import transaction

from annotation import signals
from annotation.models import Study
from reasonlib.refusals import Conflicting, Invalid

VIA_WEB, VIA_API = "web", "api"
NOTE_MAX = 5000
UNSET = object()


class ReviewError(Invalid):
    """Bad input; ``errors`` are (field, message) pairs."""

    def __init__(self, errors: list[tuple[str, str]]):
        super().__init__(errors=errors)


class Conflict(Conflicting):
    """The version a save started from is stale; nothing was written. ``str()`` is the message; the
    ``version`` field's error gives the current version."""

    def __init__(self, message: str, current_version: int):
        super().__init__(errors=[("version", f"the current version is {current_version}")], said=message)
        self.current_version = current_version


def send_data_changed(study_id: int, reason: str = "labels") -> None:
    """After the commit: the study's labels changed (``reason``: what changed, "labels" or, for a final verdict,
    annotation.study_summary.ADJUDICATION, which its stored counts do not depend on)."""
    def send() -> None:
        study = Study.objects.filter(pk=study_id).first()
        if study is not None:
            signals.data_changed.send(sender=Study, study=study, reason=reason)

    transaction.on_commit(send)
