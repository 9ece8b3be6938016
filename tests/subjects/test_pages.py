"""The web pages: the study's subject models with the model table, the form,
starting a run and its page with live progress and cancel."""

from __future__ import annotations

import pytest
from django.test import Client

from annotation.models import Job
from subjects import services
from subjects.models import GenerationRun, SubjectModel
from tests.subjects.conftest import generate

pytestmark = pytest.mark.django_db


def web(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_owner_creates_and_edits_with_the_form(study, owner, member, server):
    form = {"name": "tiny", "model": "m", "base_url": server.url, "api": "chat", "temperature": "0.3",
            "max_tokens": "128", "stop": "[]", "n_samples": "2", "concurrency": "2", "timeout_seconds": "30",
            "max_retries": "1", "price_input_per_mtok": "0", "price_output_per_mtok": "0", "check_server": "on"}
    assert web(member).get(f"/studies/{study.pk}/subject-models/new/").status_code == 403
    page = web(owner).get(f"/studies/{study.pk}/subject-models/new/")
    assert page.status_code == 200 and "gsm8k-8shot-cot v1" in page.content.decode()
    form["prompt_template"] = services.find_template(study, "zero-shot").pk
    r = web(owner).post(f"/studies/{study.pk}/subject-models/new/", form)
    assert r.status_code == 302, r.content.decode()[:2000]
    tiny = SubjectModel.objects.get(name="tiny")
    assert (tiny.temperature, tiny.n_samples, tiny.version) == (0.3, 2, 1)
    # The check is a probe job for a worker; the request that saved contacted nobody (issue 29, L4).
    assert server.gets == [] and server.count == 0
    assert list(Job.objects.filter(kind="probe").values_list("params__subject_model_id", flat=True)) == [tiny.pk]
    r = web(owner).post(f"/subject-models/{tiny.pk}/edit/", {**form, "temperature": "0.9", "check_server": ""})
    assert r.status_code == 302
    tiny.refresh_from_db()
    assert tiny.version == 2 and Job.objects.filter(kind="probe").count() == 1


def test_the_list_shows_generated_next_to_imported_models(study, member, make_problems, subject, server, do_import):
    from tests.conftest import jsonl

    make_problems(2)
    do_import(jsonl({"kind": "trace", "problem_id": "p0", "model": "imported-m", "raw": "2 + 3 = 5\nThe answer is 5."}))
    server.wrong_odd_seeds = True
    generate(subject(n_samples=2, seed=0, temperature=1.0))
    html = web(member).get(f"/studies/{study.pk}/subject-models/").content.decode()
    assert "imported-m" in html and "generated, v1" in html
    assert "0.500" in html and "1.000" in html  # accuracy 2/4; pass@2 = 1 on both problems
    assert "New subject model" not in html  # owners only


def test_start_a_run_follow_it_and_cancel(study, owner, member, make_problems, subject, server):
    make_problems(1)
    tiny = subject()
    assert web(member).post(f"/subject-models/{tiny.pk}/generate/", {"problems": "all"}).status_code == 403
    record = services.do_start_generation(tiny, queue=False, user=owner)
    page = web(owner).get(f"/generation-runs/{record.pk}/")
    html = page.content.decode()
    assert page.status_code == 200 and 'hx-get="/generation-runs/' in html and "Cancel" in html
    assert "Cancel" not in web(member).get(f"/generation-runs/{record.pk}/").content.decode()
    partial = web(owner).get(f"/generation-runs/{record.pk}/", HTTP_HX_REQUEST="true")
    assert partial.content.decode().lstrip().startswith('<section class="card" id="run-stats"')
    r = web(owner).post(f"/jobs/{record.job_id}/")
    assert r.status_code == 200 and Job.objects.get(pk=record.job_id).status == Job.Status.CANCELLED
    # a new run from the list page's form lands on its page
    r = web(owner).post(f"/subject-models/{tiny.pk}/generate/", {"problems": "all", "samples": "2"})
    newest = GenerationRun.objects.order_by("-pk").first()
    assert r.status_code == 302 and r["Location"] == f"/generation-runs/{newest.pk}/" and newest.samples == 2


def test_the_form_has_human_labels_and_takes_stop_sequences_one_per_line(study, owner, server):
    page = web(owner).get(f"/studies/{study.pk}/subject-models/new/").content.decode()
    for label in (">API<", ">Base URL<", ">EOS token<", ">Stop sequences<", ">API key variable<"):
        assert label in page
    assert ">Api<" not in page and ">Base url<" not in page and ">Eos token<" not in page
    form = {"name": "lines", "model": "m", "base_url": server.url, "api": "chat", "temperature": "0",
            "max_tokens": "64", "stop": "Question:\r\n\\n\\nA:\r\n", "n_samples": "1", "concurrency": "1",
            "timeout_seconds": "30", "max_retries": "0", "price_input_per_mtok": "0", "price_output_per_mtok": "0",
            "prompt_template": services.find_template(study, "zero-shot").pk}
    r = web(owner).post(f"/studies/{study.pk}/subject-models/new/", form)
    assert r.status_code == 302, r.content.decode()[:2000]
    made = SubjectModel.objects.get(name="lines")
    assert made.stop == ["Question:", "\n\nA:"]
    # The edit form shows them back one per line, escaped as typed.
    edit = web(owner).get(f"/subject-models/{made.pk}/edit/").content.decode()
    assert "Question:\n\\n\\nA:</textarea>" in edit


def test_five_stop_sequences_are_an_inline_error_on_the_field(study, owner, server):
    form = {"name": "many", "model": "m", "base_url": server.url, "api": "chat", "temperature": "0",
            "max_tokens": "64", "stop": "a\nb\nc\nd\ne", "n_samples": "1", "concurrency": "1",
            "timeout_seconds": "30", "max_retries": "0", "price_input_per_mtok": "0", "price_output_per_mtok": "0",
            "prompt_template": services.find_template(study, "zero-shot").pk}
    r = web(owner).post(f"/studies/{study.pk}/subject-models/new/", form)
    assert r.status_code == 400
    html = r.content.decode()
    assert 'id="id_stop_error"' in html and "at most 4 stop sequences (you gave 5)" in html
    assert not SubjectModel.objects.filter(name="many").exists()
