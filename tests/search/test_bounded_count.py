"""The search's bounded count (search.paging.COUNT_CAP, docs/search.md "Paging"): exact up to the cap, "more than"
past it, the same pages as an exact search in pk order, a blinded annotator's own count, the API's fields, and the
uses that take every match (a cohort, the export). A tiny cap stands in for 10,000; on SQLite here and on PostgreSQL
with DATABASE_URL."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.paginator import Paginator
from django.urls import reverse

from annotation.models import Membership
from annotation.study_summary_writer import store
from search import api, paging, services
from search.models import Cohort, CohortTrace
from tests.conftest import api as api_client
from tests.conftest import signed_in
from tests.search.conftest import N_TRACES, N_WAIT, label

pytestmark = pytest.mark.django_db


@pytest.fixture
def cap(monkeypatch) -> int:
    monkeypatch.setattr(paging, "COUNT_CAP", 4)
    return 4


@pytest.fixture(params=["planner", "walk"])
def way(request, monkeypatch) -> str:
    """How the pager finds the first ids: SearchPaginator with the planner's query alone, or the search's own pager,
    which on PostgreSQL walks the study's traces first (a sample of 7, then a window; SQLite has no walk)."""
    if request.param == "walk":
        monkeypatch.setattr(paging, "_WALK_SAMPLE", 7)
    return request.param


def _pager(s: services.Search, per_page: int, way: str) -> paging.SearchPaginator:
    return s.paginator()(s.traces, per_page) if way == "walk" else paging.SearchPaginator(s.traces, per_page)


def _pages(s: services.Search, per_page: int, numbers, way: str = "planner") -> list[tuple]:
    ours = _pager(s, per_page, way)
    out = []
    for number in numbers:
        page = ours.get_page(number)
        out.append(([t.pk for t in page], page.number, page.has_next(), page.has_previous(),
                    ours.count, ours.count_is_lower_bound))
    return out


def test_below_the_cap_the_count_is_exact_and_above_it_more_than_the_cap(study, owner, many, way, monkeypatch):
    owner_m = Membership.objects.get(study=study, user=owner)
    s = services.search(study, owner_m, {"q": "wait"})
    for cap_, count, bounded in ((N_WAIT + 1, N_WAIT, False), (N_WAIT, N_WAIT, False), (N_WAIT - 1, N_WAIT - 1, True),
                                 (4, 4, True)):
        monkeypatch.setattr(paging, "COUNT_CAP", cap_)
        paginator = _pager(s, 3, way)
        page = paginator.get_page(1)
        assert (paginator.count, paginator.count_is_lower_bound) == (count, bounded), cap_
        assert len(page) == 3 and page.has_next()


