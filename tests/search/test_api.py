"""GET studies/<id>/traces/ with the search parameters, and the cohorts API."""

from __future__ import annotations

import io

import pytest
from rest_framework.test import APIClient

from annotation.models import Assignment, Job, Membership
from search.models import Cohort, CohortTrace
from tests.review.conftest import judge
from tests.search.conftest import label

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    c = APIClient()
    c.force_authenticate(user)
    return c


def test_the_traces_api_searches_and_lists_matches(study, owner, traces):
    r = client_for(owner).get(f"/api/v1/studies/{study.pk}/traces/", {"q": '"let me check"', "model": "m2"})
    assert r.status_code == 200, r.content
    rows = r.json()["results"]
    assert [row["trace_id"] for row in rows] == ["t4"]
    (match,) = rows[0]["matches"]
    assert match["kind"] == "step" and match["step"] == 2 and "<mark>" in match["html"]
    assert match["url"] == f"/traces/{traces['t4'].pk}/#s2"


def test_the_old_filters_still_work_and_plain_lists_are_unchanged(study, owner, traces):
    r = client_for(owner).get(f"/api/v1/studies/{study.pk}/traces/", {"answer_correct": "true"})
    assert [row["trace_id"] for row in r.json()["results"]] == ["t1", "t3"]
    assert all(row["matches"] == [] for row in r.json()["results"])


def test_bad_parameters_answer_400_naming_the_field(study, owner, traces):
    r = client_for(owner).get(f"/api/v1/studies/{study.pk}/traces/", {"q": "-wait"})
    assert r.status_code == 400
    assert r.json()["errors"][0]["field"] == "q" and "only excludes" in r.json()["detail"]
    r = client_for(owner).get(f"/api/v1/studies/{study.pk}/traces/", {"first_error_rel_min": "x"})
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "first_error_rel_min"


def test_an_outsider_gets_404(study, outsider, traces):
    assert client_for(outsider).get(f"/api/v1/studies/{study.pk}/traces/", {"q": "wait"}).status_code == 404
    assert client_for(outsider).get(f"/api/v1/studies/{study.pk}/cohorts/").status_code == 404


def test_a_blinded_annotator_is_refused_other_sources_with_403(study, owner, member, traces):
    judge(study)
    label(traces["t2"], 2, verdict="invalid", user=owner, reason="carries wrongly")
    c = client_for(member)
    r = c.get(f"/api/v1/studies/{study.pk}/traces/", {"verdict": "invalid", "source": "human"})
    assert r.status_code == 403 and "blind study" in r.json()["detail"]
    r = c.get(f"/api/v1/studies/{study.pk}/traces/", {"human_judge_disagreement": "true"})
    assert r.status_code == 403
    # Another annotator's note is neither a result nor a hit.
    r = c.get(f"/api/v1/studies/{study.pk}/traces/", {"q": "carries"})
    assert r.status_code == 200 and r.json()["results"] == []


def test_the_list_reads_a_page_in_a_bounded_number_of_queries(study, owner, traces, django_assert_max_num_queries):
    c = client_for(owner)
    with django_assert_max_num_queries(12):
        r = c.get(f"/api/v1/studies/{study.pk}/traces/", {"q": "wait or check", "answer_correct": "true"})
    assert len(r.json()["results"]) == 2


