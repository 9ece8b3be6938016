"""/studies/<id>/runs/: every run of every kind of a study, and any kind started from one form that
validates exactly as the kind's REST endpoint and command do (runs.kinds, runs.params)."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from kombu.exceptions import OperationalError as BrokerError

from annotation import jobs
from annotation.models import Job, Membership, Problem, Study
from annotation.services import do_add_member
from judges import services as judge_services
from judges.models import MECHANISTIC
from runs.models import Run
from runs.version import code_version
from scoring.exports import code_version as export_code_version
from subjects import services
from subjects.models import GenerationRun
from tests.conftest import api, jsonl
from tests.run_fixtures import generation_server, quick_retries_fixture  # noqa: F401 (fixtures)
from tests.runs.fake_openai import Fault
from tests.subjects.conftest import generate, make_problems, subject  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def web(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def world(study, owner, make_problems, subject, do_import):  # noqa: F811 - fixtures imported above
    make_problems(4)
    do_import(jsonl({"kind": "trace", "problem_id": "p0", "model": "m1", "steps": ["2 + 3 = 5"], "answer": "5"}))
    tiny = subject("tiny")
    judge = judge_services.ensure_mechanistic(study)
    return tiny, judge


def test_the_page_lists_every_kind_with_who_started_it(world, study, owner, member):
    tiny, judge = world
    generate(tiny)
    record = judge_services.do_start_run(judge, queue=False, user=owner)
    judge_services.run_inline(record)
    page = web(member).get(f"/studies/{study.pk}/runs/")
    text = page.content.decode()
    assert page.status_code == 200
    assert "Generation" in text and "Judge" in text and "olivia" in text
    assert f"/generation-runs/{GenerationRun.objects.get().pk}/" in text and f"/judge-runs/{record.pk}/" in text
    assert "Start a run" not in text  # an annotator cannot start runs
    assert "Start a run" in web(owner).get(f"/studies/{study.pk}/runs/").content.decode()


def test_outsiders_get_404_and_blind_annotators_see_the_list(world, study, owner, outsider, django_user_model):
    assert web(outsider).get(f"/studies/{study.pk}/runs/").status_code == 404
    assert web(outsider).post(f"/studies/{study.pk}/runs/", {"kind": "generation"}).status_code == 404
    blind = Study.objects.create(name="Blind", blind=True)
    reader = django_user_model.objects.create_user("bea", password="pw")
    do_add_member(blind, reader.username, Membership.Role.ANNOTATOR)
    assert web(reader).get(f"/studies/{blind.pk}/runs/").status_code == 200
    assert web(reader).post(f"/studies/{blind.pk}/runs/", {"kind": "generation"}).status_code == 403


def test_every_kind_has_a_form_on_the_page(world, study, owner):
    from runs import kinds

    for kind in kinds.all_kinds():
        page = web(owner).get(f"/studies/{study.pk}/runs/?kind={kind.name}")
        assert page.status_code == 200 and f'name="kind" value="{kind.name}"' in page.content.decode(), kind.name
    # The probe is not a run (a few requests outside the engine): the subject model's page starts it.
    assert 'value="probe"' not in web(owner).get(f"/studies/{study.pk}/runs/").content.decode()


def test_the_page_opens_on_the_judge_with_the_built_in_verifier_first(world, study, owner):
    """Issue 31: it opened on generation with an empty, required subject-model menu, and the judge menu on the
    first name alphabetically (a paid LLM judge)."""
    import re

    from judges.models import JudgeConfig
    from judges.services import ensure_mechanistic

    ensure_mechanistic(study)
    JudgeConfig.objects.get_or_create(study=study, name="a-paid-judge", defaults={"provider": "fake"})
    page = web(owner).get(f"/studies/{study.pk}/runs/").content.decode()
    assert 'name="kind" value="judge"' in page
    options = re.findall(r'<option value="([^"]*)"', page.split('name="judge"', 1)[1].split("</select>", 1)[0])
    assert options[0] == "mechanistic" and "a-paid-judge" in options


def test_a_generation_run_starts_from_the_page_with_a_problem_filter(world, study, owner):
    r = web(owner).post(f"/studies/{study.pk}/runs/", {"kind": "generation", "model": "tiny", "problems": "first:2",
                                                       "samples": "1"})
    assert r.status_code == 302, r.content.decode()[:2000]
    record = GenerationRun.objects.get()
    assert r["Location"] == f"/jobs/{record.job_id}/"
    assert record.problem_filter == "first:2" and record.job.total == 2
    assert record.job.created_by == owner


@pytest.mark.parametrize(("data", "field", "label"), [
    ({"samples": "101"}, "samples", "Samples per problem (K)"),
    ({"budget_usd": "1e9"}, "budget_usd", "Budget (USD)"),
    ({"problems": "first:x"}, "problems", "Problems"),
    ({"model": "nobody"}, "model", "Subject model"),
])
def test_bad_parameters_answer_400_naming_the_field_on_web_and_rest_alike(world, study, owner, data, field, label):
    body = {"model": "tiny", **data}
    page = web(owner).post(f"/studies/{study.pk}/runs/", {"kind": "generation", **body})
    html = page.content.decode()
    # The page names the field as its form does, once, beside its input; the API by its name.
    assert page.status_code == 400 and html.count(f'id="run-{field}-error">{label}: ') == 1, html
    assert html.count('role="alert"') == 1
    assert f'aria-describedby="run-{field}-help run-{field}-error" aria-invalid="true"' in html
    rest = api(owner).post(f"/api/v1/studies/{study.pk}/generation-runs/", body, format="json")
    assert rest.status_code == 400 and rest.json()["detail"].startswith(f"{field}:")
    assert not GenerationRun.objects.exists()


def test_every_parameter_of_every_kind_has_a_human_label_and_help(world, study):
    from runs import kinds

    # Every kind a researcher starts, early answering and scanners included.
    assert {s.name for s in kinds.all_kinds()} >= {"generation", "judge", "fidelity", "abstraction", "interventions",
                                                   "anytime", "early_answering", "scanner"}
    for st in kinds.all_kinds():
        for f in kinds.form_fields(st, study):
            where = f"{st.name}.{f['name']}"
            # DRF's label from the name ("Budget usd", "Per trace") is what a multi-word name must not show.
            assert "_" not in f["name"] or f["label"] != f["name"].replace("_", " ").capitalize(), where
            assert f["help"] and not re.search(r"\d\.\.\d", f["help"]), where  # words, not "0..100000"
            if f["type"] == "select":
                assert all(text for value, text in f["choices"] if value), where


def test_the_form_offers_the_studys_cohorts_by_name_and_lists_as_the_cli_writes_them(world, study, owner):
    from search.models import Cohort

    cohort = Cohort.objects.create(study=study, name="long ones", query={}, n_traces=0)
    html = web(owner).get(f"/studies/{study.pk}/runs/?kind=interventions").content.decode()
    assert f'<option value="{cohort.pk}">long ones (0 traces)</option>' in html
    assert 'value="value_flip,step_ablation,paraphrase,tool_result"' in html and "(&#x27;value_flip" not in html


def test_the_cli_refuses_what_the_web_and_rest_refuse(world, study):
    with pytest.raises(CommandError, match=r"--samples: Ensure this value is less than or equal to 100\."):
        call_command("generate", "--study", study.name, "--model", "tiny", "--samples", "101")
    with pytest.raises(CommandError, match="first:N needs a positive N"):
        call_command("generate", "--study", study.name, "--model", "tiny", "--problems", "first:x")


def test_an_unknown_kind_is_a_400_naming_kind(world, study, owner):
    page = web(owner).post(f"/studies/{study.pk}/runs/", {"kind": "astrology"})
    assert page.status_code == 400 and "kind:" in page.content.decode()


def test_a_conflict_is_409_on_the_api_and_the_page_alike(world, study, owner):
    tiny, judge = world
    services.do_start_generation(tiny, queue=False)  # queued, never worked: in progress
    rest = api(owner).post(f"/api/v1/studies/{study.pk}/generation-runs/", {"model": "tiny"}, format="json")
    assert rest.status_code == 409 and "already has run" in rest.json()["detail"]
    page = web(owner).post(f"/studies/{study.pk}/runs/", {"kind": "generation", "model": "tiny"})
    assert page.status_code == 409 and "already has run" in page.content.decode()
    # A form posted from a page goes back there with the message.
    back = web(owner).post(f"/subject-models/{tiny.pk}/generate/", {"problems": "all"},
                           HTTP_REFERER=f"http://testserver/subject-models/{tiny.pk}/")
    assert back.status_code == 302 and back["Location"] == f"http://testserver/subject-models/{tiny.pk}/"
    assert GenerationRun.objects.count() == 1


@pytest.mark.django_db(transaction=True)  # real commits: the queueing happens inside the request
@pytest.mark.parametrize("kind", ["generation", "judge"])
def test_with_the_broker_down_every_kind_ends_its_job_failed(world, study, owner, kind, monkeypatch):
    def down(*args, **kwargs):
        raise BrokerError("connection refused")

    monkeypatch.setattr(jobs, "queue_task", down)
    body = {"generation": {"model": "tiny"}, "judge": {"judge": MECHANISTIC}}[kind]
    page = web(owner).post(f"/studies/{study.pk}/runs/", {"kind": kind, **body})
    assert page.status_code == 503 and "task queue is not reachable" in page.content.decode()
    job = Job.objects.get()
    assert job.status == Job.Status.FAILED and job.error == jobs.BROKER_DOWN


def test_cancel_and_retry_from_the_page(world, study, owner, member, server):
    tiny, judge = world
    record = services.do_start_generation(tiny, queue=False, user=owner)
    assert web(member).post(f"/studies/{study.pk}/runs/{record.run_id}/cancel/").status_code == 403
    assert web(owner).post(f"/studies/{study.pk}/runs/{record.run_id}/cancel/").status_code == 302
    record.job.refresh_from_db()
    assert record.job.status == Job.Status.CANCELLED
    # A run with failures: one problem the fake server cannot answer.
    server.rule(lambda body: "Ann has 2 apples" in json.dumps(body), Fault(status=400, message="refused"))
    failed, job = generate(tiny)
    assert job.failed == 1
    server.rules.clear()
    assert "Retry failed items" in web(owner).get(f"/studies/{study.pk}/runs/").content.decode()
    r = web(owner).post(f"/studies/{study.pk}/runs/{failed.run_id}/retry/")
    assert r.status_code == 302
    again = GenerationRun.objects.exclude(pk__in=[record.pk, failed.pk]).get()
    assert again.scope == GenerationRun.Scope.MISSING and again.job.total == 1



def test_a_refused_retry_is_said_on_the_runs_page_or_the_error_page(world, study, owner):
    """The refusal family on the web (annotation.middleware): from the runs page (its Referer) a flash
    there, without one the styled error page; 400 either way, never a 500."""
    tiny, _judge = world
    active = services.do_start_generation(tiny, queue=False, user=owner)  # queued: still active
    url = f"/studies/{study.pk}/runs/{active.run_id}/retry/"
    r = web(owner).post(url)
    assert r.status_code == 400 and f"run {active.run_id} has nothing to retry" in r.content.decode()
    runs_page = f"http://testserver/studies/{study.pk}/runs/"
    client = web(owner)
    r = client.post(url, headers={"referer": runs_page})
    assert r.status_code == 302 and r.url == runs_page
    assert f"run {active.run_id} has nothing to retry" in client.get(r.url).content.decode()


def test_the_job_page_links_to_the_kind_page_of_its_run(world, study, owner):
    tiny, judge = world
    record, _ = generate(tiny)
    page = web(owner).get(f"/jobs/{record.job_id}/").content.decode()
    assert f"/generation-runs/{record.pk}/" in page


def test_abstraction_has_a_rest_endpoint(world, study, owner, member):
    url = f"/api/v1/studies/{study.pk}/abstraction/runs/"
    assert api(member).get(url).json() == []
    assert api(member).post(url, {"model": "tiny", "benchmark": "b"}, format="json").status_code == 403
    r = api(owner).post(url, {"model": "tiny", "benchmark": "nope"}, format="json")
    assert r.status_code == 400 and r.json()["detail"].startswith("benchmark:")


def test_one_code_version_for_regimes_and_manifests(world):
    tiny, _ = world
    record, _ = generate(tiny)
    trace = record.subject.study.traces.exclude(model="m1").first()
    assert export_code_version is code_version
    assert trace.regime["code_version"] == code_version() and code_version().startswith("reasonaudit ")
    assert Problem.objects.count() == 4
    assert Run.objects.get(pk=record.run_id).kind == "generation"


def test_force_on_an_unchanged_subject_model_means_new_samples(world, study):
    tiny, _ = world
    first, _ = generate(tiny, samples=2)
    assert first.traces_created == 8
    again, job = generate(tiny, samples=2, force=True)
    # Every request sent is kept: two new samples per problem, with new seeds and new trace ids.
    assert job.status == Job.Status.SUCCEEDED and again.run.requests == 8
    assert (again.traces_created, again.traces_unchanged) == (8, 0)
    samples = sorted(set(tiny.generations.filter(run=again).values_list("sample", flat=True)))
    assert samples == [2, 3]
    assert tiny.study.traces.filter(trace_id__endswith="/s3").count() == 4


def test_the_page_costs_the_same_queries_whatever_the_runs(world, study, owner):
    tiny, judge = world
    client = web(owner)

    def queries() -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as ctx:
            assert client.get(f"/studies/{study.pk}/runs/").status_code == 200
        return len(ctx.captured_queries)

    generate(tiny)
    few = queries()
    for _ in range(4):
        generate(tiny)
        judge_services.run_inline(judge_services.do_start_run(judge, queue=False, user=owner))
    assert queries() == few


def test_a_judge_run_from_the_page_leaves_unset_filters_unset(world, study, owner):
    tiny, judge = world
    page = web(owner).get(f"/studies/{study.pk}/runs/?kind=judge").content.decode()
    assert '<select id="run-answer_correct" name="answer_correct" aria-describedby="run-answer_correct-help">' in page  # any / yes / no, not a checkbox
    r = web(owner).post(f"/studies/{study.pk}/runs/", {"kind": "judge", "judge": MECHANISTIC, "traces": "all",
                                                       "answer_correct": ""})
    assert r.status_code == 302
    job = Job.objects.get(kind="judge")
    assert job.total == 1 and "answer_correct" not in job.params["filters"]
