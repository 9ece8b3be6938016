"""Adjudication: which steps disagree, the final label with its reason and
version (409), the history, and the web page and API."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import LabelHistory, Step, StepLabel, Trace
from annotation.review.adjudication import disagreement_steps, do_adjudicate
from annotation.review.base import Conflict, ReviewError
from annotation.review.progress import study_progress
from tests.conftest import jsonl, signed_in
from tests.review.conftest import human_label, judge, judge_label

pytestmark = pytest.mark.django_db


@pytest.fixture
def trace(seeded):
    return Trace.objects.select_related("problem", "study").get(trace_id="p0/m1")


def _open(study):
    return sorted(disagreement_steps(study, "open").values_list("trace__trace_id", "index"))


def test_which_steps_disagree(seeded, trace, member, annotator2):
    primary = judge(seeded)
    other = judge(seeded, "other-judge", primary=False)
    human_label(trace, 1, member, "valid")
    human_label(trace, 1, annotator2, "invalid")  # human vs human
    human_label(trace, 2, member, "valid")
    judge_label(trace, 2, primary, "invalid")  # human vs the primary judge
    human_label(trace, 3, member, "valid")
    judge_label(trace, 3, other, "invalid")  # another judge does not count
    judge_label(trace, 1, other, "neutral")
    t2 = Trace.objects.get(trace_id="p1/m1")
    judge_label(t2, 1, primary, "invalid")  # a judge alone is no disagreement
    human_label(t2, 2, member, "neutral")
    human_label(t2, 2, annotator2, "neutral")  # agreement
    assert _open(seeded) == [("p0/m1", 1), ("p0/m1", 2)]
    progress = study_progress([seeded.pk], member)[seeded.pk]
    assert progress["disagreements"] == 2 and progress["judged"] == 2


def test_adjudicating_settles_a_step_and_keeps_everything(seeded, trace, member, annotator2, adjudicator):
    human_label(trace, 1, member, "valid")
    human_label(trace, 1, annotator2, "invalid")
    step = Step.objects.get(trace=trace, index=1)
    final = do_adjudicate(step, adjudicator, version=0, verdict="invalid", skeleton_refs=[1],
                                 reason="bob is right", via="api")
    assert (final.kind, final.version, final.annotator) == ("adjudication", 1, adjudicator)
    assert _open(seeded) == [] and list(disagreement_steps(seeded, "resolved")) == [step]
    assert StepLabel.objects.filter(step=step, kind="human").count() == 2
    with pytest.raises(Conflict, match="adam set the final verdict of this step to invalid"):
        do_adjudicate(step, adjudicator, version=0, verdict="valid", skeleton_refs=[], reason="changed my mind")
    do_adjudicate(step, adjudicator, version=1, verdict="valid", skeleton_refs=[], reason="changed my mind")
    history = list(LabelHistory.objects.filter(kind="adjudication").order_by("pk").values_list("before", "after", "via"))
    assert history[0][0] is None and history[0][1]["verdict"] == "invalid" and history[0][2] == "api"
    assert history[1][0]["verdict"] == "invalid" and history[1][1]["verdict"] == "valid"


def test_a_reason_is_required(trace, adjudicator):
    step = Step.objects.get(trace=trace, index=1)
    with pytest.raises(ReviewError) as exc:
        do_adjudicate(step, adjudicator, version=0, verdict="invalid", skeleton_refs=[9], reason=" ")
    fields = [f for f, _ in exc.value.errors]
    assert fields == ["reason", "skeleton_refs"]


def test_the_adjudication_page(client, seeded, trace, member, annotator2, adjudicator):
    human_label(trace, 1, member, "valid", note="ALICE-NOTE")
    human_label(trace, 1, annotator2, "invalid", note="BOB-NOTE")
    client.force_login(adjudicator)
    page = client.get(reverse("adjudication", args=[seeded.pk])).content.decode()
    assert "ALICE-NOTE" in page and "BOB-NOTE" in page and "Set final verdict" in page
    step = Step.objects.get(trace=trace, index=1)
    response = client.post(reverse("adjudicate", args=[step.pk]),
                           {"version": 0, "verdict": "invalid", "refs": ["1"], "reason": "off by one"},
                           HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    fragment = response.content.decode()
    assert "Final verdict saved" in fragment and "final: invalid by adam" in fragment and "<html" not in fragment
    stale = client.post(reverse("adjudicate", args=[step.pk]),
                        {"version": 0, "verdict": "valid", "reason": "no"}, HTTP_HX_REQUEST="true")
    assert stale.status_code == 409 and "Nothing was saved" in stale.content.decode()
    # The fragment carries the new version so the adjudicator can decide again.
    assert 'name="version" value="1"' in stale.content.decode()
    assert "No open disagreements" in client.get(reverse("adjudication", args=[seeded.pk])).content.decode()
    settled = client.get(reverse("adjudication", args=[seeded.pk]) + "?status=resolved").content.decode()
    assert "off by one" in settled


def test_the_adjudication_api(seeded, trace, member, annotator2, adjudicator):
    human_label(trace, 2, member, "valid")
    human_label(trace, 2, annotator2, "neutral", note="unsure")
    api = APIClient()
    api.force_authenticate(adjudicator)
    rows = api.get(f"/api/v1/studies/{seeded.pk}/disagreements/").json()
    assert rows["count"] == 1
    row = rows["results"][0]
    assert row["step"] == 2 and row["final"] is None and row["version"] == 0
    assert {(lab["annotator"], lab["verdict"], lab["reason"]) for lab in row["labels"]} == {
        ("alice", "valid", ""), ("bob", "neutral", "unsure")}
    url = f"/api/v1/steps/{row['step_id']}/adjudication/"
    ok = api.put(url, {"version": 0, "verdict": "neutral", "reason": "genuinely ambiguous"}, format="json")
    assert ok.status_code == 200 and ok.json()["final"]["source"] == "final" and ok.json()["version"] == 1
    stale = api.put(url, {"version": 0, "verdict": "valid", "reason": "x"}, format="json")
    assert stale.status_code == 409 and stale.json()["errors"] == [{"field": "version", "message": "the current version is 1"}]
    missing = api.put(url, {"version": 1, "verdict": "valid"}, format="json")
    assert missing.status_code == 400 and missing.json()["errors"][0]["field"] == "reason"
    assert api.get(f"/api/v1/studies/{seeded.pk}/disagreements/").json()["count"] == 0
    assert api.get(f"/api/v1/studies/{seeded.pk}/disagreements/?status=resolved").json()["count"] == 1


def test_a_refused_decision_keeps_the_chosen_verdict_and_typed_reason_and_the_focus(
        client, seeded, trace, member, annotator2, adjudicator):
    """Issue 23 #11: a validation error used to drop the verdict and the reason and lose the focus."""
    human_label(trace, 1, member, "valid")
    human_label(trace, 1, annotator2, "invalid")
    client.force_login(adjudicator)
    step = Step.objects.get(trace=trace, index=1)
    url = reverse("adjudicate", args=[step.pk])
    no_reason = client.post(url, {"version": 0, "verdict": "invalid", "refs": ["1"], "reason": " "},
                            HTTP_HX_REQUEST="true")
    assert no_reason.status_code == 400
    html = no_reason.content.decode()
    assert 'value="invalid" checked' in html and 'value="valid" checked' not in html
    assert 'name="refs" value="1" checked' in html
    assert "autofocus" in html and f'aria-describedby="adj-error-{step.pk}"' in html
    no_verdict = client.post(url, {"version": 0, "reason": "bob read the carry right"}, HTTP_HX_REQUEST="true")
    assert no_verdict.status_code == 400
    assert 'value="bob read the carry right"' in no_verdict.content.decode()
    # Without JavaScript: the whole page again (not a redirect that forgets), the item as it was typed.
    plain = client.post(url, {"version": 0, "verdict": "neutral", "reason": "",
                              "next": reverse("adjudication", args=[seeded.pk]) + "?status=open"})
    assert plain.status_code == 400
    page = plain.content.decode()
    assert 'class="topbar"' in page and 'value="neutral" checked' in page and "reason" in page
    assert not StepLabel.objects.filter(step=step, kind="adjudication").exists()


