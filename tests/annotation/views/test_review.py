"""The review page of a trace that thinks: the thought's steps before the answer's, a long thought
in blocks that htmx loads, saving from a page that loaded only some blocks, blind mode on thought
steps, and the search of both channels."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import LabelHistory, StepLabel, Trace
from tests.review.conftest import human_label, judge, judge_label
from tests.scoring.thought_fixtures import long_thought

pytestmark = pytest.mark.django_db


def test_a_short_thought_is_shown_whole_before_the_answer(client, owner, study):
    trace = long_thought(study, 40)
    client.force_login(owner)
    page = client.get(reverse("trace", args=[trace.pk])).content.decode()
    assert 'id="thought-steps"' in page and "thought-block" not in page
    assert page.index('id="s40"') < page.index('id="s41"') < page.index('id="s42"')
    assert 'class="step thought' in page


def test_a_long_thought_comes_in_blocks_with_their_label_summary(client, owner, member, outsider, study):
    trace = long_thought(study, 250)
    human_label(trace, 3, owner, "invalid")
    human_label(trace, 120, owner, "valid")
    client.force_login(owner)
    page = client.get(reverse("trace", args=[trace.pk])).content.decode()
    # three blocks of at most 100 steps, none of whose rows is on the page; the answer's rows are
    assert page.count('class="thought-block card"') == 3
    assert 'id="s3"' not in page and 'id="s251"' in page and 'id="s252"' in page
    assert 'data-block="2" data-first="101" data-last="200"' in page
    assert 'data-labelled="1" data-unlabelled="99" data-first-invalid="0"' in page
    assert 'data-first-invalid="3"' in page and "1 invalid" in page
    assert 'name="windowed" value="1"' in page
    url = reverse("trace-thought", args=[trace.pk])
    rows = client.get(url, {"block": 2}).content.decode()
    assert 'id="s101"' in rows and 'id="s200"' in rows and 'id="s201"' not in rows and 'id="s100"' not in rows
    assert 'name="v120" value="valid" checked' in rows
    assert client.get(url, {"block": 4}).status_code == 404
    assert client.get(url, {"block": "x"}).status_code == 400
    bad = client.get(url, {"block": "x"}, headers={"HX-Request": "true"})  # the refusal's text, in the error fragment
    assert bad.status_code == 400 and "block: give the block&#x27;s number (1, 2, ...)" in bad.content.decode()
    client.force_login(outsider)
    assert client.get(url, {"block": 1}).status_code == 404


def test_saving_from_a_page_with_some_blocks_loaded_keeps_the_other_labels(client, owner, study):
    trace = long_thought(study, 250)
    human_label(trace, 150, owner, "invalid", note="wrong subtraction")
    client.force_login(owner)
    # the page loaded block 1 only: steps 1..100 and the two answer steps post their radios
    data = {"version": 0, "windowed": "1", "action": "save"}
    for i in range(1, 101):
        data[f"v{i}"] = "valid" if i != 7 else ""
    data["v251"], data["v252"] = "valid", "valid"
    response = client.post(reverse("trace-review", args=[trace.pk]), data)
    assert response.status_code == 302
    mine = dict(StepLabel.objects.filter(step__trace=trace, annotator=owner).values_list("step__index", "verdict"))
    assert mine[150] == "invalid" and mine[1] == "valid" and 7 not in mine and mine[252] == "valid"
    assert len(mine) == 99 + 1 + 2
    # the kept label was not rewritten: its history has only its creation (none, here: made by the fixture)
    assert not LabelHistory.objects.filter(step__index=150, step__trace=trace).exists()


def test_without_the_windowed_flag_a_step_left_out_loses_its_label(client, owner, study):
    trace = long_thought(study, 250)
    human_label(trace, 150, owner, "invalid")
    client.force_login(owner)
    client.post(reverse("trace-review", args=[trace.pk]), {"version": 0, "v1": "valid"})
    assert not StepLabel.objects.filter(step__trace=trace, step__index=150, annotator=owner).exists()


def test_blind_annotators_see_no_judge_label_on_thought_steps_until_they_finish(client, owner, member, study):
    study.blind = True
    study.save(update_fields=["blind"])
    trace = long_thought(study, 150)
    config = judge(study)
    judge_label(trace, 105, config, "invalid", reason="16 - 3 is 13")
    url = reverse("trace-thought", args=[trace.pk])
    client.force_login(member)
    assert "16 - 3 is 13" not in client.get(url, {"block": 2}).content.decode()
    page = client.get(reverse("trace", args=[trace.pk])).content.decode()
    assert 'data-conflicts="0"' in page and "disagreement" not in page
    client.force_login(owner)  # an owner sees everything
    assert "16 - 3 is 13" in client.get(url, {"block": 2}).content.decode()


def test_the_search_finds_steps_of_both_channels(client, owner, member, study):
    trace = long_thought(study, 300, needle_at=217)
    url = reverse("trace-thought", args=[trace.pk])
    client.force_login(member)
    assert client.get(url, {"q": "MARMALADE"}).json() == {"q": "MARMALADE", "steps": [217]}
    assert client.get(url, {"q": "9 * 2 = 18"}).json()["steps"][-1] == 301  # the answer's first step
    assert client.get(url, {"q": " "}).json() == {"q": "", "steps": []}
    other = Trace.objects.create(study=study, problem=trace.problem, model="x", trace_id="x", n_steps=0,
                                 steps_hash="x")
    assert client.get(reverse("trace-thought", args=[other.pk]), {"block": 1}).status_code == 404
