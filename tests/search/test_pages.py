"""The search page (the API's parameters), the cohort pages."""

from __future__ import annotations

import pytest

from search import services
from search.models import Cohort
from tests.search.conftest import label

pytestmark = pytest.mark.django_db


def test_the_search_page_shows_highlighted_escaped_matches_linked_to_the_step(client, study, owner, traces):
    client.force_login(owner)
    r = client.get(f"/studies/{study.pk}/search/", {"q": "bold"})
    page = r.content.decode()
    assert r.status_code == 200
    assert "<mark>bold</mark>" in page and "&lt;b&gt;" in page and "<b>bold" not in page
    assert f'href="/traces/{traces["t4"].pk}/#s2"' in page
    assert "Save these 2 traces as a cohort" not in page  # t4 only, by its step
    assert "Save these 1 traces as a cohort" in page


def test_htmx_gets_the_results_fragment(client, study, owner, traces):
    client.force_login(owner)
    r = client.get(f"/studies/{study.pk}/search/", {"q": "wait"}, headers={"HX-Request": "true"})
    page = r.content.decode()
    assert page.lstrip().startswith('<div id="results">') and "<mark>" in page.lower()


def test_bad_input_is_shown_with_its_field(client, study, owner, traces):
    client.force_login(owner)
    r = client.get(f"/studies/{study.pk}/search/", {"re": "(", "q": "x"})
    assert r.status_code == 400 and "<strong>re</strong>: not a valid pattern" in r.content.decode()


def test_outsiders_get_404_and_blinded_annotators_403_for_other_sources(client, study, owner, member, outsider,
                                                                        traces):
    client.force_login(outsider)
    assert client.get(f"/studies/{study.pk}/search/", {"q": "wait"}).status_code == 404
    client.force_login(member)
    label(traces["t2"], 2, verdict="invalid", user=owner, reason="carries wrongly")
    r = client.get(f"/studies/{study.pk}/search/", {"verdict": "invalid", "source": "annotator:olivia"})
    assert r.status_code == 403 and "blind study" in r.content.decode()
    r = client.get(f"/studies/{study.pk}/search/", {"q": "carries"})
    assert r.status_code == 200 and "No traces match." in r.content.decode()


def test_save_a_search_as_a_cohort_and_compare(client, study, owner, traces):
    client.force_login(owner)
    r = client.post(f"/studies/{study.pk}/cohorts/", {"name": "waiters", "q": "wait"})
    cohort = Cohort.objects.get(name="waiters")
    assert r.status_code == 302 and r["Location"] == f"/cohorts/{cohort.pk}/"
    assert cohort.query == {"q": "wait"} and cohort.n_traces == 2
    page = client.get(f"/cohorts/{cohort.pk}/").content.decode()
    assert "2 traces" in page and "t1" in page and "t3" in page
    client.post(f"/studies/{study.pk}/cohorts/", {"name": "wrong", "answer_correct": "false"})
    other = Cohort.objects.get(name="wrong")
    r = client.get(f"/cohorts/{cohort.pk}/compare/", {"b": other.pk})
    page = r.content.decode()
    assert r.status_code == 200 and "Shared traces" in page and "1.000 [" in page and "0.000 [" in page
    assert "waiters" in client.get(f"/studies/{study.pk}/cohorts/").content.decode()


def test_a_bad_cohort_is_not_saved(client, study, owner, traces):
    client.force_login(owner)
    r = client.post(f"/studies/{study.pk}/cohorts/", {"name": "", "q": "wait"}, follow=True)
    assert "Not saved: name" in r.content.decode() and not Cohort.objects.exists()


def test_refused_cohort_posts_go_back_to_their_page_with_the_field(client, study, owner, traces):
    """The refusal family on the web (annotation.middleware.refusals_back_to / refusals_shown_on): a
    refused post goes back to the page of its form with the field named, never a 500; a comparison that
    cannot be made is said on the comparison page with 400."""
    client.force_login(owner)
    client.post(f"/studies/{study.pk}/cohorts/", {"name": "waiters", "q": "wait"})
    cohort = Cohort.objects.get(name="waiters")
    r = client.post(f"/cohorts/{cohort.pk}/assign/", {"annotators": [owner.username], "k": "two"})
    assert r.status_code == 302 and r.url == cohort.get_absolute_url()
    page = client.get(r.url).content.decode()
    assert "Not queued: k: must be a whole number, got &#x27;two&#x27;" in page
    r = client.get(f"/cohorts/{cohort.pk}/compare/", {"b": "other"})
    assert r.status_code == 400 and "b: give the other cohort&#x27;s id" in r.content.decode()
    assert "Shared traces" not in r.content.decode()


def test_cohort_pages_follow_the_snapshot_in_id_order(study, owner_m, traces):
    # The page counts by the saved size and cuts its ids from the snapshot: the same traces, pages and
    # order as paging the cohort's traces.
    cohort = services.do_save_cohort(study, owner_m, name="all", data={})
    expected = [t.pk for t in services.cohort_traces(cohort)]
    assert len(expected) == 4
    first, second = services.cohort_page(cohort, "1", per_page=3), services.cohort_page(cohort, 2, per_page=3)
    assert [t.pk for t in first] + [t.pk for t in second] == expected
    assert (first.paginator.count, first.paginator.num_pages, first.has_next(), second.has_next()) == (4, 2, True, False)
    assert [t.problem.problem_id for t in second] == [traces["t4"].problem.problem_id]
    assert services.cohort_page(cohort, "x", per_page=3).number == 1  # not a number: the first page
    assert services.cohort_page(cohort, 9, per_page=3).number == 2  # past the end: the last page
    empty = services.do_save_cohort(study, owner_m, name="none", data={"q": "zebra"})
    page = services.cohort_page(empty, None)
    assert empty.n_traces == 0 and list(page) == [] and page.number == 1


def test_the_menus_name_the_models_and_domains_of_the_study_s_own_traces(study, traces):
    # The loose index scans on PostgreSQL (annotation.review.filters) answer as a DISTINCT does: a
    # suite problem (domain "abstraction") and its traces' model are left out, an empty domain is kept.
    from annotation.models import Problem
    from annotation.review.filters import study_domains, study_models
    from judges import runkinds

    Problem.objects.filter(study=study, problem_id="juice").update(domain="abstraction")
    assert study_models(study) == ["m1"] and study_domains(study) == [""]
    Problem.objects.filter(study=study, problem_id="apples").update(domain="arithmetic")
    assert study_domains(study) == ["arithmetic"]
    assert (runkinds.options(study)["model"], runkinds.options(study)["domain"]) == (["m1"], ["arithmetic"])
