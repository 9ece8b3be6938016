"""REST API of judges and judge runs: who may do what, validation, runs as
202 jobs, cancel through jobs/{id}/, 409 for a second run, query counts."""

from __future__ import annotations

import pytest

from annotation.models import Job, StepLabel
from judges import services
from judges.models import MECHANISTIC, JudgeConfig, PromptVersion
from tests.conftest import api

pytestmark = pytest.mark.django_db


NEW_JUDGE = {"name": "local-qwen", "model": "qwen2.5-7b", "base_url": "http://127.0.0.1:8080/v1", "concurrency": 8,
             "api_key_env": "QWEN_KEY"}


@pytest.fixture
def judge(study):
    judge, _ = services.do_save_judge(study, dict(NEW_JUDGE, name="existing"))
    return judge


def endpoints(study, judge) -> list[tuple[str, str]]:
    return [("get", f"/api/v1/studies/{study.pk}/judges/"), ("post", f"/api/v1/studies/{study.pk}/judges/"),
            ("get", f"/api/v1/judges/{judge.pk}/"), ("patch", f"/api/v1/judges/{judge.pk}/"),
            ("get", f"/api/v1/studies/{study.pk}/judge-runs/"), ("post", f"/api/v1/studies/{study.pk}/judge-runs/")]


def test_anonymous_requests_get_401_and_outsiders_404_everywhere(study, judge, outsider):
    for method, url in endpoints(study, judge):
        assert getattr(api(), method)(url, {}, format="json").status_code == 401, url
        response = getattr(api(outsider), method)(url, {}, format="json")
        assert response.status_code == 404, url
        assert set(response.json()) == {"detail", "errors"}


def test_members_read_but_only_owners_change(study, judge, member, owner):
    assert api(member).get(f"/api/v1/studies/{study.pk}/judges/").status_code == 200
    assert api(member).get(f"/api/v1/judges/{judge.pk}/").status_code == 200
    for method, url in endpoints(study, judge):
        if method != "get":
            response = getattr(api(member), method)(url, {"judge": MECHANISTIC}, format="json")
            assert response.status_code == 403 and "owner" in response.json()["detail"], url


