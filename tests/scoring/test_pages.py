"""Analytics and profile pages: permissions, plotly from our static files and
no external URL, every chart with its table, constant query counts, htmx
partials, the ablation view and profile editing."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation.models import Membership
from scoring import score_jobs
from scoring.models import ScoringProfile
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

PAGES = ["scoring-leaderboard", "scoring-hazard", "scoring-distributions", "scoring-lucky", "scoring-ablations",
         "scoring-profiles"]


@pytest.fixture
def scored(seeded):
    score_jobs.recompute(seeded, warm=False)
    return seeded


@pytest.mark.parametrize("name", PAGES)
def test_it_answers_members_and_hides_from_outsiders_and_anonymous(client, owner, member, outsider, scored, name):
    url = reverse(name, args=[scored.pk])
    assert client.get(url).status_code == 302  # anonymous: sign in first
    client.force_login(outsider)
    assert client.get(url).status_code == 404
    client.force_login(owner)
    assert client.get(url).status_code == 200
    # Scores are computed from every source's labels: refused to an annotator of a blind study (annotation.gate);
    # the profiles (parameters, no labels) are every member's.
    client.force_login(member)
    answer = client.get(url)
    if name == "scoring-profiles":
        assert answer.status_code == 200
    else:
        assert answer.status_code == 403 and "blind study" in answer.content.decode()


@pytest.mark.parametrize("name", PAGES[:-1])
def test_it_draws_charts_with_plotly_from_static_and_no_external_url(client, owner, scored, name):
    client.force_login(owner)
    page = client.get(reverse(name, args=[scored.pk])).content.decode()
    assert '<script src="/static/vendor/plotly/plotly.min.js"></script>' in page
    assert '<script src="/static/js/charts.js"></script>' in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert not re.search(r"cdn\.|jsdelivr|unpkg|cdnjs", page, re.IGNORECASE)  # (a bare "cdn" may be in the CSRF token)
    # no inline script: charts carry their data in json_script blocks
    assert not re.search(r"<script(?![^>]*(src=|application/json))[^>]*>", page)
    charts = re.findall(r'data-chart="([^"]+)"', page)
    for chart in charts:
        assert f'id="{chart}" type="application/json"' in page
    if name != "scoring-lucky":
        assert charts and "<table" in page
    assert "/analytics/export/?what=" in page


def test_the_plotly_bundle_is_served(client, member, scored):
    from django.contrib.staticfiles import finders

    assert finders.find("vendor/plotly/plotly.min.js")
    assert finders.find("js/charts.js")


def test_the_leaderboard_shows_accuracy_scores_and_evidence_tiers(client, owner, scored):
    client.force_login(owner)
    page = client.get(reverse("scoring-leaderboard", args=[scored.pk])).content.decode()
    rows = dict(re.findall(r'<td><a href="/studies/\d+/traces/\?model=(m\d)">m\d</a></td>\s*'
                           r'<td class="num">\d+</td>\s*<td class="num">\d+</td>\s*<td class="num">([^<]+)</td>', page))
    assert rows == {"m1": "50.0%", "m2": "100.0%", "m3": "100.0%"}
    assert page.count("Level 2</span>") == 2 and page.count("Level 0</span>") == 1  # m3: only an empty trace
    per_domain = client.get(reverse("scoring-leaderboard", args=[scored.pk]), {"group": "domain"}).content.decode()
    assert "Leaderboard per domain" in per_domain and "arith" in per_domain


def _seed_more(do_import, n: int, start: int = 0) -> None:
    recs = [{"kind": "problem", "problem_id": f"q{i}", "statement": f"q{i}", "gold_answer": "1", "domain": f"d{i % 3}",
             "skeleton": [{"text": "one"}]} for i in range(start, start + n)]
    recs += [{"kind": "trace", "problem_id": f"q{i}", "model": f"x{i % 4}", "steps": ["a", "b"], "answer": "1",
              "labels": [{"step": 1, "verdict": "valid", "annotator": "ann1", "skeleton_refs": [1]},
                         {"step": 2, "verdict": "invalid" if i % 2 else "neutral", "annotator": "ann1"}]}
             for i in range(start, start + n)]
    assert do_import(jsonl(*recs)).committed


@pytest.mark.parametrize("name", PAGES)
def test_pages_use_a_constant_number_of_queries(client, owner, scored, do_import, django_assert_max_num_queries,
                                                name):
    client.force_login(owner)
    url = reverse(name, args=[scored.pk])
    with django_assert_max_num_queries(30) as small:
        assert client.get(url).status_code == 200
    _seed_more(do_import, 40)
    score_jobs.recompute(scored, warm=False)
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert client.get(url).status_code == 200


def test_htmx_filter_changes_get_only_the_partial(client, owner, scored):
    client.force_login(owner)
    url = reverse("scoring-hazard", args=[scored.pk])
    partial = client.get(url, {"model": "m1", "source": "human"}, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and 'id="analytics-body"' in partial
    assert 'data-chart="chart-hazard"' in partial
    assert '<option value="human" selected>' in partial and '<option value="m1" selected>' in partial


def test_the_thought_error_section_of_a_study_without_thoughts_is_one_line(client, owner, scored):
    client.force_login(owner)
    page = client.get(reverse("scoring-hazard", args=[scored.pk])).content.decode()
    assert 'id="no-thought"' in page and 'data-chart="chart-recovery"' not in page


def test_a_bad_filter_answers_400_naming_it(client, owner, scored):
    client.force_login(owner)
    response = client.get(reverse("scoring-leaderboard", args=[scored.pk]), {"profile": "nope"})
    assert response.status_code == 400 and "profile: no profile named" in response.content.decode()
    response = client.get(reverse("scoring-leaderboard", args=[scored.pk]), {"source": "judge:ghost"})
    assert response.status_code == 400 and "ghost" in response.content.decode()


def test_the_ablation_view_shows_the_default_and_three_ablations(client, owner, scored):
    client.force_login(owner)
    page = client.get(reverse("scoring-ablations", args=[scored.pk])).content.decode()
    heads = re.findall(r'<th colspan="4" class="group">([^<]+)</th>', page)
    assert heads == ["default", "no-format", "no-hazard", "no-penalties"]
    assert "not computed yet" not in page


def test_the_lucky_guess_table_links_every_row_to_its_trace_and_sorts(client, owner, scored):
    client.force_login(owner)
    url = reverse("scoring-lucky", args=[scored.pk])
    page = client.get(url, {"sort": "-process"}).content.decode()
    from annotation.models import Trace

    lucky = ["t1", "t3", "t5"]  # correct answers with process <= 3 under the default profile
    for tid in lucky:
        assert f'href="{reverse("trace", args=[Trace.objects.get(trace_id=tid).pk])}">{tid}</a>' in page
    order = re.findall(r'<td><a href="/traces/\d+/">(t\d)</a></td>', page)
    assert order == ["t1", "t3", "t5"]  # process 1.17, 0, 0 (ties by trace)
    only_m2 = client.get(url, {"model": "m2"}).content.decode()
    assert re.findall(r'<td><a href="/traces/\d+/">(t\d)</a></td>', only_m2) == ["t3"]


def test_the_lucky_guess_table_says_why_each_row_is_lucky(client, owner, scored):
    """Coverage and both penalties beside each row, and which steps the scores read: a row with no first error
    is explained by its coverage or its format penalty (issue 31)."""
    from scoring.models import TraceScore

    client.force_login(owner)
    page = client.get(reverse("scoring-lucky", args=[scored.pk])).content.decode()
    assert "The scores read the trace's <strong>answer steps</strong>" in page
    lucky = TraceScore.objects.filter(lucky_guess=True, score_set__source="final",
                                      score_set__profile__name="default").select_related("trace")
    assert sorted(s.trace.trace_id for s in lucky) == ["t1", "t3", "t5"]
    for score in lucky:
        row = re.search(rf'>{score.trace.trace_id}</a></td>(.*?)</tr>', page, re.S).group(1)
        cells = re.findall(r'<td class="num">([^<]*)</td>', row)
        assert f"{score.coverage} / {score.l_gold}" in cells
        assert str(score.n_thought_steps) in cells


def test_annotators_of_a_blind_study_get_no_score_analytics_even_of_traces_they_finished(client, django_user_model,
                                                                                        scored):
    from annotation import services as annotation_services

    # Imported annotators are inactive users until given a password.
    annotation_services.do_add_member(scored, "ann2", Membership.Role.ANNOTATOR, password="pw-ann2")
    client.force_login(django_user_model.objects.get(username="ann2"))  # finished t1 only
    # A table limited to her finished traces still sat under aggregates of every trace (issue 29, M7): refused.
    assert client.get(reverse("scoring-lucky", args=[scored.pk])).status_code == 403
    # Her finished trace's own scores stay hers to see.
    t1 = scored.traces.get(trace_id="t1")
    assert client.get(f"/api/v1/traces/{t1.pk}/scores/").status_code == 200


def test_owners_edit_a_profile_on_the_web_and_members_cannot(client, owner, member, scored,
                                                            django_capture_on_commit_callbacks):
    url = reverse("scoring-profiles", args=[scored.pk])
    data = {"name": "default", "alpha": 4, "beta": 1, "eta": 1.5, "omega": 2.5, "c_haz": 5, "neutral_as": 1,
            "prm_hazard": "on", "w": 0.7, "tau": 3, "pinned_hazard": ""}
    client.force_login(member)
    assert "Save as version" not in client.get(url).content.decode()
    refused = client.post(url, data)  # a member: 403 naming the role (annotation.access)
    assert refused.status_code == 403 and "owners" in refused.content.decode()
    client.force_login(owner)
    assert client.post(url, {**data, "w": 1.5}).status_code == 400
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, data)
    assert response.status_code == 302
    current = ScoringProfile.objects.get(study=scored, name="default", is_current=True)
    assert current.version == 2 and current.params["omega"] == 2.5
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {**data, "name": "pinned", "pinned_hazard": "0.5, 0.25"})
    assert response.status_code == 302
    assert ScoringProfile.objects.get(study=scored, name="pinned").params["pinned_hazard"] == [0.5, 0.25]
    leaderboard = client.get(reverse("scoring-leaderboard", args=[scored.pk]), {"profile": "pinned"})
    assert leaderboard.status_code == 200 and "No scores" not in leaderboard.content.decode()


def _leaderboard(client, user, study) -> str:
    client.force_login(user)
    return client.get(reverse("scoring-leaderboard", args=[study.pk])).content.decode()


def test_hcrs_and_process_share_one_column_only_when_equal_by_definition(client, owner, scored, study, do_import):
    # Issue 23: p2 has no skeleton, so Process (PRM there) and HCRS differ: both show.
    page = _leaderboard(client, owner, scored)
    assert '<th class="num">HCRS</th>' in page and "Process (= HCRS)" not in page
    # Drop the problem without a skeleton: every scored trace has one, P = S_HCRS.
    from annotation.models import Problem

    Problem.objects.filter(study=scored, problem_id="p2").delete()
    score_jobs.recompute(scored, warm=False)
    page = _leaderboard(client, owner, scored)
    assert '<th class="num">HCRS</th>' not in page and "Process (= HCRS)" in page
    client.force_login(owner)
    ablations = client.get(reverse("scoring-ablations", args=[scored.pk])).content.decode()
    assert '<th class="num">HCRS</th>' not in ablations and "Process (= HCRS)" in ablations


def test_the_evidence_cards_repeat_no_number_of_the_table(client, owner, scored):
    # Issue 23: SVR/VSR 0.974/0.923 in the table, 0.973/0.926 on the card below: one source per number.
    page = _leaderboard(client, owner, scored)
    cards = page[page.index("What the data supports"):]
    cards = cards[:cards.index("</section>")]
    assert not re.search(r"[SV]VR \d|[SV]VR –|Answer accuracy \d", cards), cards
    assert "Level 2</span>" in cards
