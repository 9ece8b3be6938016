"""Every 4xx of the web pages is the styled error page, and an htmx request gets its fragment aimed at the
page's #htmx-error region (annotation/errors.py); the REST API keeps its JSON answers."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.conftest import signed_in

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def test_a_wrong_method_is_a_styled_405_that_names_the_allowed_ones(owner, study):
    response = signed_in(owner).get(reverse("queue-assign", args=[study.pk]))
    assert response.status_code == 405
    html = response.content.decode()
    assert 'class="topbar"' in html and "Method not allowed" in html and "it accepts POST" in html
    assert response["Allow"] == "POST"


def test_a_missing_page_is_a_styled_404(owner):
    response = signed_in(owner).get("/no/such/page/")
    assert response.status_code == 404
    assert 'class="topbar"' in response.content.decode() and "Not found" in response.content.decode()


def test_an_outsider_gets_the_same_404_as_for_a_missing_study(outsider, study):
    response = signed_in(outsider).get(reverse("study", args=[study.pk]))
    assert response.status_code == 404 and "Not found" in response.content.decode()


def test_a_plain_text_400_of_a_download_is_shown_in_the_styled_page(owner, study):
    response = signed_in(owner).get(reverse("scoring-export", args=[study.pk]), {"format": "xlsx"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'class="topbar"' in html and "format: choose one of" in html


@pytest.mark.parametrize("method, url_name, expected", [
    ("get", "queue-assign", 405),
    ("get", "adjudication", 403),  # an annotator
])
def test_an_htmx_refusal_is_a_fragment_aimed_at_the_error_region(member, study, method, url_name, expected):
    response = getattr(signed_in(member), method)(reverse(url_name, args=[study.pk]), **HTMX)
    assert response.status_code == expected
    html = response.content.decode()
    assert "<html" not in html and 'class="card error-page"' in html and "Dismiss" in html
    assert (response["HX-Retarget"], response["HX-Reswap"]) == ("#htmx-error", "innerHTML")


def test_an_htmx_400_fragment_of_a_view_is_left_to_be_swapped_in_place(owner, study):
    response = signed_in(owner).post(reverse("study-import", args=[study.pk]), {"format": "reasonaudit"}, **HTMX)
    assert response.status_code == 400
    html = response.content.decode()
    assert "<html" not in html and "This field is required." in html and "HX-Retarget" not in response


def test_a_csrf_failure_is_a_styled_page(owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    response = client.post(reverse("study-create"), {"name": "x"})
    assert response.status_code == 403
    assert "Form expired" in response.content.decode() and 'class="topbar"' in response.content.decode()


def test_the_api_keeps_its_json_errors(outsider, study):
    response = signed_in(outsider).get(f"/api/v1/studies/{study.pk}/")
    assert response.status_code == 404 and response["Content-Type"].startswith("application/json")
