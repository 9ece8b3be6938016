"""The REST API of runs of every kind (runs.api) and the pages that start runs outside the runs page, all
validated by the kind's one serializer (runs.kinds)."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from annotation.models import Job
from judges import services as judge_services
from judges.models import MECHANISTIC, JudgeConfig, JudgeRun
from runs import kinds
from runs.clients import client_for
from runs.engine import RunControl
from runs.models import Run
from search.models import ScannerRun
from tests.conftest import api
from tests.search.conftest import scanner, server, traces  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def web(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def ran(study, owner, scanner, django_capture_on_commit_callbacks):  # noqa: F811 - the fixture imported above
    """A finished judge run (mechanistic) and a finished scanner run, started through the API."""
    with django_capture_on_commit_callbacks(execute=True):
        judged = api(owner).post(f"/api/v1/studies/{study.pk}/runs/", {"kind": "judge", "judge": MECHANISTIC},
                                 format="json").json()
        scanned = api(owner).post(f"/api/v1/scanners/{scanner.pk}/runs/", {}, format="json").json()
    return judged, scanned


def test_the_list_filters_by_kind_and_status_and_refuses_unknown_ones(ran, study, member, outsider):
    judged, scanned = ran
    url = f"/api/v1/studies/{study.pk}/runs/"
    rows = api(member).get(url).json()
    assert rows["count"] == 2 and [r["kind"] for r in rows["results"]] == ["scanner", "judge"]
    # The judge's labels queued a score job, itself a (spread) run of the engine: not a run of model calls,
    # so the list leaves it out (RunClient.listed), on the runs page too.
    assert not client_for("score").listed and Run.objects.filter(job__study=study, kind="score").exists()
    page = web(member).get(f"/studies/{study.pk}/runs/").content.decode()
    assert "<td>Judge</td>" in page and "<td>Scores</td>" not in page
    assert [r["run"] for r in api(member).get(url, {"kind": "judge"}).json()["results"]] == [judged["run"]]
    assert api(member).get(url, {"status": "succeeded"}).json()["count"] == 2
    assert api(member).get(url, {"status": "running"}).json()["count"] == 0
    bad = api(member).get(url, {"kind": "astrology"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "kind"
    assert api(member).get(url, {"status": "done"}).status_code == 400
    assert api(outsider).get(url).status_code == 404
    assert api(outsider).get(f"/api/v1/runs/{judged['run']}/").status_code == 404


def test_the_scanner_door_answers_the_body_of_every_kind(ran, scanner):  # noqa: F811
    judged, scanned = ran
    record = ScannerRun.objects.get()
    assert set(scanned) == set(judged) and scanned["kind"] == "scanner" and scanned["record"] == record.pk
    assert scanned["run"] == record.run_id and scanned["html_url"].endswith(scanner.get_absolute_url())


def test_a_run_shows_its_failures_and_a_retry_asks_only_what_failed(study, owner, member, traces,  # noqa: F811
                                                                    django_capture_on_commit_callbacks):
    JudgeConfig.objects.create(study=study, name="broken", provider="fake", model="fail")
    with django_capture_on_commit_callbacks(execute=True):
        body = api(owner).post(f"/api/v1/studies/{study.pk}/runs/", {"kind": "judge", "judge": "broken"},
                               format="json").json()
    shown = api(member).get(f"/api/v1/runs/{body['run']}/").json()
    assert shown["status"] == Job.Status.FAILED and len(shown["failures"]) == len(traces) == 4
    assert shown["params"] == {"kind": "judge", "judge": "broken"}
    assert api(member).post(f"/api/v1/runs/{body['run']}/retry/").status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        again = api(owner).post(f"/api/v1/runs/{body['run']}/retry/")
    assert again.status_code == 202 and again.json()["progress"]["total"] == 4
    assert JudgeRun.objects.get(run_id=again.json()["run"]).scope == JudgeRun.Scope.FAILED


def test_a_run_still_active_is_not_retried(study, owner, traces):  # noqa: F811
    record = judge_services.do_start_run(JudgeConfig.objects.get(study=study, name=MECHANISTIC), queue=False)
    r = api(owner).post(f"/api/v1/runs/{record.run_id}/retry/")
    assert r.status_code == 400 and "still queued" in r.json()["detail"]


def test_concurrency_caps_the_run_below_the_models_setting(study, owner, scanner):  # noqa: F811
    r = api(owner).post(f"/api/v1/studies/{study.pk}/runs/", {"kind": "scanner", "scanner": scanner.name,
                                                                 "concurrency": 1}, format="json")
    assert r.status_code == 202, r.content
    run = Run.objects.get(pk=r.json()["run"])
    assert run.config["max_concurrency"] == 1 and scanner.judge.concurrency == 2
    assert RunControl(run, chunk_id=0, holder="test").concurrency == 1  # what the pool takes (runs.transport)
    assert client_for("scanner").chunk_size(run) >= 1
    assert api(owner).post(f"/api/v1/studies/{study.pk}/runs/", {"kind": "scanner", "scanner": scanner.name,
                                                                 "concurrency": 65}, format="json").status_code == 400


def test_the_judge_page_refuses_an_absurd_budget_beside_its_label_not_with_a_500(study, owner, traces):  # noqa: F811
    judge = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    r = web(owner).post(f"/judges/{judge.pk}/run/", {"traces": "all", "budget_usd": "1e9"})
    assert r.status_code == 302 and r["Location"] == f"/judges/{judge.pk}/"
    said = [str(m) for m in get_messages(r.wsgi_request)]
    assert said == ["Not started: Budget (USD): Ensure this value is less than or equal to 100000.0."]
    assert not JudgeRun.objects.exists()
    ok = web(owner).post(f"/judges/{judge.pk}/run/", {"traces": "all", "budget_usd": "1"})
    assert ok.status_code == 302 and ok["Location"] == f"/judge-runs/{JudgeRun.objects.get().pk}/"


def test_the_scanner_page_refuses_an_unknown_cohort_instead_of_scanning_the_study(scanner, owner):  # noqa: F811
    r = web(owner).post(f"/scanners/{scanner.pk}/run/", {"cohort": "999"})
    assert r.status_code == 302 and r["Location"] == scanner.get_absolute_url()
    assert [str(m) for m in get_messages(r.wsgi_request)][0].startswith("Not started: Cohort: ")
    assert not ScannerRun.objects.exists()


def test_the_cohort_page_starts_a_judge_run_over_its_traces(study, owner, traces):  # noqa: F811
    from annotation.models import Membership
    from search.services import do_save_cohort

    cohort = do_save_cohort(study, Membership.objects.get(study=study, user=owner), name="m1 only",
                            data={"model": "m1"})
    r = web(owner).post(f"/cohorts/{cohort.pk}/judge/", {"judge": MECHANISTIC})
    assert r.status_code == 302, r.content
    record = JudgeRun.objects.get()
    assert sorted(record.filters["trace_ids"]) == ["t1", "t2"] and kinds.name_of(record.run) == "judge"


def test_the_list_costs_the_same_queries_whatever_the_runs(ran, study, member, owner, scanner,  # noqa: F811
                                                           django_capture_on_commit_callbacks):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    url = f"/api/v1/studies/{study.pk}/runs/"

    def queries() -> int:
        client = api(member)  # its token is made outside the count
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    few = queries()
    with django_capture_on_commit_callbacks(execute=True):
        for kind, body in (("judge", {"judge": MECHANISTIC, "force": True}), ("scanner", {"scanner": scanner.name})):
            assert api(owner).post(url, {"kind": kind, **body}, format="json").status_code == 202
    assert api(member).get(url).json()["count"] == 4
    assert queries() == few