def test_the_show_filter_is_in_the_url_and_settled_works(client, seeded, trace, member, annotator2, adjudicator):
    """Issue 23 #17: ?status=settled did nothing (the option was called "resolved")."""
    human_label(trace, 1, member, "valid")
    human_label(trace, 1, annotator2, "invalid")
    step = Step.objects.get(trace=trace, index=1)
    do_adjudicate(step, adjudicator, version=0, verdict="invalid", skeleton_refs=[], reason="SETTLED-REASON")
    client.force_login(adjudicator)
    url = reverse("adjudication", args=[seeded.pk])
    settled = client.get(url, {"status": "settled"}).content.decode()
    assert "SETTLED-REASON" in settled and '<option value="settled" selected>' in settled
    assert "SETTLED-REASON" not in client.get(url, {"status": "open"}).content.decode()
    assert "SETTLED-REASON" in client.get(url, {"status": "resolved"}).content.decode()  # the older name
    # A decision posted from the filtered page comes back to it.
    assert f'name="next" value="{url}?status=settled"' in settled


def test_a_disputed_step_comes_with_the_three_steps_before_it(adjudicator, member, annotator2, study, do_import):
    steps = [f"Step text number {i}" for i in range(1, 7)]
    assert do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "?", "gold_answer": "1"},
                           {"kind": "trace", "problem_id": "p", "model": "m", "steps": steps, "answer": "1"})).committed
    trace = Trace.objects.get()
    human_label(trace, 5, member, "valid")
    human_label(trace, 5, annotator2, "invalid")
    page = signed_in(adjudicator).get(reverse("adjudication", args=[study.pk])).content.decode()
    assert "The 3 steps before" in page
    for i in (2, 3, 4):
        assert f'<li value="{i}"><div class="step-text">Step text number {i}</div></li>' in page
    assert "Step text number 1<" not in page and "Step text number 6" not in page
