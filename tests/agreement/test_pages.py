"""Agreement, annotator and calibration pages: permissions, plotly from our
static files with the data in json_script, every chart with its table and
an export, what every page states (n, sources, profile version, seed),
"not defined" with the reason, constant query counts, htmx partials, and
creating and queueing a calibration study on the web."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from agreement import calibration
from agreement.models import CalibrationStudy
from annotation.models import Assignment, Study
from tests.agreement.test_api import _grow

pytestmark = pytest.mark.django_db

PAGES = ["scoring-agreement", "scoring-annotators", "scoring-calibrations"]


@pytest.fixture
def cal(worked):
    return calibration.do_create_calibration(worked, name="pilot", reference="human", candidates=["judge:gpt"],
                                             size=2)


def page_urls(study, cal) -> list[str]:
    return [reverse(n, args=[study.pk]) + ("?candidate=judge:gpt" if n == "scoring-agreement" else "")
            for n in PAGES] + [reverse("scoring-calibration", args=[study.pk, cal.pk])]


def test_permissions(client, worked, cal, owner, member, outsider, adjudicator):
    for url in page_urls(worked, cal):
        assert client.get(url).status_code == 302
        client.force_login(outsider)
        assert client.get(url).status_code == 404
        client.force_login(member)  # annotator of a blind study
        r = client.get(url)
        assert r.status_code == 403 and b"This study is blind" in r.content
        for user in (adjudicator, owner):
            client.force_login(user)
            assert client.get(url).status_code == 200
        client.logout()
    Study.objects.filter(pk=worked.pk).update(blind=False)
    client.force_login(member)
    for url in page_urls(worked, cal):
        assert client.get(url).status_code == 200


def test_the_nav_links_agreement_only_for_those_who_may_see_it(client, worked, owner, member):
    client.force_login(member)
    page = client.get(reverse("study", args=[worked.pk])).content.decode()
    assert reverse("scoring-agreement", args=[worked.pk]) not in page
    client.force_login(owner)
    page = client.get(reverse("study", args=[worked.pk])).content.decode()
    assert reverse("scoring-agreement", args=[worked.pk]) in page


def test_charts_come_from_static_files_with_their_tables_and_exports(client, worked, cal, owner):
    client.force_login(owner)
    for url in page_urls(worked, cal):
        page = client.get(url).content.decode()
        assert '<script src="/static/vendor/plotly/plotly.min.js"></script>' in page
        assert '<script src="/static/js/charts.js"></script>' in page
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
        assert not re.search(r"<script(?![^>]*(src=|application/json))[^>]*>", page)
        charts = re.findall(r'data-chart="([^"]+)"', page)
        for chart in charts:
            assert f'id="{chart}" type="application/json"' in page
        if "calibration/" in url and url.rstrip("/").split("/")[-1].isdigit() or "agreement" in url:
            assert charts and "<table" in page
            assert page.count('action="' + reverse("scoring-export-create", args=[worked.pk]) + '"') >= len(charts)


def test_the_pages_state_n_sources_profile_version_and_seed(client, worked, cal, owner):
    client.force_login(owner)
    page = client.get(reverse("scoring-agreement", args=[worked.pk]) + "?candidate=judge:gpt&seed=3").content.decode()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    assert "judge:gpt against human on the whole study (2 traces)" in text
    assert "n = 10 steps and 2 traces compared" in text
    assert "profile default v1" in text
    assert "1000 bootstrap resamples of traces, seed 3" in text
    assert "fewer than 3 paired values (n = 2)" in text  # the reason a number is not defined
    assert "70.0%" in text  # percent agreement
    detail = client.get(reverse("scoring-calibration", args=[worked.pk, cal.pk])).content.decode()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", detail))
    assert "Candidates against human on a sample of 2 traces" in text
    assert "profile default v1" in text and "seed 0" in text


def test_disagreements_link_to_the_review_page(client, worked, owner):
    from annotation.models import Trace

    client.force_login(owner)
    page = client.get(reverse("scoring-agreement", args=[worked.pk]) + "?candidate=judge:gpt").content.decode()
    t_a = Trace.objects.get(study=worked, trace_id="tA")
    assert f'href="{reverse("trace", args=[t_a.pk])}#s5"' in page


def test_htmx_gets_the_partial(client, worked, owner):
    client.force_login(owner)
    r = client.get(reverse("scoring-agreement", args=[worked.pk]) + "?candidate=judge:gpt", HTTP_HX_REQUEST="true")
    body = r.content.decode()
    assert body.lstrip().startswith('<div id="analytics-body">') and "<html" not in body


def test_bad_selection_is_a_400_page(client, worked, owner):
    client.force_login(owner)
    r = client.get(reverse("scoring-agreement", args=[worked.pk]) + "?candidate=judge:nope")
    assert r.status_code == 400 and b"no judge named" in r.content


@pytest.mark.parametrize("name", PAGES + ["scoring-calibration"])
def test_pages_use_a_constant_number_of_queries(client, study, do_import, owner, django_assert_max_num_queries, name):
    _grow(study, do_import, 0, 3)
    first = calibration.do_create_calibration(study, name="c0", reference="human", candidates=["judge:gpt"], size=3)
    client.force_login(owner)
    url = (reverse(name, args=[study.pk, first.pk]) if name == "scoring-calibration"
           else reverse(name, args=[study.pk]) + "?candidate=judge:gpt")
    with django_assert_max_num_queries(80) as small:
        assert client.get(url).status_code == 200
    _grow(study, do_import, 10, 60)
    for i in range(1, 4):
        calibration.do_create_calibration(study, name=f"c{i}", reference="human", candidates=["judge:gpt"], size=40)
    first.items.all().delete()
    calibration.CalibrationTrace.objects.bulk_create([
        calibration.CalibrationTrace(calibration=first, trace_id=pk, stratum="s", position=i)
        for i, pk in enumerate(study.traces.values_list("pk", flat=True))])
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert client.get(url).status_code == 200


def test_owners_create_calibration_studies_on_the_web(client, worked, owner, member):
    url = reverse("scoring-calibrations", args=[worked.pk])
    form = {"name": "web pilot", "reference": "human", "candidates": ["judge:gpt"], "size": "2", "seed": "0",
            "allocation": "equal", "validation_fraction": "0.5"}
    Study.objects.filter(pk=worked.pk).update(blind=False)
    client.force_login(member)
    refused = client.post(url, form)  # a member: 403 naming the role (annotation.access)
    assert refused.status_code == 403 and "owners" in refused.content.decode()
    client.force_login(owner)
    bad = client.post(url, {**form, "size": "0"})
    assert bad.status_code == 400
    r = client.post(url, form)
    cal = CalibrationStudy.objects.get(study=worked, name="web pilot")
    assert r.status_code == 302 and r["Location"] == cal.get_absolute_url()
    assert cal.items.count() == 2
    queue = reverse("scoring-calibration-queue", args=[worked.pk, cal.pk])
    # A k the chosen annotators cannot meet is refused back on the calibration's page, its reason flashed.
    r = client.post(queue, {"annotators": [str(member.pk)], "k": "2"}, follow=True)
    assert r.redirect_chain == [(cal.get_absolute_url(), 302)]
    page = r.content.decode()
    assert "k: k (annotators per trace) must be between 1 and 1" in page and "k: k: k" not in page
    assert not Assignment.objects.filter(study=worked).exists()
    r = client.post(queue, {"annotators": [str(member.pk)], "k": "1"})
    assert r.status_code == 302
    assert Assignment.objects.filter(study=worked, annotator=member).count() == 2
    client.force_login(member)
    assert client.post(queue, {"annotators": [str(member.pk)], "k": "1"}).status_code == 403  # a member: the role is named


def test_tuning_runs_on_the_calibration_page(client, scored_pairs, owner):
    cal = calibration.do_create_calibration(scored_pairs, name="pilot", reference="human",
                                            candidates=["judge:gpt"], size=4, validation_fraction=0.5)
    client.force_login(owner)
    page = client.get(reverse("scoring-calibration", args=[scored_pairs.pk, cal.pk])
                      + "?tune=judge:gpt&omegas=0,5").content.decode()
    assert 'data-chart="chart-tuning"' in page
    assert "Pearson r is undefined at every grid point" in page  # two validation traces are too few


def test_a_study_with_nothing_to_compare_says_so_instead_of_empty_tables_and_axes(client, owner, study, do_import):
    """Issue 31: a study without labels from both sources showed 12 rows of "–" and a chart from -1 to 6."""
    from tests.conftest import jsonl

    assert do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "?", "gold_answer": "1"},
                           {"kind": "trace", "problem_id": "p", "model": "m", "steps": ["1 = 1"], "answer": "1"}
                           )).committed
    client.force_login(owner)
    page = client.get(reverse("scoring-agreement", args=[study.pk])).content.decode()
    assert "Nothing to compare yet" in page
    assert "Confusion matrix" not in page and 'data-chart="chart-position"' not in page
    assert "Export agreement:" in page  # the exports stay
