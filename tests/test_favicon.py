"""The site icon: an SVG in static/ that every page links, and /favicon.ico
(which browsers ask for regardless) redirecting to it."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest
from django.contrib.staticfiles import finders
from django.templatetags.static import static
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_every_page_links_the_svg_icon(client):
    page = client.get(reverse("login")).content.decode()
    assert f'<link rel="icon" href="{static("favicon.svg")}" type="image/svg+xml">' in page


def test_the_icon_is_a_static_svg(client):
    path = finders.find("favicon.svg")
    assert path, "static/favicon.svg is missing"
    root = ElementTree.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("viewBox") == "0 0 32 32"


def test_favicon_ico_redirects_to_the_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"] == static("favicon.svg")
    assert client.head("/favicon.ico").status_code == 302
    assert client.post("/favicon.ico").status_code == 405
