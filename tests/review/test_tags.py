"""Step-function tags: one operation (annotation.review.tags.do_save_tags) behind the review form and the tags
API; the review's version and its 409; several tags per step; blind mode (a blinded annotator sees only her
own tags, on the page and in the API)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.models import Step, StepLabel, StepTag, Study, Trace, TraceReview
from annotation.review.base import Conflict, ReviewError
from annotation.review.labels import LabelIn, do_save_labels
from annotation.review.tags import do_save_tags, my_tags
from tests.review.conftest import judge
from tests.review.test_labels import api
from tests.scoring.thought_fixtures import long_thought

pytestmark = pytest.mark.django_db


@pytest.fixture
def trace(seeded):
    return Trace.objects.select_related("problem", "study").get(trace_id="p0/m1")


def url(trace) -> str:
    return f"/api/v1/traces/{trace.pk}/tags/"


def other_tags(trace, peer, config):
    """A peer's, a judge's and a published analysis' tags on step 1 (the sources a blind annotator must not see)."""
    step = Step.objects.get(trace=trace, index=1)
    now = timezone.now()
    StepTag.objects.create(step=step, kind="human", annotator=peer, tag="self_checking", created_at=now)
    StepTag.objects.create(step=step, kind="judge", judge=config, tag="uncertainty_management", created_at=now)
    StepTag.objects.create(step=step, kind="imported", origin="thought-anchors", tag="fact_retrieval", created_at=now)


def test_tags_are_saved_several_per_step_and_move_the_reviews_version(member, trace):
    result = do_save_tags(trace, member, version=0, tags={1: ["plan_generation", "problem_setup"], 2: []})
    assert (result.review.version, result.added, result.removed) == (1, 2, 0)
    assert my_tags(trace, member) == {1: ["problem_setup", "plan_generation"]}
    # Replacing one step's tags leaves the other steps' alone; no change writes nothing.
    do_save_tags(trace, member, version=1, tags={2: ["active_computation"]})
    result = do_save_tags(trace, member, version=2, tags={1: ["plan_generation"]})
    assert (result.review.version, result.added, result.removed) == (3, 0, 1)
    assert my_tags(trace, member) == {1: ["plan_generation"], 2: ["active_computation"]}
    assert do_save_tags(trace, member, version=3, tags={1: ["plan_generation"]}).review.version == 3


def test_a_stale_version_is_refused_and_nothing_is_written(member, trace):
    do_save_labels(trace, member, version=0, labels=[LabelIn(1, "valid")])  # the labels moved the version to 1
    with pytest.raises(Conflict) as exc:
        do_save_tags(trace, member, version=0, tags={1: ["plan_generation"]})
    assert exc.value.current_version == 1
    assert not StepTag.objects.exists()


@pytest.mark.parametrize(("tags", "field"), [
    ({9: ["plan_generation"]}, "steps[9].step"),
    ({1: ["planning"]}, "steps[1].tags"),
])
def test_bad_tags_are_refused_with_the_field(member, trace, tags, field):
    with pytest.raises(ReviewError) as exc:
        do_save_tags(trace, member, version=0, tags=tags)
    assert exc.value.errors[0][0] == field


def test_the_api_reads_and_writes_through_the_same_operation(member, trace):
    client = api(member)
    assert client.get(url(trace)).json() == {"version": 0, "steps": [], "visible": [], "hidden": True}
    body = {"version": 0, "steps": [{"step": 2, "tags": ["self_checking", "result_consolidation"]}]}
    response = client.put(url(trace), body, format="json")
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["version"] == 1 and data["steps"] == [{"step": 2, "tags": ["result_consolidation", "self_checking"]}]
    assert {(v["step"], v["source"], v["tag"]) for v in data["visible"]} == {
        (2, "annotator:alice", "result_consolidation"), (2, "annotator:alice", "self_checking")}
    assert TraceReview.objects.get(trace=trace, annotator=member).updated_via == "api"
    stale = client.put(url(trace), body, format="json")
    assert stale.status_code == 409 and stale.json()["errors"] == [
        {"field": "version", "message": "the current version is 1"}]


@pytest.mark.parametrize("body", [
    {"version": 0, "steps": [{"step": 1, "tags": ["nonsense"]}]},
    {"version": 0, "steps": [{"step": 99, "tags": []}]},
    {"version": 0, "steps": [{"step": 1, "tags": []}, {"step": 1, "tags": ["plan_generation"]}]},
    {"version": -1, "steps": []},
])
def test_the_api_answers_bad_input_with_400(member, trace, body):
    response = api(member).put(url(trace), body, format="json")
    assert response.status_code == 400, response.content
    assert not StepTag.objects.exists()


def test_an_outsider_gets_404(outsider, trace):
    assert api(outsider).get(url(trace)).status_code == 404
    assert api(outsider).put(url(trace), {"version": 0, "steps": []}, format="json").status_code == 404


# --- the review page ---------------------------------------------------------


def _post(client, trace, **data):
    return client.post(reverse("trace-review", args=[trace.pk]), data, HTTP_HX_REQUEST="true")


def test_the_review_form_saves_labels_and_tags_in_one_version(client, member, trace):
    client.force_login(member)
    response = _post(client, trace, version=0, v1="valid", f1=["plan_generation", "problem_setup"], v2="", v3="")
    assert response.status_code == 200, response.content
    # the labels moved the version to 1, the tags to 2: the page is sent the last one
    assert 'id="review-version" value="2" hx-swap-oob="true"' in response.content.decode()
    assert my_tags(trace, member) == {1: ["problem_setup", "plan_generation"]}
    page = client.get(reverse("trace", args=[trace.pk])).content.decode()
    assert 'name="f1" value="plan_generation" checked' in page and 'name="f2" value="plan_generation">' in page
    # a step the form showed with no tag checked loses its tags; a step it did not post keeps them
    _post(client, trace, version=2, v2="", v3="")
    assert my_tags(trace, member) == {1: ["problem_setup", "plan_generation"]}
    _post(client, trace, version=3, v1="valid", f1=["plan_generation"])
    assert my_tags(trace, member) == {1: ["plan_generation"]}