def test_save_list_and_read_a_cohort(study, owner, member, traces):
    c = client_for(member)
    r = c.post(f"/api/v1/studies/{study.pk}/cohorts/", {"name": "waiters", "query": {"q": "wait"}}, format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["n_traces"] == 2 and body["query"] == {"q": "wait"} and body["created_by"] == "alice"
    cohort = Cohort.objects.get(pk=body["id"])
    assert sorted(CohortTrace.objects.filter(cohort=cohort).values_list("trace__trace_id", flat=True)) == ["t1", "t3"]
    assert [row["name"] for row in c.get(f"/api/v1/studies/{study.pk}/cohorts/").json()] == ["waiters"]
    assert c.get(f"/api/v1/cohorts/{cohort.pk}/").json()["trace_ids"] == ["t1", "t3"]
    # The snapshot is frozen: a later edit does not change it, but the cohort filter reads it.
    r = c.get(f"/api/v1/studies/{study.pk}/traces/", {"cohort": cohort.pk, "model": "m2"})
    assert [row["trace_id"] for row in r.json()["results"]] == ["t3"]
    r = c.post(f"/api/v1/studies/{study.pk}/cohorts/", {"name": "waiters", "query": {}}, format="json")
    assert r.status_code == 400 and "exists" in r.json()["detail"]
    r = c.post(f"/api/v1/studies/{study.pk}/cohorts/", {"name": "bad", "query": {"q": "-x"}}, format="json")
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "q"


def test_compare_two_cohorts(study, owner, traces):
    c = client_for(owner)
    a = c.post(f"/api/v1/studies/{study.pk}/cohorts/", {"name": "m1", "query": {"model": "m1"}}, format="json").json()
    b = c.post(f"/api/v1/studies/{study.pk}/cohorts/", {"name": "right", "query": {"answer_correct": "true"}},
               format="json").json()
    r = c.get(f"/api/v1/cohorts/{a['id']}/compare/", {"b": b["id"]})
    assert r.status_code == 200, r.content
    out = r.json()
    assert out["a"]["n_traces"] == 2 and out["a"]["accuracy"] == 0.5 and out["shared"] == 1
    assert out["b"]["accuracy"] == 1.0 and out["b"]["accuracy_ci"][1] == 1.0 and out["b"]["accuracy_ci"][0] < 1.0
    assert out["a"]["models"] == {"m1": 2}


def test_a_cohort_scopes_a_queue_assignment_and_a_judge_run(study, owner, member, traces):
    from judges.models import MECHANISTIC
    from judges.services import ensure_mechanistic

    ensure_mechanistic(study)
    c = client_for(owner)
    cohort = c.post(f"/api/v1/studies/{study.pk}/cohorts/", {"name": "m2", "query": {"model": "m2"}},
                    format="json").json()
    r = c.post(f"/api/v1/cohorts/{cohort['id']}/assignments/", {"annotators": ["alice"]}, format="json")
    assert r.status_code == 201 and r.json() == {"assigned": 2}
    assert sorted(Assignment.objects.filter(annotator=member).values_list("trace__trace_id", flat=True)) == ["t3", "t4"]
    r = client_for(member).post(f"/api/v1/cohorts/{cohort['id']}/assignments/", {"annotators": ["alice"]},
                                format="json")
    assert r.status_code == 403
    r = c.post(f"/api/v1/cohorts/{cohort['id']}/judge-runs/", {"judge": MECHANISTIC}, format="json")
    assert r.status_code == 202, r.content
    job = Job.objects.get(pk=r.json()["job"])
    assert job.total == 2 and job.params["filters"]["trace_ids"] == ["t3", "t4"]


def test_delete_is_for_the_author_or_an_owner(study, owner, member, traces):
    cohort = client_for(owner).post(f"/api/v1/studies/{study.pk}/cohorts/", {"name": "x", "query": {}},
                                    format="json").json()
    assert client_for(member).delete(f"/api/v1/cohorts/{cohort['id']}/").status_code == 403
    assert client_for(owner).delete(f"/api/v1/cohorts/{cohort['id']}/").status_code == 204
    assert not Cohort.objects.exists()


def test_a_cohort_scopes_an_export_and_a_calibration_sample(study, owner, traces):
    import json

    from agreement import calibration
    from scoring import exports
    from search import services as search_services

    owner_m = Membership.objects.get(study=study, user=owner)
    cohort = search_services.do_save_cohort(study, owner_m, name="m2", data={"model": "m2"})
    label(traces["t3"], 1, verdict="valid", user=owner)
    label(traces["t1"], 1, verdict="valid", user=owner)
    table = exports.build(exports.ExportRequest(study=study, what="labels", extra={"cohort": str(cohort.pk)}))
    out = io.StringIO()
    exports.write_jsonl(table, out)
    rows = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
    assert rows and {r["trace_id"] for r in rows} == {"t3"}
    with pytest.raises(exports.ExportError, match="no cohort 999"):
        exports.write_jsonl(exports.build(exports.ExportRequest(study=study, what="labels",
                                                                extra={"cohort": "999"})), io.StringIO())
    judge(study)
    cal = calibration.do_create_calibration(study, name="from m2", reference="human", candidates=["judge:gpt-judge"],
                                            size=2, cohort=str(cohort.pk))  # a larger sample is refused (issue 23)
    assert sorted(cal.items.values_list("trace__trace_id", flat=True)) == ["t3", "t4"]
    with pytest.raises(calibration.CalibrationError, match="no cohort"):
        calibration.do_create_calibration(study, name="x", reference="human", candidates=["judge:gpt-judge"],
                                          size=10, cohort="999")


@pytest.mark.parametrize("k", [0, 21, 10**10])
def test_k_out_of_its_range_is_refused_naming_k_on_every_assignment_endpoint(study, owner, member, traces, k):
    c = client_for(owner)
    cohort = c.post(f"/api/v1/studies/{study.pk}/cohorts/", {"name": "all", "query": {}}, format="json").json()
    for url in (f"/api/v1/cohorts/{cohort['id']}/assignments/", f"/api/v1/studies/{study.pk}/assignments/"):
        r = c.post(url, {"annotators": ["alice"], "k": k}, format="json")
        assert r.status_code == 400 and r.json()["detail"].startswith("k:"), (url, r.content)
    assert not Assignment.objects.exists()


def test_the_service_bounds_k_by_the_declared_range_whatever_the_number_of_annotators(study, owner,
                                                                                       django_user_model, traces):
    from annotation.review.queues import ANNOTATORS_PER_TRACE, AssignError, do_assign
    from annotation.services import do_add_member

    people = [django_user_model.objects.create_user(f"a{i}", password="pw") for i in range(21)]
    for person in people:
        do_add_member(study, person.username, Membership.Role.ANNOTATOR)
    assert ANNOTATORS_PER_TRACE == (1, 20)
    with pytest.raises(AssignError, match="between 1 and 20"):
        do_assign(study, owner, people, 21)
    assert do_assign(study, owner, people, 20) > 0


def test_k_beyond_the_annotators_chosen_is_refused_naming_k(study, owner, member, traces):
    c = client_for(owner)
    cohort = c.post(f"/api/v1/studies/{study.pk}/cohorts/", {"name": "all", "query": {}}, format="json").json()
    r = c.post(f"/api/v1/cohorts/{cohort['id']}/assignments/", {"annotators": ["alice"], "k": 2}, format="json")
    assert r.status_code == 400 and r.json()["detail"].startswith("k:"), r.content
