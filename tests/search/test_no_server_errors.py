"""No 500 from ordinary input to search (issue 29, L3): every case the review found, and every
number-typed filter of the search registry with every hostile spelling of a number -- a filter
added to TraceSearchFilter is covered by construction."""

from __future__ import annotations

import django_filters
import pytest

from search.filters import TraceSearchFilter
from search.models import Cohort
from tests.conftest import api, signed_in

pytestmark = pytest.mark.django_db

NUMBER_FILTERS = sorted(name for name, f in TraceSearchFilter.base_filters.items()
                        if isinstance(f, django_filters.NumberFilter))
HOSTILE_NUMBERS = ["1e999", "-1e999", "99999999999999999999", "-99999999999999999999", "9223372036854775808",
                   "NaN", "Infinity", "-inf", "1e-999", "²", "٣", "0x10", "1_000", " 7 ", "-0", "3.5"]


def test_the_registry_has_number_filters():
    """The parametrised tests below iterate these: the registry, not a list kept by hand."""
    assert {"n_steps_min", "first_error_max", "chars_min", "cohort", "coverage_max"} <= set(NUMBER_FILTERS)


@pytest.mark.parametrize("name", NUMBER_FILTERS)
@pytest.mark.parametrize("value", HOSTILE_NUMBERS)
def test_every_number_filter_answers_200_or_400_on_the_api(study, owner, traces, name, value):
    r = api(owner).get(f"/api/v1/studies/{study.pk}/traces/", {name: value})
    assert r.status_code in (200, 400), (name, value, r.status_code, r.content[:300])
    if r.status_code == 400:
        assert r.json()["errors"][0]["field"] == name


@pytest.mark.parametrize("name", NUMBER_FILTERS)
def test_every_number_filter_answers_below_500_on_the_page_and_in_a_cohort(client, study, owner, traces, name):
    web = signed_in(owner)
    for value in ("1e999", "-99999999999999999999", "NaN", "²"):
        r = web.get(f"/studies/{study.pk}/search/", {name: value})
        assert r.status_code in (200, 400), (name, value, r.status_code)
        r = api(owner).post(f"/api/v1/studies/{study.pk}/cohorts/",
                            {"name": f"c-{name}-{value}", "query": {name: value}}, format="json")
        assert r.status_code in (201, 400), (name, value, r.status_code, r.content[:300])


@pytest.mark.parametrize("pattern", ["NEVER-IN-ANY-STEP", "^$x", "(?!)"])
def test_a_regex_that_matches_nothing_is_an_empty_answer(study, owner, traces, pattern):
    r = api(owner).get(f"/api/v1/studies/{study.pk}/traces/", {"re": pattern})
    assert r.status_code == 200, r.content[:300]
    assert r.json()["count"] == 0 and r.json()["results"] == []
    r = signed_in(owner).get(f"/studies/{study.pk}/search/", {"re": pattern})
    assert r.status_code == 200
    r = api(owner).post(f"/api/v1/studies/{study.pk}/cohorts/", {"name": "none", "query": {"re": pattern}},
                        format="json")
    assert r.status_code == 201, r.content[:300]
    assert r.json()["n_traces"] == 0
    r = signed_in(owner).post(f"/studies/{study.pk}/cohorts/", {"name": "none on the page", "re": pattern})
    assert r.status_code == 302
    assert Cohort.objects.get(name="none on the page").n_traces == 0


@pytest.mark.parametrize("value", ["x=NaN", "x=1e999", "x=-1e999", "x=Infinity", "x=-Infinity", "x.y=NaN",
                                   "x=99999999999999999999", "x=", "x=null"])
def test_regime_values_json_cannot_store_are_compared_as_text(study, owner, traces, value):
    r = api(owner).get(f"/api/v1/studies/{study.pk}/traces/", {"regime": value})
    assert r.status_code == 200, r.content[:300]
    assert r.json()["count"] == 0


@pytest.mark.parametrize("page", ["99999999999999999999", "9223372036854775808", "-1", "0", "²", "1e3", "NaN", ""])
def test_any_page_number_answers_below_500(study, owner, traces, page):
    r = api(owner).get(f"/api/v1/studies/{study.pk}/traces/", {"page": page})
    assert r.status_code in (200, 404), (page, r.status_code)
    r = signed_in(owner).get(f"/studies/{study.pk}/search/", {"page": page})
    assert r.status_code == 200, (page, r.status_code)


@pytest.mark.parametrize("size", ["99999999999999999999", "1e999", "-1", "²"])
def test_any_page_size_answers_below_500(study, owner, traces, size):
    r = api(owner).get(f"/api/v1/studies/{study.pk}/traces/", {"page_size": size})
    assert r.status_code in (200, 400, 404), (size, r.status_code)


def test_a_cohort_given_as_a_superscript_digit_is_refused(study, owner, traces):
    r = api(owner).get(f"/api/v1/studies/{study.pk}/traces/", {"cohort": "²"})
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "cohort"


@pytest.mark.parametrize("text, ok", [("7", True), ("0", True), (str(2**63 - 1), True), (str(2**63), False),
                                      ("²", False), ("٣", False), ("", False), (" 7", False), ("-1", False),
                                      ("1e3", False), (None, False)])
def test_is_id_takes_ascii_digits_within_64_bits(text, ok):
    from reasonlib.ids import is_id

    assert is_id(text) is ok


@pytest.mark.parametrize("value", ["²", "٣", "99999999999999999999"])
def test_ids_typed_in_parameters_are_refused_or_not_found(study, owner, traces, value):
    """Every door that read an id with str.isdigit() then int(): the cohort scope of exports, a cohort
    comparison's other cohort, the download's cohort and scanner."""
    from annotation.scopes import ScopeError
    from search import services

    with pytest.raises(ScopeError):
        services.cohort_scope(study, value)
    cohort = services.do_save_cohort(study, study.memberships.get(user=owner), name="all", data={})
    web = signed_in(owner)
    assert web.get(f"/cohorts/{cohort.pk}/compare/", {"b": value}).status_code < 500
    for what, key in (("cohort-compare", "cohort"), ("scanner-answers", "scanner")):
        r = web.get(f"/studies/{study.pk}/search/download/", {"what": what, key: value, "versus": value,
                                                               "format": "csv"})
        assert r.status_code in (400, 404), (what, r.status_code)
