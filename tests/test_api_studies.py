"""REST API for studies and traces: token auth, visibility, roles, errors, html_url."""

from __future__ import annotations

import pytest

from annotation import services
from tests.conftest import api, jsonl

pytestmark = pytest.mark.django_db


def test_anonymous_requests_are_refused_with_json_errors(study):
    response = api().get("/api/v1/studies/")
    assert response.status_code == 401
    assert set(response.json()) == {"detail", "errors"}


def test_the_study_list_shows_only_my_studies_with_my_role_and_html_url(member, study, outsider):
    services.do_get_or_create_study("Private", owner=outsider)
    rows = api(member).get("/api/v1/studies/").json()["results"]
    assert [r["name"] for r in rows] == ["Study A"]
    assert rows[0]["role"] == "annotator"
    assert rows[0]["html_url"].endswith(f"/studies/{study.pk}/")
    assert {"id", "name", "blind", "primary_judge", "default_profile"} <= set(rows[0])


def test_an_outsider_gets_404_for_a_study_and_its_traces(outsider, study):
    assert api(outsider).get(f"/api/v1/studies/{study.pk}/").status_code == 404
    assert api(outsider).get(f"/api/v1/studies/{study.pk}/traces/").status_code == 404
    assert api(outsider).patch(f"/api/v1/studies/{study.pk}/", {"blind": False}, format="json").status_code == 404


def test_only_the_owner_may_change_a_study(owner, member, study):
    response = api(member).patch(f"/api/v1/studies/{study.pk}/", {"blind": False}, format="json")
    assert response.status_code == 403 and "owner" in response.json()["detail"]
    response = api(owner).patch(f"/api/v1/studies/{study.pk}/", {"blind": False}, format="json")
    assert response.status_code == 200 and response.json()["blind"] is False


def test_bad_input_answers_400_naming_the_field(owner, study):
    response = api(owner).patch(f"/api/v1/studies/{study.pk}/", {"segmenter": "words"}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["errors"][0]["field"] == "segmenter" and body["detail"].startswith("segmenter:")
    response = api(owner).patch(f"/api/v1/studies/{study.pk}/", {"primary_judge": "nobody"}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "primary_judge"


def test_creating_a_study_makes_me_its_owner(member):
    response = api(member).post("/api/v1/studies/", {"name": "New study", "blind": False}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "New study"
    assert body["role"] == "owner"
    rows = api(member).get("/api/v1/studies/").json()["results"]
    assert {r["name"]: r["role"] for r in rows}["New study"] == "owner"


def test_trace_list_filters_and_query_count(member, study, do_import, django_assert_max_num_queries):
    records = [{"kind": "problem", "problem_id": f"p{i}", "statement": f"s{i}", "gold_answer": "1"} for i in range(20)]
    records += [{"kind": "trace", "problem_id": f"p{i}", "model": "a" if i % 2 else "b", "steps": ["x"],
                 "answer": "1" if i % 3 else "2"} for i in range(20)]
    do_import(jsonl(*records))
    client = api(member)
    with django_assert_max_num_queries(8):
        body = client.get(f"/api/v1/studies/{study.pk}/traces/?model=a").json()
    assert body["count"] == 10 and {r["model"] for r in body["results"]} == {"a"}
    wrong = client.get(f"/api/v1/studies/{study.pk}/traces/?answer_correct=false").json()
    assert wrong["count"] == 7  # i % 3 == 0 for i in 0..19
    trace = client.get(f"/api/v1/traces/{body['results'][0]['id']}/").json()
    assert trace["steps"] == [{"step": 1, "channel": "answer", "text": "x", "start": None, "end": None}]
    assert trace["html_url"].endswith(f"/traces/{trace['id']}/")


def test_the_openapi_schema_and_docs_are_served_without_a_cdn(client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/v1/studies/" in schema.content
    docs = client.get("/api/docs/").content.decode()
    assert "cdn" not in docs.lower() and "/static/drf_spectacular_sidecar/" in docs


def test_naming_someone_elses_study_never_makes_me_a_member(outsider, study):
    response = api(outsider).post("/api/v1/studies/", {"name": study.name}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "name"
    assert not study.memberships.filter(user=outsider).exists()


def test_the_create_operation_refuses_a_taken_name_even_past_validation(outsider, study):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        services.do_create_study(study.name, owner=outsider)
    assert not study.memberships.filter(user=outsider).exists()
