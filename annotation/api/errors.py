"""Every API error has the same JSON shape: {"detail": ..., "errors": [{"field", "message"}, ...]}.

The one REST rendering of the refusal family (reasonlib.refusals): a domain refusal answers its own
status with its text, so no endpoint maps a domain exception by hand. DRF's own exceptions (a serializer's
ValidationError, 401, 404, 405, 415, throttling) get the same body.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from kombu.exceptions import OperationalError as BrokerError
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from annotation.access import AccessDenied
from reasonlib.refusals import Invalid, Refusal, Unavailable

#: What a down task queue answers, on every door.
BROKER_MESSAGE = "the task queue is not reachable; try again later"


def _flatten(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            field = f"{prefix}.{key}" if prefix else str(key)
            out.extend(_flatten(value, "" if key == "non_field_errors" else field))
        return out
    if isinstance(detail, list):
        out = []
        for i, value in enumerate(detail):
            if isinstance(value, (dict, list)):
                out.extend(_flatten(value, f"{prefix}[{i}]" if prefix else str(i)))
            else:
                out.append({"field": prefix, "message": str(value)})
        return out
    return [{"field": prefix, "message": str(detail)}]


def refusal_body(refusal: Refusal) -> dict[str, Any]:
    """The documented body of a refusal (docs/api.md, "Errors"). An outsider learns nothing: DRF's
    plain "Not found."."""
    if isinstance(refusal, AccessDenied):
        return {"detail": "Not found." if refusal.outsider else refusal.text, "errors": []}
    # Bad input lists every field's message; other refusals only the fields they name (a stale version).
    errors = [{"field": f, "message": m} for f, m in refusal.errors if f or refusal.status == 400]
    return {"detail": refusal.text, "errors": errors}


def model_refusal(exc: DjangoValidationError) -> Invalid:
    """A model's own validation (``full_clean``, ``clean``: the address policy, a unique name) as bad input
    naming its fields (``__all__``: the request as a whole)."""
    if hasattr(exc, "error_dict"):
        pairs = [("" if field == NON_FIELD_ERRORS else field, message)
                 for field, messages in exc.message_dict.items() for message in messages]
    else:
        pairs = [("", message) for message in exc.messages]
    return Invalid(errors=pairs)


def serializer_refusal(exc: ValidationError) -> Invalid:
    """A serializer's refusal (a run's parameters validated by its kind's serializer) as bad input naming
    its fields, for the doors that are not DRF's (the web's middleware)."""
    return Invalid(errors=[(e["field"], e["message"]) for e in _flatten(exc.detail)] or [("", "invalid input")])


def exception_handler(exc, context):
    if isinstance(exc, BrokerError):
        exc = Unavailable(BROKER_MESSAGE)
    elif isinstance(exc, DjangoValidationError):
        exc = model_refusal(exc)
    if isinstance(exc, Refusal):
        return Response(refusal_body(exc), status=exc.status)
    response = drf_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ValidationError):
        errors = _flatten(exc.detail)
        first = errors[0] if errors else {"field": "", "message": "invalid input"}
        where = f"{first['field']}: " if first["field"] else ""
        response.data = {"detail": f"{where}{first['message']}", "errors": errors}
    else:
        detail = response.data.get("detail", "") if isinstance(response.data, dict) else str(response.data)
        response.data = {"detail": str(detail), "errors": []}
    return response
