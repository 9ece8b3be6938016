"""annotation.access: one refusal, rendered the same way on the web and in the
API -- 404 that tells an outsider nothing, 403 that names the role to a member."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation import access, services
from annotation.models import Job, Membership
from tests.test_api_studies import api

pytestmark = pytest.mark.django_db


def test_an_outsider_cannot_tell_a_study_that_exists_from_one_that_does_not(client, study, outsider):
    missing = study.pk + 1000
    client.force_login(outsider)
    there, absent = client.get(reverse("study", args=[study.pk])), client.get(reverse("study", args=[missing]))
    assert there.status_code == absent.status_code == 404
    assert study.name.encode() not in there.content
    there, absent = api(outsider).get(f"/api/v1/studies/{study.pk}/"), api(outsider).get(f"/api/v1/studies/{missing}/")
    assert there.status_code == absent.status_code == 404
    assert there.json() == absent.json() == {"detail": "Not found.", "errors": []}


def test_a_member_is_told_the_role_on_the_web_and_in_the_api_alike(client, study, member):
    client.force_login(member)
    page = client.post(reverse("queue-assign", args=[study.pk]))
    assert page.status_code == 403
    answer = api(member).post(f"/api/v1/studies/{study.pk}/assignments/", {}, format="json")
    assert answer.status_code == 403
    assert answer.json()["detail"] == "assigning traces is for owners; you are an annotator"
    assert "Assigning traces is for owners; you are an annotator." in page.content.decode()


def test_role_messages_name_every_role_that_would_do():
    m = Membership(role=Membership.Role.ANNOTATOR)
    with pytest.raises(access.AccessDenied) as refused:
        access.check_adjudicator(m, "adjudication")
    assert str(refused.value) == "adjudication is for owners and adjudicators; you are an annotator"
    assert refused.value.status_code == 403 and not refused.value.outsider
    assert access.not_found("study").status_code == 404


@pytest.mark.parametrize(("role", "started_it", "may"), [
    ("owner", False, True), ("adjudicator", False, True), ("annotator", False, False), ("annotator", True, True),
])
def test_who_may_cancel_a_job(study, owner, member, role, started_it, may):
    services.do_add_member(study, member.username, role)
    job = Job.objects.create(study=study, kind=Job.Kind.IMPORT, created_by=member if started_it else owner)
    m = Membership.objects.select_related("study").get(study=study, user=member)
    assert access.can_cancel_job(member, job, m) is may
    refused = api(member).delete(f"/api/v1/jobs/{job.pk}/")
    assert refused.status_code == (200 if may else 403)
