"""Queues: round-robin assignment with overlap, stratified by model; the next
trace; skips and flags; progress per annotator; filters; the queue API."""

from __future__ import annotations

from collections import Counter

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Assignment, Trace
from annotation.review.filters import lucky_guess_available
from annotation.review.labels import LabelIn, do_flag, do_save_labels, do_skip
from annotation.review.progress import annotator_progress
from annotation.review.queues import AssignError, do_assign, next_trace_id
from tests.review.conftest import seed

pytestmark = pytest.mark.django_db


@pytest.fixture
def many(study, do_import):
    seed(do_import, n_problems=6, models=("m1", "m2", "m3"), n_steps=1)
    return study


def test_round_robin_gives_everyone_the_same_share_of_each_model(many, owner, member, annotator2, adjudicator):
    users = [member, annotator2, adjudicator]
    n = do_assign(many, owner, users, 1)
    assert n == 18
    per_model = Counter(Assignment.objects.values_list("annotator__username", "trace__model"))
    assert set(per_model.values()) == {2}  # 6 traces of each model over 3 annotators
    # Queue order interleaves the models.
    first = list(Assignment.objects.filter(annotator=member).order_by("position").values_list("trace__model", flat=True))
    assert first[:3] != ["m1", "m1", "m1"] and len(set(first[:3])) > 1


def test_k_annotators_per_trace_give_overlap(many, owner, member, annotator2, adjudicator):
    do_assign(many, owner, [member, annotator2, adjudicator], 2)
    per_trace = Counter(Assignment.objects.values_list("trace_id", flat=True))
    assert set(per_trace.values()) == {2}
    assert len(set(Assignment.objects.values_list("trace_id", "annotator_id"))) == 36
    load = Counter(Assignment.objects.values_list("annotator_id", flat=True))
    assert set(load.values()) == {12}
    # Running it again assigns nothing new ("only traces nobody has yet").
    assert do_assign(many, owner, [member, annotator2], 1) == 0


def test_bad_assignments_are_refused(many, owner, member, outsider):
    with pytest.raises(AssignError, match="between 1 and 1"):
        do_assign(many, owner, [member], 2)
    with pytest.raises(AssignError, match="not members of the study: mallory"):
        do_assign(many, owner, [member, outsider], 1)


def test_next_trace_follows_my_queue_and_skips_finished_and_skipped(many, owner, member):
    do_assign(many, owner, [member], 1)
    order = list(Assignment.objects.filter(annotator=member).order_by("position").values_list("trace_id", flat=True))
    t = {pk: Trace.objects.get(pk=pk) for pk in order}
    assert next_trace_id(many, member) == order[0]
    do_skip(t[order[0]], member)
    assert next_trace_id(many, member) == order[1]
    do_save_labels(t[order[1]], member, version=0, labels=[LabelIn(1, "valid")])  # complete
    assert next_trace_id(many, member) == order[2]
    assert next_trace_id(many, member, after=t[order[5]]) == order[6]
    # After the last one it wraps round to the first still to do.
    assert next_trace_id(many, member, after=t[order[-1]]) == order[2]


def test_without_assignments_next_walks_the_study(seeded, member):
    first = Trace.objects.order_by("pk").first()
    assert next_trace_id(seeded, member) == first.pk
    do_save_labels(first, member, version=0, labels=[LabelIn(i, "valid") for i in (1, 2, 3)])
    assert next_trace_id(seeded, member) != first.pk


def test_progress_per_annotator(many, owner, member, annotator2):
    do_assign(many, owner, [member, annotator2], 1)
    mine = Assignment.objects.filter(annotator=member).order_by("position")
    traces = [a.trace for a in mine[:3]]
    do_save_labels(traces[0], member, version=0, labels=[LabelIn(1, "valid")])
    do_skip(traces[1], member)
    do_flag(traces[2], member, "cant_judge")
    rows = {r["username"]: r for r in annotator_progress(many)}
    assert rows["alice"] == {"username": "alice", "assigned": 9, "done": 1, "skipped": 1, "flagged": 1, "percent": 11}
    assert rows["bob"]["done"] == 0 and rows["bob"]["assigned"] == 9


