"""Every declared kind of run (the registry, runs.kinds -- not a list written here) starts through every door
against the tests' fake model servers: the REST API (202 with one body shape), the ``run`` command (its
exit status) and the runs page (to the job page); each run reaches a terminal status, a finished run is
retried and a queued one cancelled through the API.

A kind gets no parameters from this file: each required parameter takes the first value its form offers
(what an owner who changes nothing would post), so a new kind is covered once the study below holds
something to pick for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.test import Client

from abstraction import services as abstraction_services
from annotation.models import Job, Study
from judges import services as judge_services
from runs import kinds
from runs.models import Run
from runs.serializers import RunDetailSerializer
from search import scanners
from subjects import services as subject_services
from tests.conftest import api
from tests.fidelity.conftest import problem_records
from tests.runs.fake_thinking import FOLLOW, FakeThinking
from tests.runs.test_continuation import SMOLLM2
from tests.search.fake_scanner import FakeScanner
from tests.subjects.conftest import generate

pytestmark = pytest.mark.django_db

TERMINAL = {Job.Status.SUCCEEDED, Job.Status.PARTIAL, Job.Status.FAILED}
BODY = set(RunDetailSerializer.Meta.fields)


@pytest.fixture
def lab(study, owner, do_import, settings) -> Iterator[Study]:
    """Something to pick for every parameter a kind requires: problems with skeletons, the mechanistic judge
    (first in the judge menu) and an LLM judge on a fake scanner server, a scanner, an abstraction benchmark,
    and a reasoning subject model on the fake thinking server, probed, with generated traces."""
    settings.RUN_RETRY_BASE_SECONDS = 0.01
    settings.RUN_RETRY_MAX_SECONDS = 0.05
    thinker = FakeThinking(form="field", behaviour=FOLLOW).start()
    scanner_server = FakeScanner().start()
    try:
        assert do_import(problem_records(3)).committed
        judge_services.ensure_mechanistic(study)
        reasoner, _ = subject_services.do_save_subject(study, {
            "name": "reasoner", "model": "r1-fake", "base_url": thinker.url, "concurrency": 2, "max_retries": 1,
            "timeout_seconds": 5.0, "seed": 0, "chat_template": SMOLLM2, "thinking": "on"})
        subject_services.do_probe_subject_model(reasoner)
        assert generate(reasoner, scope="first:2")[1].status == Job.Status.SUCCEEDED
        judge_services.do_save_judge(study, {"name": "scanjudge", "model": "fake-model", "base_url": scanner_server.url,
                                             "concurrency": 2, "max_retries": 1, "timeout_seconds": 5.0})
        scanners.do_create_scanner(study, name="totals", question='Does the solution say "total"?',
                                   judge_name="scanjudge", user=owner)
        abstraction_services.do_generate_benchmark(study, categories=["EC"], per_sub_dataset=1)
        yield study
    finally:
        thinker.stop()
        scanner_server.stop()


def first_choices(kind: kinds.RunKind, study: Study) -> dict[str, str]:
    """Each required parameter's first value on the kind's form."""
    fields = {f["name"]: f for f in kinds.form_fields(kind, study)}
    data = {}
    for name, f in kinds.input_fields(kind, study).items():
        if f.required:
            choices = [value for value, _ in fields[name].get("choices", []) if value]
            assert choices, f"{kind.name}: the study offers nothing for {name}; give the lab one"
            data[name] = choices[0]
    return data


def ended(run_pk: int) -> Job:
    return Run.objects.select_related("job").get(pk=run_pk).job


@pytest.mark.parametrize("name", [k.name for k in kinds.all_kinds()])
def test_every_kind_starts_through_rest_cli_and_the_page(name, lab, owner, django_capture_on_commit_callbacks):
    kind = kinds.get(name)
    data = first_choices(kind, lab)
    rest = api(owner)

    # REST: 202 with the one body of every kind; the work runs once the request commits (eager Celery).
    with django_capture_on_commit_callbacks(execute=True):
        r = rest.post(f"/api/v1/studies/{lab.pk}/runs/", {"kind": name, **data}, format="json")
    assert r.status_code == 202, r.content
    body = r.json()
    assert set(body) == BODY and body["kind"] == name and body["job"] and body["html_url"].startswith("http")
    shown = rest.get(f"/api/v1/runs/{body['run']}/").json()
    assert shown["status"] == Job.Status.SUCCEEDED and shown["progress"]["done"] == shown["progress"]["total"], shown
    listed = rest.get(f"/api/v1/studies/{lab.pk}/runs/", {"kind": name}).json()["results"]
    assert listed[0]["run"] == body["run"] and {row["kind"] for row in listed} == {name}

    # The command: the same parameters as options, --wait to the end (exit 1 unless it succeeded).
    argv = [a for key, value in data.items() for a in (f"--{key.replace('_', '-')}", value)]
    before = set(Run.objects.values_list("pk", flat=True))
    with django_capture_on_commit_callbacks(execute=True):
        try:
            call_command("run", name, "--study", lab.name, *argv, "--wait")
        except SystemExit as exc:
            assert exc.code == 1
    (cli_run,) = set(Run.objects.values_list("pk", flat=True)) - before
    assert ended(cli_run).status in TERMINAL and kinds.name_of(Run.objects.get(pk=cli_run)) == name

    # The runs page: the form posts the same parameters and leads to the job page.
    web = Client()
    web.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        page = web.post(f"/studies/{lab.pk}/runs/", {"kind": name, **data})
    assert page.status_code == 302, page.content.decode()[:3000]
    job = Job.objects.get(pk=int(page["Location"].rstrip("/").rsplit("/", 1)[1]))
    assert job.status in TERMINAL

    # Retry (every kind): the same configuration again, the same 202 body.
    with django_capture_on_commit_callbacks(execute=True):
        again = rest.post(f"/api/v1/runs/{body['run']}/retry/")
    assert again.status_code == 202, again.content
    assert set(again.json()) == BODY and again.json()["kind"] == name
    assert ended(again.json()["run"]).status in TERMINAL

    # Cancel (every kind): a run queued and never worked (no commit here) ends cancelled at once.
    queued = rest.post(f"/api/v1/studies/{lab.pk}/runs/", {"kind": name, **data, "force": True}, format="json").json()
    assert queued["status"] == Job.Status.QUEUED
    cancelled = rest.post(f"/api/v1/runs/{queued['run']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == Job.Status.CANCELLED
