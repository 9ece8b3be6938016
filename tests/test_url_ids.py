"""An id past 64 bits in any URL is a 404 (issue 29, L3: study ids above 2^63 were a 500 on SQLite).

The routes come from the URL resolver, so a new route with an ``<int:...>`` is covered by construction."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from reasonaudit.url_ids import MAX_ID

pytestmark = pytest.mark.django_db

_PARAM = re.compile(r"<(?:(\w+):)?\w+>")


def _routes(patterns, prefix: str = "") -> list[str]:
    out: list[str] = []
    for p in patterns:
        route = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            out += _routes(p.url_patterns, route)
        elif isinstance(p, URLPattern) and "<int:" in route and not route.startswith("^"):
            out.append(route)
    return out


ROUTES = sorted(set(_routes(get_resolver().url_patterns)))


def _path(route: str, value: int) -> str:
    return "/" + _PARAM.sub(lambda m: str(value) if m.group(1) == "int" else "x", route)


def test_the_resolver_has_id_routes():
    assert len(ROUTES) > 50 and "studies/<int:pk>/traces/" in "".join(ROUTES)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("value", [MAX_ID + 1, 10**30])
def test_an_id_past_64_bits_is_not_found_on_every_route(owner, route, value):
    client = APIClient()
    client.force_authenticate(owner)
    client.force_login(owner)
    path = _path(route, value)
    assert client.get(path).status_code == 404, path
    assert client.post(path, {}).status_code == 404, path


def test_the_largest_id_is_still_an_ordinary_not_found(owner):
    client = APIClient()
    client.force_authenticate(owner)
    assert client.get(f"/api/v1/studies/{MAX_ID}/traces/").status_code == 404