def test_the_queue_page_lists_my_work_with_filters(client, many, owner, member):
    do_assign(many, owner, [member], 1)
    client.force_login(member)
    url = reverse("queue", args=[many.pk])
    page = client.get(url).content.decode()
    assert page.count("to do</span>") == 18 and "Review the next trace" in page
    page = client.get(url + "?model=m2").content.decode()
    assert page.count("to do</span>") == 6
    partial = client.get(url + "?model=m2", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and 'id="queue-rows"' in partial
    assert "Assign traces" not in page  # only owners assign


def test_the_owner_assigns_on_the_web(client, many, owner, member, annotator2):
    client.force_login(owner)
    response = client.post(reverse("queue-assign", args=[many.pk]),
                           {"annotators": [member.pk, annotator2.pk], "k": 2, "stratify": "on", "only_unassigned": "on"})
    assert response.status_code == 302
    assert Assignment.objects.count() == 36
    page = client.get(reverse("queue", args=[many.pk])).content.decode()
    assert "Made 36 assignments" in page and "Progress per annotator" in page
    client.post(reverse("queue-assign", args=[many.pk]), {"action": "clear"})
    assert not Assignment.objects.exists()


def test_a_wrong_k_is_told_under_its_field_and_the_form_keeps_what_was_typed(client, many, owner, member, annotator2):
    client.force_login(owner)
    response = client.post(reverse("queue-assign", args=[many.pk]),
                           {"annotators": [annotator2.pk], "k": 99, "action": "assign"})
    assert response.status_code == 400 and not Assignment.objects.exists()
    page = response.content.decode()
    field = page.index('name="k"')
    error = page.index('id="assign-k-error"')
    assert field < error < page.index("Stratify by model")  # under the field, not a banner at the top
    assert "less than or equal to" in page[error:error + 200]
    assert 'value="99"' in page[field - 200:field + 200]  # the typed value kept, not reset to 1
    checked = [line for line in page.splitlines() if 'name="annotators"' in line and "checked" in line]
    assert len(checked) == 1 and f'value="{annotator2.pk}"' in checked[0]  # the choice kept too
    assert "Check the assignment form" not in page


def test_the_queue_api(many, owner, member):
    owner_api, member_api = APIClient(), APIClient()
    owner_api.force_authenticate(owner)
    member_api.force_authenticate(member)
    response = owner_api.post(f"/api/v1/studies/{many.pk}/assignments/", {"annotators": ["alice"], "k": 1}, format="json")
    assert response.status_code == 201 and response.json()["created"] == 18
    bad = owner_api.post(f"/api/v1/studies/{many.pk}/assignments/", {"annotators": ["nobody"]}, format="json")
    assert bad.status_code == 400 and "nobody" in bad.json()["detail"]
    rows = member_api.get(f"/api/v1/studies/{many.pk}/queue/?status=todo").json()
    assert rows["count"] == 18 and rows["results"][0]["status"] == "todo"
    assert rows["results"][0]["trace"]["html_url"].startswith("http")


def test_trace_filters_flagged_and_needs_review(client, seeded, owner, member):
    trace = Trace.objects.get(trace_id="p0/m1")
    do_flag(trace, member, "bad_problem")
    api = APIClient()
    api.force_authenticate(member)
    url = f"/api/v1/studies/{seeded.pk}/traces/"
    # Anyone's flag: another source for an annotator of this blind study (annotation.gate), not for the owner.
    assert api.get(url + "?flagged=true").status_code == 403
    owner_api = APIClient()
    owner_api.force_authenticate(owner)
    assert [r["trace_id"] for r in owner_api.get(url + "?flagged=true").json()["results"]] == ["p0/m1"]
    assert api.get(url + "?needs_review=true").json()["count"] == 4
    do_save_labels(trace, member, version=0, labels=[LabelIn(i, "valid") for i in (1, 2, 3)])
    assert api.get(url + "?needs_review=true").json()["count"] == 3
    assert api.get(url + "?needs_review=false").json()["count"] == 1
    assert api.get(url + "?domain=algebra").json()["count"] == 2


def test_the_lucky_guess_filter_reads_the_scores_the_scoring_app_registered(seeded, owner, member):
    api = APIClient()
    api.force_authenticate(member)
    url = f"/api/v1/studies/{seeded.pk}/traces/"
    assert lucky_guess_available()  # scoring registers the condition at start-up
    # Scores come from every source's labels: refused to an annotator of this blind study (annotation.gate).
    assert api.get(url + "?lucky_guess=true").status_code == 403
    api.force_authenticate(owner)
    assert api.get(url + "?lucky_guess=true").json()["count"] == 0  # nothing scored yet
    assert api.get(url + "?lucky_guess=false").json()["count"] == 4
