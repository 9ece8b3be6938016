"""Every page and endpoint of the review workflow for the three roles, an
outsider (404: they learn nothing) and anonymous (sign-in / 401)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Problem, Skeleton, Step, Trace
from tests.review.conftest import human_label

pytestmark = pytest.mark.django_db

ROLES = ("owner", "member", "adjudicator", "outsider", "anonymous")


@pytest.fixture
def objs(seeded, member, annotator2):
    trace = Trace.objects.get(trace_id="p0/m1")
    human_label(trace, 1, member, "valid")
    human_label(trace, 1, annotator2, "invalid")
    problem = Problem.objects.get(problem_id="p0")
    return {
        "study": seeded.pk, "trace": trace.pk, "problem": problem.pk,
        "skeleton": Skeleton.objects.get(problem=problem).pk, "step": Step.objects.get(trace=trace, index=1).pk,
    }


def _user(request, role):
    return None if role == "anonymous" else request.getfixturevalue(role)


# (url name, argument key, expected status per role: owner, member (annotator), adjudicator, outsider, anonymous)
WEB_GET = [
    ("studies", None, (200, 200, 200, 200, 302)),
    ("study", "study", (200, 200, 200, 404, 302)),
    ("study-members", "study", (200, 200, 200, 404, 302)),
    ("trace-list", "study", (200, 200, 200, 404, 302)),
    ("problem-list", "study", (200, 200, 200, 404, 302)),
    ("queue", "study", (200, 200, 200, 404, 302)),
    ("adjudication", "study", (200, 403, 200, 404, 302)),
    ("problem", "problem", (200, 200, 200, 404, 302)),
    ("trace", "trace", (200, 200, 200, 404, 302)),
]


@pytest.mark.parametrize("name,key,expected", WEB_GET, ids=[w[0] for w in WEB_GET])
@pytest.mark.parametrize("role", ROLES)
def test_web_pages(client, request, objs, adjudicator, outsider, name, key, expected, role):
    user = _user(request, role)
    if user:
        client.force_login(user)
    url = reverse(name, args=[objs[key]] if key else [])
    response = client.get(url)
    assert response.status_code == expected[ROLES.index(role)], (role, url)
    if response.status_code == 302:
        assert reverse("login") in response["Location"]


WEB_POST = [
    ("study-members", "study", {"username": "bob", "role": "adjudicator", "action": "set"}, (302, 403, 403, 404, 302)),
    ("queue-assign", "study", {"annotators": [], "k": 1, "action": "clear"}, (302, 403, 403, 404, 302)),
    ("skeleton-save", "problem", {"text-1": "A fact", "action": "draft"}, (302, 302, 302, 404, 302)),
    ("skeleton-save", "problem", {"text-1": "A fact", "action": "approve"}, (302, 403, 302, 404, 302)),
    ("skeleton-approve", "skeleton", {}, (302, 403, 302, 404, 302)),
    ("trace-review", "trace", {"version": 0, "v1": "valid"}, (302, 302, 302, 404, 302)),
    ("adjudicate", "step", {"version": 0, "verdict": "invalid", "reason": "r"}, (302, 403, 302, 404, 302)),
]


@pytest.mark.parametrize("name,key,data,expected", WEB_POST, ids=[f"{w[0]}-{w[2].get('action', '')}" for w in WEB_POST])
@pytest.mark.parametrize("role", ROLES)
def test_web_posts(client, request, objs, adjudicator, outsider, name, key, data, expected, role):
    user = _user(request, role)
    if user:
        client.force_login(user)
    response = client.post(reverse(name, args=[objs[key]]), data)
    assert response.status_code == expected[ROLES.index(role)], (role, response.content[:300])
    if response.status_code == 403:
        assert b"Not allowed" in response.content


def test_the_live_helpers_need_a_signed_in_user_only(client, member):
    assert client.get(reverse("skeleton-check"), {"check-1": "1+1=2"}).status_code == 302
    client.force_login(member)
    assert b"looks for 2" in client.get(reverse("skeleton-check"), {"check-1": "1+1=2"}).content
    assert b"<strong>x</strong>" in client.get(reverse("markdown-preview"), {"text-3": "**x**"}).content


API = [
    ("get", "/api/v1/studies/{study}/problems/", None, (200, 200, 200, 404, 401)),
    ("get", "/api/v1/problems/{problem}/", None, (200, 200, 200, 404, 401)),
    ("patch", "/api/v1/problems/{problem}/", {"domain": "geometry"}, (200, 403, 403, 404, 401)),
    ("get", "/api/v1/problems/{problem}/skeletons/", None, (200, 200, 200, 404, 401)),
    ("post", "/api/v1/problems/{problem}/skeletons/", {"steps": [{"text": "a"}, {"text": "b"}]}, (201, 201, 201, 404, 401)),
    ("post", "/api/v1/problems/{problem}/skeletons/", {"steps": [{"text": "a"}], "status": "approved"},
     (201, 403, 201, 404, 401)),
    ("get", "/api/v1/skeletons/{skeleton}/", None, (200, 200, 200, 404, 401)),
    ("patch", "/api/v1/skeletons/{skeleton}/", {"status": "approved"}, (200, 403, 200, 404, 401)),
    ("get", "/api/v1/studies/{study}/traces/", None, (200, 200, 200, 404, 401)),
    ("get", "/api/v1/traces/{trace}/", None, (200, 200, 200, 404, 401)),
    ("get", "/api/v1/traces/{trace}/labels/", None, (200, 200, 200, 404, 401)),
    ("put", "/api/v1/traces/{trace}/labels/", {"version": 0, "labels": [{"step": 1, "verdict": "valid"}]},
     (200, 409, 200, 404, 401)),  # the member labelled step 1 in the fixture: version 0 is stale for them
    ("get", "/api/v1/studies/{study}/queue/", None, (200, 200, 200, 404, 401)),
    ("post", "/api/v1/studies/{study}/assignments/", {"annotators": ["alice"], "k": 1}, (201, 403, 403, 404, 401)),
    ("get", "/api/v1/studies/{study}/members/", None, (200, 200, 200, 404, 401)),
    ("post", "/api/v1/studies/{study}/members/", {"username": "bob", "role": "adjudicator"}, (200, 403, 403, 404, 401)),
    ("get", "/api/v1/studies/{study}/disagreements/", None, (200, 403, 200, 404, 401)),
    ("get", "/api/v1/steps/{step}/adjudication/", None, (200, 403, 200, 404, 401)),
    ("put", "/api/v1/steps/{step}/adjudication/", {"version": 0, "verdict": "invalid", "reason": "r"},
     (200, 403, 200, 404, 401)),
]


@pytest.mark.parametrize("method,path,data,expected", API, ids=[f"{a[0]} {a[1]}" for a in API])
@pytest.mark.parametrize("role", ROLES)
def test_api(request, objs, adjudicator, outsider, method, path, data, expected, role):
    from annotation.models import TraceReview

    user = _user(request, role)
    client = APIClient()
    if user:
        client.force_authenticate(user)
    member = request.getfixturevalue("member")
    # The member's fixture label came without a review; give it one (version 1).
    TraceReview.objects.get_or_create(trace_id=objs["trace"], annotator=member, defaults={"version": 1})
    response = getattr(client, method)(path.format(**objs), data, format="json")
    assert response.status_code == expected[ROLES.index(role)], (role, response.content[:300])
    if response.status_code >= 400:
        assert set(response.json()) == {"detail", "errors"}
