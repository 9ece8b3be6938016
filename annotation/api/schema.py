"""The OpenAPI schema tells the truth about errors (docs/api.md, "Errors"): every operation documents the
refusals it can answer, with the one error body, generically rather than per view.

Which statuses apply follows from the operation, not from a list per view:

* 401 (not signed in), 403 (a member without the role) and 404 (not a member, no such object, a page past
  the end) can answer every operation; 400 every one as well (bad parameters, a body that is no JSON);
* a write (POST, PUT, PATCH, DELETE) can also answer 409 (a stale version, a run in progress), 413 (a body
  over ``REASONAUDIT_REQUEST_MAX_BYTES``) and 503 (the task queue is down);
* a view adds its own with ``refusal_statuses`` (a download that is not ready: 409 on a GET; a model server
  that does not answer: 502).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

EVERY_OPERATION = (400, 401, 403, 404)
WRITES = (409, 413, 503)
DESCRIPTIONS = {
    400: "Bad input: `detail` starts with the field, `errors` lists every field's message",
    401: "Not signed in",
    403: "A member whose role does not allow this; `detail` names the role it needs",
    404: "Not found, or not a member of the study",
    409: "A stale version, a run already in progress, or a job that has not finished",
    413: "The request body is over the server's limit",
    502: "The model server named does not answer",
    503: "The task queue is not reachable; try again later",
}


class ErrorItemSerializer(serializers.Serializer):
    field = serializers.CharField(allow_blank=True, help_text="the field at fault; empty for the request as a whole")
    message = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    """The one body of every error (annotation.api.errors)."""

    detail = serializers.CharField()
    errors = ErrorItemSerializer(many=True)


#: The schema of a list answered as an array of free-form objects.
ARRAY_OF_OBJECTS: dict[str, Any] = {"type": "array", "items": {"type": "object", "additionalProperties": {}}}


def one_page(serializer: type[serializers.Serializer], name: str) -> serializers.Serializer:
    """The response of a list a view answers whole, in the shape of one page of the API's pagination."""
    return inline_serializer(name=name, fields={
        "count": serializers.IntegerField(), "next": serializers.URLField(allow_null=True),
        "previous": serializers.URLField(allow_null=True), "results": serializer(many=True),
    })


class RefusalsSchema(AutoSchema):
    """The default schema class (REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"])."""

    def refusal_statuses(self) -> list[int]:
        statuses = list(EVERY_OPERATION)
        if self.method in ("POST", "PUT", "PATCH", "DELETE"):
            statuses += WRITES
        statuses += list(getattr(self.view, "refusal_statuses", ()))
        return sorted(set(statuses))

    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:
        bodies = super()._get_response_bodies(direction)
        if direction != "response":
            return bodies
        for status in self.refusal_statuses():
            if str(status) not in bodies:
                body = self._get_response_for_code(ErrorSerializer, str(status), direction=direction)
                bodies[str(status)] = {**body, "description": DESCRIPTIONS[status]}
        return bodies