def test_a_bad_tag_refuses_the_whole_save(client, member, trace):
    client.force_login(member)
    response = _post(client, trace, version=0, v1="valid", f1=["<script>"])
    assert response.status_code == 400 and "&lt;script&gt;" in response.content.decode()
    assert not StepTag.objects.exists() and not TraceReview.objects.exists()


def test_a_stale_page_saves_neither_labels_nor_tags(client, member, trace):
    do_save_tags(trace, member, version=0, tags={1: ["fact_retrieval"]})
    client.force_login(member)
    response = _post(client, trace, version=0, v1="valid", f1=["plan_generation"])
    assert response.status_code == 409
    assert my_tags(trace, member) == {1: ["fact_retrieval"]}
    assert not StepLabel.objects.filter(annotator=member).exists()


def test_a_blinded_annotator_sees_only_her_own_tags(client, member, annotator2, trace):
    Study.objects.filter(pk=trace.study_id).update(blind=True)
    other_tags(trace, annotator2, judge(trace.study))
    do_save_tags(trace, member, version=0, tags={1: ["plan_generation"]})
    client.force_login(member)
    page = client.get(reverse("trace", args=[trace.pk])).content.decode()
    assert "other-tag" not in page and "thought-anchors" not in page and "annotator:bob" not in page
    data = api(member).get(url(trace)).json()
    assert data["hidden"] is True
    assert [(v["source"], v["tag"]) for v in data["visible"]] == [("annotator:alice", "plan_generation")]
    # Once she has labelled every step, the trace is revealed to her: every source's tags show.
    do_save_labels(trace, member, version=1, labels=[LabelIn(i, "valid") for i in (1, 2, 3)])
    data = api(member).get(url(trace)).json()
    assert data["hidden"] is False
    assert {v["source"] for v in data["visible"]} == {"annotator:alice", "annotator:bob", "judge:gpt-judge",
                                                      "imported:thought-anchors"}
    page = client.get(reverse("trace", args=[trace.pk])).content.decode()
    assert "imported:thought-anchors" in page and "judge:gpt-judge" in page


def test_the_owner_sees_every_sources_tags(client, owner, annotator2, trace):
    Study.objects.filter(pk=trace.study_id).update(blind=True)
    other_tags(trace, annotator2, judge(trace.study))
    client.force_login(owner)
    page = client.get(reverse("trace", args=[trace.pk])).content.decode()
    assert page.count('class="other-tag ') == 3
    assert 'class="other-tag imported"' in page and 'class="other-tag judge"' in page


# --- the function_tag filter ---------------------------------------------------


def test_the_function_tag_filter_finds_the_traces_any_source_tagged(owner, member, annotator2, trace):
    other_tags(trace, annotator2, judge(trace.study))
    client = api(owner)
    found = client.get(f"/api/v1/studies/{trace.study_id}/traces/", {"function_tag": "Uncertainty management"})
    assert found.status_code == 200 and [t["trace_id"] for t in found.json()["results"]] == ["p0/m1"]
    assert client.get(f"/api/v1/studies/{trace.study_id}/traces/",
                      {"function_tag": "plan_generation"}).json()["results"] == []
    bad = client.get(f"/api/v1/studies/{trace.study_id}/traces/", {"function_tag": "musing"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "function_tag"
    Study.objects.filter(pk=trace.study_id).update(blind=True)
    refused = api(member).get(f"/api/v1/studies/{trace.study_id}/traces/", {"function_tag": "self_checking"})
    assert refused.status_code == 403 and "blind study" in refused.json()["detail"]


# --- long thoughts and the page without JavaScript ---------------------------------


def test_a_long_thoughts_blocks_show_my_tags_and_a_save_keeps_the_unloaded_blocks_tags(client, owner, study):
    trace = long_thought(study, 250)
    do_save_tags(trace, owner, version=0, tags={1: ["problem_setup"], 120: ["uncertainty_management"],
                                                150: ["self_checking"]})
    client.force_login(owner)
    rows = client.get(reverse("trace-thought", args=[trace.pk]), {"block": 2}).content.decode()
    assert 'name="f120" value="uncertainty_management" checked' in rows
    # The page loaded block 2 only (steps 101-200 post their radios), unticked step 120's tag and added one to
    # step 150's; step 1, in a block it never loaded, keeps its tag.
    data = {"version": 1, "windowed": "1", "action": "save", **{f"v{i}": "" for i in range(101, 201)},
            "f150": ["self_checking", "plan_generation"]}
    assert client.post(reverse("trace-review", args=[trace.pk]), data).status_code == 302
    assert my_tags(trace, owner) == {1: ["problem_setup"], 150: ["plan_generation", "self_checking"]}


def test_a_refused_plain_form_shows_the_tags_it_posted(client, member, trace):
    client.force_login(member)
    response = client.post(reverse("trace-review", args=[trace.pk]),
                           {"version": 0, "v1": "", "n1": "a note and no verdict", "f1": ["fact_retrieval"],
                            "v2": "", "v3": ""})
    page = response.content.decode()
    assert response.status_code == 400 and "has a note but no verdict" in page
    assert 'name="f1" value="fact_retrieval" checked' in page and not StepTag.objects.exists()
