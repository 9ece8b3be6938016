"""Every API error has the same JSON shape: {"detail": ..., "errors": [...]}."""

from __future__ import annotations

from typing import Any

from kombu.exceptions import OperationalError as BrokerError
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from annotation.access import AccessDenied
from annotation.jobs import RunConflict


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


def exception_handler(exc, context):
    if isinstance(exc, AccessDenied):
        # Rendered as on the web (annotation.views.permission_denied): an
        # outsider gets DRF's plain 404, a member the reason and the role.
        detail = "Not found." if exc.outsider else str(exc)
        return Response({"detail": detail, "errors": []}, status=exc.status_code)
    if isinstance(exc, RunConflict):
        return Response({"detail": str(exc), "errors": []}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, BrokerError):
        return Response(
            {"detail": "the task queue is not reachable; try again later", "errors": []},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
        )
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