def test_pages_within_and_beyond_the_cap_are_an_exact_search_s_pages(study, owner, many, cap, way):
    """Every page (1 to past the last) holds the traces Django's exact paginator gives it, in pk order; a page whose
    end is within the matches says "more than" the cap or its own end and leads on; the last pages and a page past
    the last are exact, clamped to the last page as Django clamps."""
    owner_m = Membership.objects.get(study=study, user=owner)
    s = services.search(study, owner_m, {"q": "wait"})
    per_page, last = 3, -(-N_WAIT // 3)
    django = Paginator(s.traces, per_page)
    numbers = [*range(1, last + 1), last + 1, 99, "x"]
    for (pks, number, has_next, has_previous, count, bounded), asked in zip(_pages(s, per_page, numbers, way), numbers,
                                                                            strict=True):
        theirs = django.get_page(asked)
        assert (pks, number, has_previous) == ([t.pk for t in theirs], theirs.number, theirs.has_previous()), asked
        end = max(cap, number * per_page)
        if end < N_WAIT:  # at least one match after what this page counted
            assert (count, bounded, has_next) == (end, True, True), asked
        else:
            assert (count, bounded, has_next) == (N_WAIT, False, theirs.has_next()), asked
    assert [pk for page in _pages(s, per_page, range(1, last + 1), way) for pk in page[0]] == \
        list(s.traces.values_list("pk", flat=True))


def test_a_page_below_1_or_past_any_offset_is_the_last_when_the_count_is_exact_else_the_first(
        study, owner, many, monkeypatch):
    """Django's paginator turns them to the last page, which needs the exact count: a bounded count would have to
    read every match for it, so such a page is the first then."""
    owner_m = Membership.objects.get(study=study, user=owner)
    s = services.search(study, owner_m, {"q": "wait"})
    django = Paginator(s.traces, 3)
    for number in (0, -1, 10**20):
        monkeypatch.setattr(paging, "COUNT_CAP", N_WAIT)
        ours, theirs = paging.SearchPaginator(s.traces, 3).get_page(number), django.get_page(number)
        assert ([t.pk for t in ours], ours.number, ours.paginator.count) == (
            [t.pk for t in theirs], theirs.number, N_WAIT), number
        monkeypatch.setattr(paging, "COUNT_CAP", 4)
        ours = paging.SearchPaginator(s.traces, 3).get_page(number)
        assert ([t.pk for t in ours], ours.number, ours.paginator.count, ours.paginator.count_is_lower_bound) == (
            [t.pk for t in django.get_page(1)], 1, 4, True), number


def test_a_filter_that_matches_little_is_counted_exactly(study, owner, many, cap, way):
    owner_m = Membership.objects.get(study=study, user=owner)
    s = services.search(study, owner_m, {"q": "check -wait"})
    paginator = _pager(s, 50, way)
    assert len(paginator.get_page(1)) == paginator.count == N_TRACES - N_WAIT
    assert not paginator.count_is_lower_bound


def test_a_blinded_annotator_counts_what_she_may_see(study, owner, member, many, cap, way):
    """Notes are searched too: the owner's notes say "zeta" on 6 traces, hers on 2. She searches her own notes only,
    so her count is exact (2) where the owner's stops at the cap."""
    for t in many[:6]:
        label(t, 1, verdict="valid", user=owner, reason="zeta here")
    for t in many[10:12]:
        label(t, 1, verdict="valid", user=member, reason="zeta too")
    owner_m, member_m = (Membership.objects.get(study=study, user=u) for u in (owner, member))
    assert study.blind and member_m.role == Membership.Role.ANNOTATOR
    theirs = _pager(services.search(study, owner_m, {"q": "zeta"}), 3, way)
    theirs.get_page(1)
    assert (theirs.count, theirs.count_is_lower_bound) == (cap, True)
    hers = _pager(services.search(study, member_m, {"q": "zeta"}), 3, way)
    assert [t.pk for t in hers.get_page(1)] == [t.pk for t in many[10:12]]
    assert (hers.count, hers.count_is_lower_bound) == (2, False)


def test_the_api_says_when_its_count_is_a_lower_bound(study, owner, many, cap, monkeypatch):
    monkeypatch.setattr(api.SearchPagination, "page_size", 3)
    client = api_client(owner)
    url = f"/api/v1/studies/{study.pk}/traces/"
    first = client.get(url, {"q": "wait"}).json()
    assert (first["count"], first["count_is_lower_bound"]) == (cap, True)
    assert [r["id"] for r in first["results"]] == [t.pk for t in many if int(t.trace_id[1:]) % 7][:3]
    assert first["next"] and first["previous"] is None
    beyond = client.get(url, {"q": "wait", "page": 5}).json()  # traces 13-15 of the 60: more than 15
    assert (beyond["count"], beyond["count_is_lower_bound"]) == (15, True) and beyond["next"]
    last = client.get(url, {"q": "wait", "page": N_WAIT // 3}).json()
    assert (last["count"], last["count_is_lower_bound"], last["next"]) == (N_WAIT, False, None)
    assert client.get(url, {"q": "wait", "page": N_WAIT // 3 + 1}).status_code == 404  # DRF: past the last
    monkeypatch.setattr(paging, "COUNT_CAP", N_TRACES - N_WAIT)
    exact = client.get(url, {"q": "check -wait"}).json()  # as many as the cap: exact
    assert (exact["count"], exact["count_is_lower_bound"]) == (N_TRACES - N_WAIT, False)
    # No filter: every trace of the study, bounded as any search until the stored summary holds their number.
    plain = client.get(url).json()
    assert (plain["count"], plain["count_is_lower_bound"]) == (N_TRACES - N_WAIT, True)
    store(study)
    plain = client.get(url).json()
    assert (plain["count"], plain["count_is_lower_bound"]) == (N_TRACES, False)


def test_the_schema_declares_the_bound():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    ref = schema["paths"]["/api/v1/studies/{id}/traces/"]["get"]["responses"]["200"]["content"]["application/json"]
    page = schema["components"]["schemas"][ref["schema"]["$ref"].rsplit("/", 1)[1]]
    assert "count_is_lower_bound" in page["required"]
    assert page["properties"]["count_is_lower_bound"]["type"] == "boolean"
    assert page["properties"]["notes"]["items"] == {"type": "string"} and "notes" not in page["required"]


def test_the_page_says_more_than_and_offers_no_last_page(study, owner, many, cap):
    client = signed_in(owner)
    url = reverse("search", args=[study.pk])
    html = client.get(url, {"q": "wait"}).content.decode()  # 50 a page: more than 50 of the 60
    assert "page 1 · more than 50 traces" in html and 'rel="next"' in html and " of " not in _nav(html)
    assert "Save these traces (all of them: more than 50) as a cohort" in html
    second = client.get(url, {"q": "wait", "page": 2}).content.decode()
    assert f"page 2 of 2 · {N_WAIT} traces" in second and 'rel="prev"' in second and 'rel="next"' not in second
    fragment = client.get(url, {"q": "wait"}, headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<div id="results">') and "more than 50 traces" in fragment


def _nav(html: str) -> str:
    return html[html.index('<nav class="pager"'):html.index("</nav>", html.index('<nav class="pager"'))]


def test_a_cohort_and_the_export_take_every_match_past_the_cap(study, owner, many, cap):
    client = signed_in(owner)
    response = client.post(reverse("search-cohorts", args=[study.pk]), {"q": "wait", "name": "all waits"})
    assert response.status_code == 302
    cohort = Cohort.objects.get(study=study, name="all waits")
    assert cohort.n_traces == N_WAIT == CohortTrace.objects.filter(cohort=cohort).count()
    download = client.get(reverse("search-download", args=[study.pk]), {"q": "wait", "format": "csv"})
    assert download.status_code == 200
    rows = list(csv.DictReader(io.StringIO(download.content.decode())))
    assert len(rows) == N_WAIT
