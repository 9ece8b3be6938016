"""Skeleton authoring: the live check of a check expression, versions with
history, approval (L_gold and the data_changed signal), the no-JS editor
form, and the problems/skeletons API."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation import signals, skeletons
from annotation.models import Problem, Skeleton
from tests.conftest import api

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("expr,ok,message", [
    ("", True, "optional"),
    ("16-3-4=9", True, "looks for 9"),
    ("<<9*2=18>>", True, "looks for 18"),
    ("10/3=3.33", True, "looks for 3.33"),
    ("$1,200 / 4 = $300", True, "looks for 300"),
    ("16-3-4=8", False, "16-3-4 is 9, not 8"),
    ("12=13", False, "12 is 12, not 13"),  # issue 23: a plain number on the left is checked too
    ("5=1", False, "5 is 5, not 1"),
    ("100=1", False, "100 is 100, not 1"),
    ("12=12", True, "looks for 12"),
    ("3+4=8", False, "3+4 is 7, not 8"),
    ("9", False, "a check is an equation"),
    ("=5", False, "one side of the equation is empty"),
    ("(3+=4", False, "sympy cannot parse it"),
    ("x+1=5", False, "with unknowns x"),
    ("1/0=5", False, "division by zero"),
    ('__import__("os").system("true")=0', False, "sympy cannot parse it"),
    ("1" * 600 + "=1", False, "too long"),
])
def test_validate_check(expr, ok, message):
    result = skeletons.validate_check(expr)
    assert result.ok is ok and message in result.message


def test_saving_makes_a_new_draft_version_and_approval_sets_l_gold(seeded, member, adjudicator,
                                                                   django_capture_on_commit_callbacks):
    problem = Problem.objects.get(problem_id="p0")
    v1 = problem.approved_skeleton
    draft = skeletons.do_save_skeleton(problem, member, [{"text": "a", "check": "1+1=2"}, {"text": "b"}, {"text": "c"}],
                                       note="three")
    assert (draft.version, draft.status, draft.created_by) == (2, "draft", member)
    problem.refresh_from_db()
    assert problem.approved_skeleton == v1 and problem.l_gold == 2  # a draft changes nothing yet
    seen = []
    signals.data_changed.connect(lambda sender, study, reason, **kw: seen.append(reason), dispatch_uid="t-sk", weak=False)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            skeletons.do_approve_skeleton(draft, adjudicator)
    finally:
        signals.data_changed.disconnect(dispatch_uid="t-sk")
    problem.refresh_from_db()
    draft.refresh_from_db()
    assert problem.approved_skeleton == draft and problem.l_gold == 3
    assert draft.status == "approved" and draft.approved_by == adjudicator and draft.approved_at
    assert seen == ["skeleton"]
    v1.refresh_from_db()
    assert [s.text for s in v1.steps.order_by("position")][0].startswith("She buys")  # versions are never edited


def test_bad_steps_are_refused_with_every_reason(seeded, member):
    problem = Problem.objects.get(problem_id="p0")
    with pytest.raises(skeletons.SkeletonError) as exc:
        skeletons.do_save_skeleton(problem, member, [{"text": "", "check": "1=1"}, {"text": "ok", "check": "2+2=5"}])
    assert ("steps[1].text", "an assertion needs text") in exc.value.errors
    assert ("steps[2].check", "2+2 is 4, not 5") in exc.value.errors
    assert Skeleton.objects.filter(problem=problem).count() == 1


def test_the_history_shows_who_when_and_a_diff(seeded, member):
    problem = Problem.objects.get(problem_id="p0")
    skeletons.do_save_skeleton(problem, member, [{"text": "She buys 2 more: $0+2=2$", "check": "0+2=2"},
                                                 {"text": "So 2 apples"}])
    versions = skeletons.history(problem)
    assert [v.skeleton.version for v in versions] == [2, 1]
    assert versions[1].is_current and not versions[0].is_current
    diff = versions[0].diff
    assert ("add", "2. So 2 apples") in diff and ("del", "2. The answer is **2**") in diff
    assert ("same", "1. She buys 2 more: $0+2=2$   [check: 0+2=2]") in diff


def test_the_editor_form_works_without_javascript(client, seeded, owner):
    problem = Problem.objects.get(problem_id="p0")
    client.force_login(owner)
    page = client.get(reverse("problem", args=[problem.pk])).content.decode()
    assert "2–10 necessary assertions" in page and "paraphrase" in page
    assert 'name="text-3"' in page  # the spare row
    # Typed positions reorder, "remove" drops, blank rows are ignored.
    response = client.post(reverse("skeleton-save", args=[problem.pk]), {
        "text-1": "first written", "pos-1": "3", "check-1": "",
        "text-2": "second written", "pos-2": "1", "check-2": "2*3=6",
        "text-3": "dropped", "pos-3": "2", "del-3": "on",
        "text-4": "", "pos-4": "4",
        "note": "reordered", "action": "approve",
    })
    assert response.status_code == 302
    problem.refresh_from_db()
    sk = problem.approved_skeleton
    assert sk.version == 2 and sk.note == "reordered" and problem.l_gold == 2
    assert [(s.text, s.check_expr) for s in sk.steps.order_by("position")] == [
        ("second written", "2*3=6"), ("first written", "")]


def test_the_editor_shows_errors_and_keeps_the_input(client, seeded, member):
    problem = Problem.objects.get(problem_id="p0")
    client.force_login(member)
    response = client.post(reverse("skeleton-save", args=[problem.pk]),
                           {"text-1": "kept text", "check-1": "2+2=5", "action": "draft"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "Not saved" in page and "2+2 is 4, not 5" in page and "kept text" in page


def test_the_live_check_fragment(client, member):
    client.force_login(member)
    bad = client.get(reverse("skeleton-check"), {"check-7": "16-3-4=8"}).content.decode()
    assert 'class="check-result bad"' in bad and "16-3-4 is 9, not 8" in bad and "<html" not in bad


# --- API -----------------------------------------------------------------------------


def test_problem_list_filters(seeded, member, do_import):
    from tests.conftest import jsonl

    do_import(jsonl({"kind": "problem", "problem_id": "bare", "statement": "s", "gold_answer": "1",
                     "domain": "geometry", "tags": ["algebra-ish"]}))
    client = api(member)
    url = f"/api/v1/studies/{seeded.pk}/problems/"
    assert client.get(url).json()["count"] == 3
    assert [p["problem_id"] for p in client.get(url + "?has_skeleton=false").json()["results"]] == ["bare"]
    assert [p["problem_id"] for p in client.get(url + "?domain=algebra").json()["results"]] == ["p1"]
    assert [p["problem_id"] for p in client.get(url + "?tag=t1").json()["results"]] == ["p1"]
    assert client.get(url + "?tag=algebra").json()["count"] == 0  # a whole tag, not a substring
    row = client.get(url + "?tag=t0").json()["results"][0]
    assert row["l_gold"] == 2 and row["approved_skeleton"] == 1 and row["html_url"].endswith(f"/problems/{row['id']}/")


def test_problem_patch_by_the_owner(seeded, owner):
    problem = Problem.objects.get(problem_id="p0")
    response = api(owner).patch(f"/api/v1/problems/{problem.pk}/", {"domain": "geometry", "tags": ["x"]}, format="json")
    assert response.status_code == 200 and response.json()["domain"] == "geometry" and response.json()["tags"] == ["x"]
    bad = api(owner).patch(f"/api/v1/problems/{problem.pk}/", {"tags": "x"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "tags"


def test_skeleton_versions_over_the_api(seeded, member, adjudicator):
    problem = Problem.objects.get(problem_id="p0")
    url = f"/api/v1/problems/{problem.pk}/skeletons/"
    created = api(member).post(url, {"steps": [{"text": "x", "check": "1+1=2"}, {"text": "y"}], "note": "n"},
                               format="json")
    assert created.status_code == 201
    body = created.json()
    assert (body["version"], body["status"], body["created_by"], body["is_current"]) == (2, "draft", "alice", False)
    assert body["steps"] == [{"position": 1, "text": "x", "check": "1+1=2"}, {"position": 2, "text": "y", "check": ""}]
    bad = api(member).post(url, {"steps": [{"text": "x", "check": "1+1=3"}]}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0] == {"field": "steps[1].check", "message": "1+1 is 2, not 3"}
    approved = api(adjudicator).patch(f"/api/v1/skeletons/{body['id']}/", {"status": "approved"}, format="json")
    assert approved.status_code == 200 and approved.json()["is_current"] is True
    listed = api(member).get(url).json()
    assert [s["version"] for s in listed] == [2, 1] and listed[0]["approved_by"] == "adam"
    assert api(member).get(f"/api/v1/problems/{problem.pk}/").json()["l_gold"] == 2


def test_the_editor_names_a_field_in_words(client, seeded, member):
    # Issue 31: the page said "steps[1].check"; the API keeps that path, the page says which assertion.
    problem = Problem.objects.get(problem_id="p0")
    client.force_login(member)
    page = client.post(reverse("skeleton-save", args=[problem.pk]),
                       {"text-1": "kept text", "check-1": "2+2=5", "action": "draft"}).content.decode()
    assert "Check: 2+2 is 4, not 5" in page and "steps[1]" not in page


def test_the_editor_puts_each_error_beside_its_row(client, seeded, member):
    # Issue 31: the errors were listed above the editor, far from the assertion they concern.
    problem = Problem.objects.get(problem_id="p0")
    client.force_login(member)
    page = client.post(reverse("skeleton-save", args=[problem.pk]),
                       {"text-1": "fine", "check-1": "1+1=2", "text-2": "", "check-2": "3*3=9",
                        "text-3": "wrong sum", "check-3": "2+2=5", "action": "draft"}).content.decode()
    editor = page[page.index('id="skeleton-form"'):]

    def row(j: int) -> str:
        start = editor.index(f'data-j="{j}"')
        return editor[start:editor.index("</li>", start)]

    assert "sk-error" not in row(1) and 'aria-invalid' not in row(1)
    assert 'id="sk-error-2-text"' in row(2) and "Text: an assertion needs text" in row(2)
    assert 'aria-invalid="true" aria-describedby="sk-error-2-text"' in row(2)
    assert "Check: 2+2 is 4, not 5" in row(3) and 'aria-describedby="sk-error-3-check"' in row(3)
    summary = page[page.index("Not saved."):page.index('id="skeleton-form"')]
    assert "2 assertions to correct" in summary and "an assertion needs text" not in summary
