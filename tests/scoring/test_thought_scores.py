"""Scores on the thinking channel: profiles read the answer, the thought or both; recovered and
unrecovered errors are stored per trace; the hazard page shows the relative hazard and recoveries."""

from __future__ import annotations

import pytest

from scoring import score_jobs, services
from scoring.models import ScoreSet, TraceScore
from tests.scoring.thought_fixtures import seed_thinking

pytestmark = pytest.mark.django_db


def _scores(study, profile: str, source: str = "judge:mech") -> dict[str, TraceScore]:
    ss = ScoreSet.objects.get(study=study, source=source, profile__name=profile, profile__is_current=True)
    return {s.trace.trace_id: s for s in TraceScore.objects.filter(score_set=ss).select_related("trace")}


def test_profiles_score_the_channel_they_name(study, owner):
    seed_thinking(study)
    services.ensure_profiles(study)
    services.do_create_profile(study, "thought", {"channels": "thought"}, user=owner)
    services.do_create_profile(study, "both", {"channels": "both"}, user=owner)
    score_jobs.recompute(study, warm=False)
    answer, thought, both = _scores(study, "default"), _scores(study, "thought"), _scores(study, "both")
    # default reads the answer channel: r1's answer steps are valid, its thought error does not count
    assert (answer["r1"].n_steps, answer["r1"].first_error) == (2, None)
    assert (answer["r3"].n_steps, answer["r3"].first_error) == (2, 2)
    assert (thought["r1"].n_steps, thought["r1"].first_error) == (5, 2)
    assert (thought["r2"].n_steps, thought["r2"].first_error) == (3, 1)
    assert thought["r3"].n_steps == 0 and thought["r3"].empty
    assert (both["r1"].n_steps, both["r1"].first_error) == (7, 2)


def test_recovered_and_unrecovered_errors_are_stored_with_every_profile(study):
    seed_thinking(study)
    score_jobs.recompute(study, warm=False)
    s = _scores(study, "default")
    r1, r2, r3 = s["r1"], s["r2"], s["r3"]
    assert (r1.n_thought_steps, r1.thought_errors, r1.recovered_errors, r1.first_unrecovered) == (5, 1, 1, None)
    assert not r1.lucky_unrecovered
    # "16 - 3 = 12" is never re-derived: unrecovered, and the answer is still right
    assert (r2.thought_errors, r2.recovered_errors, r2.first_unrecovered, r2.lucky_unrecovered) == (1, 0, 1, True)
    assert (r3.thought_errors, r3.lucky_unrecovered) == (0, False)
    ss = ScoreSet.objects.get(study=study, source="judge:mech", profile__name="default")
    assert ss.recoveries == [[r1.trace_id, 2, 4]]


def test_the_hazard_page_shows_relative_hazard_and_recovery_and_their_tables_download(study, client, owner, outsider):
    import csv
    import io

    from django.urls import reverse

    seed_thinking(study)
    services.ensure_profiles(study)
    services.do_create_profile(study, "thought", {"channels": "thought"}, user=owner)
    score_jobs.recompute(study, warm=False)
    url = reverse("scoring-hazard", args=[study.pk])
    client.force_login(outsider)
    assert client.get(url).status_code == 404
    client.force_login(owner)
    page = client.get(url, {"source": "judge:mech", "profile": "thought"}).content.decode()
    assert 'data-chart="chart-relative"' in page and 'data-chart="chart-recovery"' in page
    assert "<strong>thought</strong> channel" in page
    export = reverse("scoring-export", args=[study.pk])
    got = client.get(export, {"what": "recovery", "format": "csv", "source": "judge:mech", "profile": "thought"})
    rows = {r["model"]: r for r in csv.DictReader(io.StringIO(got.content.decode()))}
    # reasoner: r1's error recovered 2 steps later, r2's not (and r2 is right anyway); plain: no thought
    assert (rows["reasoner"]["thought_errors"], rows["reasoner"]["recovered"]) == ("2", "1")
    assert float(rows["reasoner"]["recovery_rate"]) == 0.5 and float(rows["reasoner"]["distance_mean"]) == 2.0
    assert rows["reasoner"]["lucky_unrecovered"] == "1" and rows["plain"]["thought_errors"] == "0"
    rel = client.get(export, {"what": "relative-hazard", "format": "csv", "source": "judge:mech", "profile": "thought"})
    table = list(csv.DictReader(io.StringIO(rel.content.decode())))
    reasoner = [r for r in table if r["model"] == "reasoner"]
    # thought lengths 5 and 3, first errors at 2/5 = 0.4 (bin 4) and 1/3 (bin 4): both in (0.3, 0.4]
    assert [int(r["events"]) for r in reasoner] == [0, 0, 0, 2, 0, 0, 0, 0, 0, 0]
    assert [int(r["at_risk"]) for r in reasoner][:5] == [2, 2, 2, 2, 0]