def test_the_owner_creates_a_judge_with_its_first_prompt_version(study, owner):
    response = api(owner).post(f"/api/v1/studies/{study.pk}/judges/", NEW_JUDGE, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["source"] == "judge:local-qwen" and body["provider"] == "llm" and body["version"] == 1
    assert body["prompt_version"] == "1" and body["html_url"].endswith(f"/judges/{body['id']}/")
    assert body["api_key_env"] == "QWEN_KEY" and "api_key" not in body
    judge = JudgeConfig.objects.get(pk=body["id"])
    assert PromptVersion.objects.filter(judge=judge, version="1").exists()


@pytest.mark.parametrize("base_url", ["http://ollama:11434/v1", "https://api.openai.com/v1", "http://[::1]:8000/v1"])
def test_model_servers_on_plain_host_names_are_accepted(study, owner, base_url):
    response = api(owner).post(f"/api/v1/studies/{study.pk}/judges/", {**NEW_JUDGE, "base_url": base_url, "api_key_env": ""}, format="json")
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("change, field", [
    ({"base_url": "ftp://x"}, "base_url"),
    ({"name": "has space"}, "name"),
    ({"name": MECHANISTIC}, "name"),
    ({"concurrency": 0}, "concurrency"),
    ({"temperature": 3}, "temperature"),
    ({"mode": "psychic"}, "mode"),
    ({"prompt_template": "{% for s in steps %}"}, "prompt_template"),
    ({"api_key_env": "not a var"}, "api_key_env"),
])
def test_bad_judge_input_answers_400_naming_the_field(study, owner, change, field):
    response = api(owner).post(f"/api/v1/studies/{study.pk}/judges/", {**NEW_JUDGE, **change}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field


def test_a_change_that_can_change_answers_makes_a_new_version(judge, owner):
    url = f"/api/v1/judges/{judge.pk}/"
    assert api(owner).patch(url, {"concurrency": 2}, format="json").json()["version"] == 1
    body = api(owner).patch(url, {"temperature": 0.7}, format="json").json()
    assert body["version"] == 2 and body["concurrency"] == 2
    body = api(owner).patch(url, {"prompt_template": "Judge {{ n_steps }} steps."}, format="json").json()
    assert body["prompt_version"] == "2" and body["version"] == 2
    assert list(judge.prompts.order_by("pk").values_list("version", flat=True)) == ["1", "2"]
    body = api(owner).patch(url, {"prompt_version": "1"}, format="json").json()  # back to the first prompt
    assert body["prompt_version"] == "1"
    response = api(owner).patch(url, {"prompt_version": "9"}, format="json")
    assert response.status_code == 400 and "no prompt version" in response.json()["detail"]


def test_the_builtin_judge_cannot_be_edited(study, owner):
    mechanistic = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    response = api(owner).patch(f"/api/v1/judges/{mechanistic.pk}/", {"model": "x"}, format="json")
    assert response.status_code == 400


def test_a_judge_run_is_a_202_job_that_runs_after_commit(study, owner, make_traces,
                                                         django_capture_on_commit_callbacks):
    make_traces(4)
    with django_capture_on_commit_callbacks(execute=True):
        response = api(owner).post(f"/api/v1/studies/{study.pk}/judge-runs/",
                                   {"judge": MECHANISTIC, "traces": "all"}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()  # the run, as every start of every kind answers (runs.api)
    assert body["kind"] == "judge" and body["params"]["judge"] == MECHANISTIC and body["html_url"].endswith(
        f"/judge-runs/{body['record']}/")
    job = {"id": body["job"]}
    shown = api(owner).get(f"/api/v1/jobs/{job['id']}/").json()
    assert shown["status"] == "succeeded" and shown["progress"] == {"done": 4, "total": 4, "failed": 0}
    assert StepLabel.objects.filter(kind="judge").count() == 12
    runs = api(owner).get(f"/api/v1/studies/{study.pk}/judge-runs/").json()["results"]
    assert runs[0]["judge"] == MECHANISTIC and runs[0]["labels_created"] == 12 and runs[0]["job"]["id"] == job["id"]
    detail = api(owner).get(f"/api/v1/judge-runs/{runs[0]['id']}/").json()
    assert detail["html_url"].endswith(f"/judge-runs/{runs[0]['id']}/")


def test_a_second_run_of_the_same_judge_answers_409_and_delete_cancels(study, owner, make_traces):
    make_traces(2)
    url = f"/api/v1/studies/{study.pk}/judge-runs/"
    first = api(owner).post(url, {"judge": MECHANISTIC}, format="json").json()  # queued: no commit in this test
    response = api(owner).post(url, {"judge": MECHANISTIC}, format="json")
    assert response.status_code == 409 and "in progress" in response.json()["detail"]
    cancelled = api(owner).delete(f"/api/v1/jobs/{first['job']}/").json()
    assert cancelled["status"] == "cancelled"
    assert api(owner).post(url, {"judge": MECHANISTIC}, format="json").status_code == 202


@pytest.mark.parametrize("body, field", [
    ({"judge": "ghost"}, "judge"),
    ({"judge": MECHANISTIC, "traces": "some"}, "traces"),
    ({"judge": MECHANISTIC, "budget_usd": -1}, "budget_usd"),
])
def test_bad_run_requests_answer_400(study, owner, body, field):
    response = api(owner).post(f"/api/v1/studies/{study.pk}/judge-runs/", body, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == field


def test_the_judge_detail_counts_disagreements(study, owner, do_import):
    from tests.conftest import jsonl

    do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "s", "gold_answer": "7"},
                    {"kind": "trace", "problem_id": "p", "model": "m", "steps": ["3 + 4 = 8"], "answer": "7",
                     "labels": [{"step": 1, "verdict": "valid", "annotator": "ann"}]}))
    mechanistic = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    services.run_inline(services.do_start_run(mechanistic, queue=False))
    assert api(owner).get(f"/api/v1/judges/{mechanistic.pk}/").json()["disagreements"] == 1


def test_list_endpoints_use_a_constant_number_of_queries(study, owner, make_traces, django_assert_max_num_queries):
    make_traces(4)
    for i in range(6):
        services.do_save_judge(study, dict(NEW_JUDGE, name=f"j{i}"))
    mechanistic = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    for _ in range(5):
        services.run_inline(services.do_start_run(mechanistic, queue=False))
    client = api(owner)
    with django_assert_max_num_queries(6):
        assert len(client.get(f"/api/v1/studies/{study.pk}/judges/").json()["results"]) == 7
    with django_assert_max_num_queries(6):
        assert len(client.get(f"/api/v1/studies/{study.pk}/judge-runs/").json()["results"]) == 5
    assert Job.objects.filter(kind="judge").count() == 5
