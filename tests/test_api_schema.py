"""The OpenAPI schema tells the truth about what the API answers (annotation.api.schema; bin/schemathesis
fuzzes a live server against it): every operation documents its refusals with the one error body, and
the shapes the issue found wrong are declared as answered."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def _operations(schema: dict):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                yield path, method, operation


def test_every_operation_documents_its_refusals_with_the_error_body(schema):
    operations = list(_operations(schema))
    assert len(operations) > 50
    for path, method, operation in operations:
        documented = set(operation["responses"])
        wanted = {"400", "401", "403", "404"} | ({"409", "413", "503"} if method != "get" else set())
        assert wanted <= documented, (method, path, sorted(wanted - documented))
        body = operation["responses"]["403"]["content"]["application/json"]["schema"]
        assert body == {"$ref": "#/components/schemas/Error"}, (method, path)
    error = schema["components"]["schemas"]["Error"]
    assert error["required"] == ["detail", "errors"]


def _response(schema: dict, path: str, method: str = "get", status: str = "200") -> dict:
    found = schema["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
    return schema["components"]["schemas"][found["$ref"].rsplit("/", 1)[1]] if "$ref" in found else found


@pytest.mark.parametrize("path", ["/api/v1/studies/{id}/disagreements/", "/api/v1/studies/{id}/queue/",
                                  "/api/v1/studies/{id}/calibrations/", "/api/v1/studies/{id}/profiles/"])
def test_lists_answered_as_pages_are_declared_as_pages(schema, path):
    page = _response(schema, path)
    assert set(page["properties"]) >= {"count", "next", "previous", "results"}, path


@pytest.mark.parametrize("path", ["/api/v1/studies/{id}/abstraction/runs/", "/api/v1/studies/{id}/fidelity-runs/"])
def test_run_lists_answered_as_arrays_are_declared_as_arrays(schema, path):
    assert _response(schema, path)["type"] == "array"


def test_values_the_api_answers_are_in_their_schemas(schema):
    judge = schema["components"]["schemas"]["JudgeDetail"]["properties"]["output_mode_resolved"]
    assert {"$ref": "#/components/schemas/BlankEnum"} in judge["oneOf"]
    skeleton = schema["components"]["schemas"]["Skeleton"]["properties"]
    assert skeleton["created_by"]["nullable"] and skeleton["approved_by"]["nullable"]


def test_deleting_a_job_is_described_as_a_cancel(schema):
    assert schema["paths"]["/api/v1/jobs/{id}/"]["delete"]["summary"] == "Cancel the job"


@pytest.mark.parametrize("path", ["/api/v1/jobs/null,null/", "/api/v1/no-such-endpoint/", "/api/nothing"])
def test_an_address_under_api_that_matches_nothing_answers_the_json_error_body(owner, path):
    api = APIClient()
    api.force_authenticate(owner)
    answer = api.get(path)
    assert answer.status_code == 404 and answer.json() == {"detail": "Not found.", "errors": []}


def test_the_schema_generates_without_a_warning():
    """CI's `check --deploy --fail-level WARNING` runs drf-spectacular's generation check; the suite runs
    the same check, so a new serializer that, say, names one choice set twice fails here first."""
    from drf_spectacular.checks import schema_check

    assert [str(message) for message in schema_check(None)] == []
