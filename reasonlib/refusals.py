"""The one family of refusals: what the domain says no to, and how loudly (pure: no Django).

Every refusal a researcher can meet -- bad input, a stale version, a run already in progress, a role that
is not enough -- is a :class:`Refusal` carrying a machine ``code``, the ``message``, the ``field`` at fault
(``""`` when the refusal is about the request as a whole) and the HTTP ``status`` it means. A domain
operation raises it; each door renders it once, the same words everywhere:

* REST: ``annotation.api.errors.exception_handler`` answers ``{"detail": text, "errors": [...]}`` with
  ``status`` (docs/api.md, "Errors");
* web: ``annotation.middleware.RefusalMiddleware`` (a form's field error via
  ``annotation.middleware.refusals_into``, otherwise a flash on the page the post came from, or the styled
  error page; never a 500);
* CLI: ``runs.cli.refusals_as_command_errors`` turns it into a ``CommandError`` with the same text.

The base lives in the pure library so that the apps' pure cores (a query, a regex, a remapping) can refuse
in the family too. A 400 refusal is also a ``ValueError`` (what bad input has always been here); a 409 or
503 is deliberately not, so that an ``except ValueError`` around bad input never turns a conflict into 400.
"""

from __future__ import annotations

from collections.abc import Sequence


class Refusal(Exception):
    """A request the domain refuses. ``errors`` are (field, message) pairs, the first also ``field`` and
    ``message``; ``str()`` is the text every door shows: ``"field: message"`` pairs joined by ``"; "``."""

    status: int = 400
    code: str = "invalid"
    #: The field a refusal of this class is about when the raiser names none (``UnknownProfile``: "profile").
    default_field: str = ""

    def __init__(self, message: str = "", *, field: str = "", errors: Sequence[tuple[str, str]] = (),
                 code: str = "", said: str = "") -> None:
        self.errors: list[tuple[str, str]] = ([(str(f), str(m)) for f, m in errors]
                                              or [(field or self.default_field, message)])
        self.field, self.message = self.errors[0]
        self.said = said
        if code:
            self.code = code
        super().__init__(self.text)

    @property
    def text(self) -> str:
        """What every door says: ``said`` when the raiser put it in other words than the pairs (a stale
        version's sentence, an export's ``--option``), else the pairs."""
        return self.said or "; ".join(f"{f}: {m}" if f else m for f, m in self.errors)

    def __str__(self) -> str:
        return self.text

    def __reduce__(self):
        # Subclasses take other constructor arguments; a copy (pickle, a Celery result) keeps the pairs.
        return _restore, (type(self), self.errors, self.code, self.said)


def _restore(cls: type[Refusal], errors: list[tuple[str, str]], code: str, said: str) -> Refusal:
    refusal = cls.__new__(cls)
    Refusal.__init__(refusal, errors=errors, code=code, said=said)
    return refusal


class Invalid(Refusal, ValueError):
    """Bad input (400): a value out of range, a name that names nothing, a malformed query."""


class Conflicting(Refusal):
    """The request contradicts the current state (409): a stale version, a run already in progress, a job
    that has not finished."""

    status = 409
    code = "conflict"


class Unavailable(Refusal):
    """A service the request needs does not answer (503): the task queue, a model server."""

    status = 503
    code = "unavailable"


class FieldInvalid(Invalid):
    """Bad input whose constructor names the field first: ``FieldInvalid("cohort", "holds no trace")``
    (the shape of the run, cohort, scanner, calibration and filter refusals)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)
