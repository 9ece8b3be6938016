"""An annotator's labels: versions and 409, history, completeness, rating,
the answer override, and the data_changed signal -- through the web form and
the labels API alike."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation import signals
from annotation.models import LabelHistory, StepLabel, Trace, TraceReview
from annotation.review.labels import LabelIn, do_save_labels
from annotation.review.queues import do_assign, next_trace_id
from tests.conftest import api

pytestmark = pytest.mark.django_db


@pytest.fixture
def trace(seeded):
    return Trace.objects.select_related("problem", "study").get(trace_id="p0/m1")


def labels_url(trace) -> str:
    return f"/api/v1/traces/{trace.pk}/labels/"


def test_a_first_put_creates_version_1_and_history(member, trace):
    body = {"version": 0, "complete": False, "rating": 7.5,
            "labels": [{"step": 1, "verdict": "valid", "skeleton_refs": [2, 1, 1], "note": "fine"}]}
    response = api(member).put(labels_url(trace), body, format="json")
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["version"] == 1 and data["complete"] is False and data["rating"] == 7.5
    assert data["labels"] == [{"step": 1, "verdict": "valid", "skeleton_refs": [1, 2], "note": "fine"}]
    assert data["html_url"].endswith(f"/traces/{trace.pk}/")
    history = LabelHistory.objects.get()
    assert (history.actor, history.via, history.before, history.kind) == (member, "api", None, "human")
    assert history.after["verdict"] == "valid" and history.after["skeleton_refs"] == [1, 2]
    assert api(member).get(labels_url(trace)).json() == data


def test_it_rejects_a_stale_version_with_409(member, trace):
    client = api(member)
    client.put(labels_url(trace), {"version": 0, "labels": [{"step": 1, "verdict": "valid"}]}, format="json")
    stale = client.put(labels_url(trace), {"version": 0, "labels": [{"step": 1, "verdict": "invalid"}]}, format="json")
    assert stale.status_code == 409
    body = stale.json()
    assert set(body) == {"detail", "errors"} and "through the API" in body["detail"]
    assert body["errors"] == [{"field": "version", "message": "the current version is 1"}]
    assert StepLabel.objects.get(annotator=member).verdict == "valid"
    ok = client.put(labels_url(trace), {"version": 1, "labels": [{"step": 1, "verdict": "invalid"}]}, format="json")
    assert ok.status_code == 200 and ok.json()["version"] == 2


def test_changes_bump_versions_and_are_all_in_the_history(member, trace):
    def save(version, labels):
        return do_save_labels(trace, member, version=version, labels=labels, via="api").review

    r = save(0, [LabelIn(1, "valid"), LabelIn(2, "neutral")])
    label1 = StepLabel.objects.get(annotator=member, step__index=1)
    r = save(r.version, [LabelIn(1, "invalid", note="no"), LabelIn(2, "neutral")])  # one change
    r = save(r.version, [LabelIn(1, "invalid", note="no")])  # step 2 removed
    assert r.version == 3
    label1.refresh_from_db()
    assert label1.version == 2 and label1.reason == "no"
    rows = list(LabelHistory.objects.order_by("pk").values_list("step__index", "before__verdict", "after__verdict"))
    assert rows == [(1, None, "valid"), (2, None, "neutral"), (1, "valid", "invalid"), (2, "neutral", None)]


def test_saving_the_same_labels_changes_nothing(member, trace):
    r = do_save_labels(trace, member, version=0, labels=[LabelIn(1, "valid")])
    again = do_save_labels(trace, member, version=1, labels=[LabelIn(1, "valid")])
    assert again.review.version == 1 and again.changed_labels == 0
    assert LabelHistory.objects.count() == 1 and r.review.version == 1


@pytest.mark.parametrize("labels,field,message", [
    ([{"step": 9, "verdict": "valid"}], "labels[0].step", "is not a step of this trace (1..3)"),
    ([{"step": 1, "verdict": "valid"}, {"step": 1, "verdict": "invalid"}], "labels[1].step", "labelled twice"),
    ([{"step": 1, "verdict": "valid", "skeleton_refs": [3]}], "labels[0].skeleton_refs", "skeleton steps are 1..2"),
    ([{"step": 1, "verdict": "maybe"}], "labels.0.verdict", "is not a valid choice"),
])
def test_bad_labels_answer_400_naming_the_field(member, trace, labels, field, message):
    response = api(member).put(labels_url(trace), {"version": 0, "labels": labels}, format="json")
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == field and message in error["message"]
    assert not StepLabel.objects.filter(annotator=member).exists()


def test_complete_needs_every_step(member, trace):
    response = api(member).put(labels_url(trace), {"version": 0, "complete": True,
                                                   "labels": [{"step": 1, "verdict": "valid"}]}, format="json")
    assert response.status_code == 400 and "2 step(s) are unlabelled (first: step 2)" in response.json()["detail"]
    full = [{"step": i, "verdict": "valid"} for i in (1, 2, 3)]
    response = api(member).put(labels_url(trace), {"version": 0, "complete": True, "labels": full}, format="json")
    assert response.json()["complete"] is True


def test_the_answer_override_keeps_the_automatic_verdict(member, trace):
    assert (trace.answer_correct, trace.answer_origin, trace.auto_answer_correct) == (True, "automatic", True)
    client = api(member)
    client.put(labels_url(trace), {"version": 0, "labels": [], "answer_correct": False}, format="json")
    trace.refresh_from_db()
    assert (trace.answer_correct, trace.answer_origin, trace.auto_answer_correct) == (False, "reviewer", True)
    assert trace.meta["answer_overrides"][0]["by"] == "alice"
    body = client.get(labels_url(trace)).json()
    assert body["answer_correct"] is False and body["answer_origin"] == "reviewer"
    client.put(labels_url(trace), {"version": body["version"], "labels": [], "answer_correct": None}, format="json")
    trace.refresh_from_db()
    assert (trace.answer_correct, trace.answer_origin) == (True, "automatic")


def test_a_save_sends_data_changed_after_commit(member, trace, django_capture_on_commit_callbacks):
    seen = []

    def receiver(sender, study, reason, **kwargs):
        seen.append((study.pk, reason))

    signals.data_changed.connect(receiver, dispatch_uid="test-labels")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            do_save_labels(trace, member, version=0, labels=[LabelIn(1, "valid")])
            assert seen == []
    finally:
        signals.data_changed.disconnect(dispatch_uid="test-labels")
    assert seen == [(trace.study_id, "labels")]


# --- the web form ---------------------------------------------------------------


def _post(client, trace, **data):
    return client.post(reverse("trace-review", args=[trace.pk]), data, HTTP_HX_REQUEST="true")


def test_the_web_form_saves_with_htmx_and_returns_the_new_version(client, member, trace):
    client.force_login(member)
    response = _post(client, trace, version=0, v1="valid", r1=["1", "2"], n1="ok", v2="invalid", rating="4")
    assert response.status_code == 200
    page = response.content.decode()
    assert "Saved (version 1)" in page and 'id="review-version" value="1" hx-swap-oob="true"' in page
    assert "<html" not in page
    lab = StepLabel.objects.get(annotator=member, step__index=1)
    assert (lab.verdict, lab.skeleton_refs, lab.reason) == ("valid", [1, 2], "ok")
    review_row = TraceReview.objects.get(annotator=member)
    assert review_row.rating == 4 and not review_row.complete and review_row.updated_via == "web"
    assert LabelHistory.objects.filter(via="web").count() == 2


def test_the_web_form_answers_409_with_a_readable_message(client, member, trace):
    client.force_login(member)
    do_save_labels(trace, member, version=0, labels=[LabelIn(1, "valid")], via="api")
    response = _post(client, trace, version=0, v1="invalid")
    assert response.status_code == 409
    text = response.content.decode()
    assert "changed through the API" in text and "Nothing was saved" in text and "Reload the page" in text
    assert StepLabel.objects.get(annotator=member).verdict == "valid"
    # Without JavaScript: the whole page, with the current labels and the message.
    page = client.post(reverse("trace-review", args=[trace.pk]), {"version": 0, "v1": "invalid"})
    assert page.status_code == 409 and b"Nothing was saved" in page.content and b"<html" in page.content


def test_the_web_form_without_javascript_redirects_back(client, member, trace):
    client.force_login(member)
    response = client.post(reverse("trace-review", args=[trace.pk]), {"version": 0, "v1": "valid"})
    assert response.status_code == 302 and response["Location"] == reverse("trace", args=[trace.pk])
    page = client.get(response["Location"]).content.decode()
    assert "Saved (version 1)" in page and 'name="v1" value="valid" checked' in page


def test_a_note_without_a_verdict_is_refused(client, member, trace):
    client.force_login(member)
    response = _post(client, trace, version=0, n2="hmm")
    assert response.status_code == 400 and b"step 2 has a note but no verdict" in response.content


def test_save_and_next_goes_to_the_next_trace_of_my_queue(client, member, owner, seeded):
    traces = list(Trace.objects.order_by("pk"))
    do_assign(seeded, owner, [member], 1)
    client.force_login(member)
    first = next_trace_id(seeded, member)
    response = _post(client, Trace.objects.get(pk=first), version=0, v1="valid", action="next")
    second = next_trace_id(seeded, member, after=Trace.objects.get(pk=first))
    assert response.status_code == 200 and response["HX-Redirect"] == reverse("trace", args=[second])
    assert second != first and len(traces) == 4


def test_completing_a_blind_trace_refreshes_the_page(client, member, trace):
    client.force_login(member)
    response = _post(client, trace, version=0, v1="valid", v2="valid", v3="neutral")
    assert response.status_code == 200 and response["HX-Refresh"] == "true"
    assert TraceReview.objects.get(annotator=member).complete


def test_skip_and_flag(client, member, trace):
    client.force_login(member)
    _post(client, trace, version=0, action="flag:bad_problem")
    trace.refresh_from_db()
    assert trace.flagged and TraceReview.objects.get(annotator=member).flag == "bad_problem"
    _post(client, trace, version=0, action="flag:")
    trace.refresh_from_db()
    assert not trace.flagged
    response = _post(client, trace, version=0, action="skip")
    assert response.status_code == 200 and "HX-Redirect" in response
    assert TraceReview.objects.get(annotator=member).skipped
