"""The direct-download export view refuses label exports to annotators with 403, not 400."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_an_annotator_is_refused_a_direct_label_export_with_403(client, member, study):
    client.force_login(member)
    url = reverse("scoring-export", args=[study.pk]) + "?what=labels&format=csv"
    response = client.get(url)
    assert response.status_code == 403
    assert "owners and adjudicators" in response.content.decode()


def test_an_owner_may_download_labels_directly(client, owner, study):
    client.force_login(owner)
    response = client.get(reverse("scoring-export", args=[study.pk]) + "?what=labels&format=csv")
    assert response.status_code == 200
