"""A subject model knows its continuation mode: the probe (service, the
probe_model command in both forms, the page's button, the API) records the
chosen mode and its evidence on the subject model, and an unreachable server
changes nothing. Against the fake OpenAI-compatible server in its
continuation modes (tests/runs/fake_openai.py)."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from annotation.models import Job
from runs.continuation import COMPLETIONS, INSTRUCTED, PREFILL, ModelServer
from subjects import services
from subjects.models import SubjectModel
from tests.runs.fake_openai import FakeOpenAI, Fault
from tests.runs.test_continuation import SMOLLM2, TEMPLATE_FILE
from tests.subjects.test_api import api


@pytest.fixture
def fake():
    servers: list[FakeOpenAI] = []

    def start(**options) -> FakeOpenAI:
        servers.append(FakeOpenAI(**options).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def vllm_like(fake) -> FakeOpenAI:
    """/v1/completions continues a raw prompt; chat continues a final message with continue_final_message."""
    return fake(continue_completions=True, chat_prefill="continue_final_message", served_model="served/smollm2")


def make_subject(study, url: str, name: str = "tiny", **fields) -> SubjectModel:
    subject, _ = services.do_save_subject(study, {"name": name, "model": "subject", "base_url": url,
                                                  "max_retries": 0, **fields})
    return subject


def stopped_url(fake) -> str:
    dead = fake()
    url = dead.url
    dead.stop()
    return url


def web(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# -- the subject model and the service -----------------------------------------------------


@pytest.mark.django_db
def test_a_subject_model_gives_its_server(study):
    subject = make_subject(study, "http://gpu-box:8000/v1", chat_template=SMOLLM2, eos_token="<|im_end|>",
                           api_key_env="KEY", timeout_seconds=90.0, concurrency=6, rate_limit_per_minute=60,
                           price_input_per_mtok=1.5)
    assert subject.server() == ModelServer(
        base_url="http://gpu-box:8000/v1", model="subject", api_key_env="KEY", chat_template=SMOLLM2,
        eos_token="<|im_end|>", timeout_seconds=90.0, probe_timeout_seconds=30.0, max_retries=0, concurrency=6,
        rate_limit_per_minute=60, price_input_per_mtok=1.5)
    assert make_subject(study, "http://x:1/v1", name="quick", timeout_seconds=5.0).server().probe_timeout_seconds == 5.0


@pytest.mark.django_db
def test_the_probe_stores_the_chosen_mode_and_its_evidence(study, fake):
    server = vllm_like(fake)
    subject = make_subject(study, server.url, chat_template=SMOLLM2)
    assert (subject.continuation, subject.probe_result) == ("", {})
    result = services.do_probe_subject_model(subject)
    assert result.chosen == COMPLETIONS and server.count == 3
    stored = SubjectModel.objects.get(pk=subject.pk)
    assert stored.continuation == COMPLETIONS
    probe = stored.probe_result
    assert (probe["chosen"], probe["supported"], probe["model_reported"]) == (
        COMPLETIONS, [COMPLETIONS, PREFILL, INSTRUCTED], "served/smollm2")
    assert [m["mode"] for m in probe["modes"]] == [COMPLETIONS, PREFILL, INSTRUCTED]
    assert probe["modes"][0]["first_tokens"].startswith("0, 11") and probe["config_version"] == 1
    assert probe["probed_at"].startswith(str(stored.updated_at.date()))
    # Without the model's chat template the raw prompt cannot be rendered as the model saw it: prefill.
    plain = make_subject(study, server.url, name="plain")
    services.do_probe_subject_model(plain)
    assert SubjectModel.objects.get(pk=plain.pk).continuation == PREFILL


@pytest.mark.django_db
def test_a_server_that_answers_afresh_gets_instructed(study, fake):
    server = fake(no_completions=True, chat_prefill="ignore")
    subject = make_subject(study, server.url, chat_template=SMOLLM2)
    services.do_probe_subject_model(subject)
    subject.refresh_from_db()
    assert subject.continuation == INSTRUCTED
    assert subject.probe_result["modes"][0]["status"] == 404
    assert "fresh answer" in subject.probe_result["modes"][1]["reason"]


@pytest.mark.django_db
def test_an_unreachable_server_names_the_url_and_changes_nothing(study, fake):
    server = vllm_like(fake)
    subject = make_subject(study, server.url, chat_template=SMOLLM2)
    services.do_probe_subject_model(subject)
    subject.refresh_from_db()
    before = (subject.continuation, subject.probe_result, subject.updated_at)
    server.stop()
    with pytest.raises(services.Unreachable, match=f"no server answers at {server.url}"):
        services.do_probe_subject_model(subject)
    subject.refresh_from_db()
    assert (subject.continuation, subject.probe_result, subject.updated_at) == before


@pytest.mark.django_db
def test_a_refused_key_is_a_probe_failure_and_changes_nothing(study, fake):
    server = vllm_like(fake)
    server.rule(lambda body: True, Fault(status=401, message="invalid api key"))
    subject = make_subject(study, server.url, chat_template=SMOLLM2)
    with pytest.raises(services.ProbeFailed, match=f"the server at {server.url} refused the probe"):
        services.do_probe_subject_model(subject)
    subject.refresh_from_db()
    assert (subject.continuation, subject.probe_result) == ("", {})


@pytest.mark.django_db
def test_another_server_or_template_clears_the_recorded_mode(study, fake):
    server = vllm_like(fake)
    subject = make_subject(study, server.url, chat_template=SMOLLM2)
    services.do_probe_subject_model(subject)
    subject.refresh_from_db()
    # Sampling does not change what the server supports: the mode stays.
    subject, _ = services.do_save_subject(study, {"temperature": 0.7}, subject=subject)
    assert subject.continuation == COMPLETIONS and subject.probe_result["chosen"] == COMPLETIONS
    subject, _ = services.do_save_subject(study, {"chat_template": ""}, subject=subject)
    subject.refresh_from_db()
    assert (subject.continuation, subject.probe_result) == ("", {})
    with pytest.raises(ValueError, match="the chat template does not compile"):
        services.do_save_subject(study, {"chat_template": "{% for m in messages %}"}, subject=subject)


# -- the command -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_probe_model_study_form_records_on_the_subject_model(study, fake, capsys):
    server = fake(no_completions=True, chat_prefill="continue_final_message")
    subject = make_subject(study, server.url)
    call_command("probe_model", "--study", study.name, "--model", "tiny")
    out = capsys.readouterr().out
    assert "prefill      yes  HTTP 200  '0, 11," in out
    assert out.rstrip().endswith(f"recorded on subject model tiny of {study.name!r}: continuation prefill")
    subject.refresh_from_db()
    assert subject.continuation == PREFILL and subject.probe_result["modes"][0]["status"] == 404
    call_command("probe_model", "--study", study.name, "--model", "tiny", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["chosen"] == PREFILL and data["base_url"] == server.url


@pytest.mark.django_db
def test_probe_model_study_form_refuses_bad_input_and_changes_nothing(study, fake):
    url = stopped_url(fake)
    make_subject(study, url)
    with pytest.raises(CommandError, match=f"no server answers at {url}"):
        call_command("probe_model", "--study", study.name, "--model", "tiny")
    assert SubjectModel.objects.get(name="tiny").probe_result == {}
    with pytest.raises(CommandError, match="no subject model named 'nope' in 'Study A' \\(subject models: tiny\\)"):
        call_command("probe_model", "--study", study.name, "--model", "nope")
    with pytest.raises(CommandError, match="no study named 'Nope'"):
        call_command("probe_model", "--study", "Nope", "--model", "tiny")
    with pytest.raises(CommandError, match="--chat-template-file goes with --base-url"):
        call_command("probe_model", "--study", study.name, "--model", "tiny", "--chat-template-file", "x.jinja")
    with pytest.raises(CommandError, match="one of the arguments --study --base-url is required"):
        call_command("probe_model", "--model", "tiny")


@pytest.mark.django_db
def test_add_model_reads_a_chat_template_file(study, fake, tmp_path, capsys):
    server = vllm_like(fake)
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": SMOLLM2, "eos_token": "<|im_end|>"}))
    call_command("add_model", "--study", study.name, "--name", "tiny", "--base-url", server.url, "--model",
                 "subject", "--chat-template-file", str(config))
    assert capsys.readouterr().out.rstrip().endswith("with its chat template")
    tiny = SubjectModel.objects.get(name="tiny")
    assert (tiny.chat_template, tiny.eos_token) == (SMOLLM2, "<|im_end|>")
    call_command("add_model", "--study", study.name, "--name", "jinja", "--base-url", server.url, "--model",
                 "subject", "--chat-template-file", str(TEMPLATE_FILE), "--no-check")
    assert SubjectModel.objects.get(name="jinja").chat_template == SMOLLM2
    call_command("probe_model", "--study", study.name, "--model", "tiny")
    assert SubjectModel.objects.get(name="tiny").continuation == COMPLETIONS
    bad = tmp_path / "broken.jinja"
    bad.write_text("{% if messages %}")
    for path, message in ((bad, "does not compile"), (tmp_path / "none.json", "no such file")):
        with pytest.raises(CommandError, match=message):
            call_command("add_model", "--study", study.name, "--name", "other", "--base-url", server.url,
                         "--model", "subject", "--chat-template-file", str(path))
    assert not SubjectModel.objects.filter(name="other").exists()


# The plain form (moved with the command from runs/): probes any server and records nothing.


@pytest.mark.django_db
def test_probe_model_command_prints_the_evidence_and_the_mode(fake, capsys):
    server = vllm_like(fake)
    call_command("probe_model", "--base-url", server.url, "--model", "subject", "--chat-template-file",
                 str(TEMPLATE_FILE))
    out = capsys.readouterr().out
    assert "subject (the server says served/smollm2) at " + server.url in out
    assert "completions  yes  HTTP 200  '0, 11, 12, 13, 14, 15, 16, 17,'" in out
    assert out.rstrip().endswith("continuation mode: completions")
    assert not SubjectModel.objects.exists()


def test_probe_model_command_json_and_a_tokenizer_config(fake, capsys, tmp_path):
    server = vllm_like(fake)
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": SMOLLM2, "eos_token": "<|im_end|>"}))
    call_command("probe_model", "--base-url", server.url, "--model", "subject", "--chat-template-file", str(config),
                 "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["chosen"] == COMPLETIONS and data["supported"] == [COMPLETIONS, PREFILL, INSTRUCTED]
    assert data["modes"][1] | {"latency_ms": 0} == {
        "mode": PREFILL, "supported": True, "reason": "continued '1, 2, 3, 4, 5, 6, 7, 8, 9, 1' in place",
        "status": 200, "first_tokens": "0, 11, 12, 13, 14, 15, 16, 17,", "latency_ms": 0}
    # Without the template, the command still probes, and completions is not chosen.
    call_command("probe_model", "--base-url", server.url, "--model", "subject", "--json")
    assert json.loads(capsys.readouterr().out)["chosen"] == PREFILL


def test_probe_model_command_fails_on_an_unreachable_url_or_no_mode(fake):
    url = stopped_url(fake)
    with pytest.raises(CommandError, match=f"no server answers at {url}"):
        call_command("probe_model", "--base-url", url, "--model", "subject")
    broken = fake(no_completions=True)
    broken.rule(lambda body: "messages" in body, Fault(status=400, message="bad request"))
    with pytest.raises(CommandError, match="supports no continuation mode"):
        call_command("probe_model", "--base-url", broken.url, "--model", "subject")
    with pytest.raises(CommandError, match="no such file"):
        call_command("probe_model", "--base-url", broken.url, "--model", "subject", "--chat-template-file", "/nope")


# -- the page's button and the API ----------------------------------------------------------


@pytest.mark.django_db
def test_the_probe_button_queues_a_job_owner_only_annotator_403_outsider_404(
        study, owner, member, outsider, fake, django_capture_on_commit_callbacks):
    server = vllm_like(fake)
    subject = make_subject(study, server.url, chat_template=SMOLLM2)
    page = web(member).get(f"/subject-models/{subject.pk}/")
    html = page.content.decode()
    assert page.status_code == 200 and "not probed" in html and "Probe</button>" not in html  # no button for members
    assert web(member).post(f"/subject-models/{subject.pk}/probe/").status_code == 403
    assert web(outsider).post(f"/subject-models/{subject.pk}/probe/").status_code == 404
    assert web(outsider).get(f"/subject-models/{subject.pk}/").status_code == 404
    assert server.count == 0 and not Job.objects.filter(kind="probe").exists()
    assert "Probe</button>" in web(owner).get(f"/subject-models/{subject.pk}/").content.decode()
    # The request only queues the job (no request to the model server inside it) ...
    with django_capture_on_commit_callbacks(execute=False) as queued:
        r = web(owner).post(f"/subject-models/{subject.pk}/probe/")
    assert r.status_code == 302 and r["Location"] == f"/subject-models/{subject.pk}/"
    job = Job.objects.get(kind="probe")
    assert (job.status, job.params["subject_model_id"], job.total, server.count) == ("queued", subject.pk, 3, 0)
    # ... and the page follows it: the card polls itself while the job is not finished, with no button meanwhile.
    card = web(owner).get(f"/subject-models/{subject.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert card.lstrip().startswith('<section class="card" id="continuation"')
    assert 'hx-trigger="every 1s"' in card and "probing</span> in the background" in card
    assert "waiting for a worker" in card and "Probe</button>" not in card
    # A second click while it is queued starts nothing.
    html = web(owner).post(f"/subject-models/{subject.pk}/probe/", follow=True).content.decode()
    assert f"is being probed already (job {job.pk})" in html and Job.objects.filter(kind="probe").count() == 1
    # The worker's task (eager here) probes and records; the polled card shows the result and stops polling.
    for callback in queued:
        callback()
    job.refresh_from_db()
    assert job.status == "succeeded" and job.result["chosen"] == COMPLETIONS and server.count == 3
    card = web(owner).get(f"/subject-models/{subject.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in card and "Probed tiny: continuation mode completions." in card
    assert '<strong id="continuation-mode">completions</strong>' in card
    assert "completions (chosen)" in card and "served/smollm2" in card and "0, 11, 12" in card
    subject.refresh_from_db()
    assert subject.continuation == COMPLETIONS
    # The result stays on the page for every member, and the list names the mode.
    html = web(member).get(f"/subject-models/{subject.pk}/").content.decode()
    assert '<strong id="continuation-mode">completions</strong>' in html and 'id="probe-evidence"' in html
    assert "continued &#x27;1, 2, 3, 4, 5, 6, 7, 8, 9, 1&#x27; in place" in html
    listing = web(member).get(f"/studies/{study.pk}/subject-models/").content.decode()
    assert f'href="/subject-models/{subject.pk}/"' in listing and "<td>completions</td>" in listing


@pytest.mark.django_db
def test_the_button_on_an_unreachable_server_says_so_and_changes_nothing(
        study, owner, fake, django_capture_on_commit_callbacks):
    url = stopped_url(fake)
    subject = make_subject(study, url)
    with django_capture_on_commit_callbacks(execute=True):
        web(owner).post(f"/subject-models/{subject.pk}/probe/")
    job = Job.objects.get(kind="probe")
    assert job.status == "failed" and job.error.startswith(f"nothing recorded: no server answers at {url}")
    html = web(owner).get(f"/subject-models/{subject.pk}/").content.decode()
    assert f"Probe failed, nothing recorded: no server answers at {url}" in html
    assert "Probe</button>" in html  # it can be tried again
    subject.refresh_from_db()
    assert (subject.continuation, subject.probe_result) == ("", {})


@pytest.mark.django_db
def test_a_redelivered_probe_task_does_nothing(study, fake, django_capture_on_commit_callbacks):
    server = vllm_like(fake)
    subject = make_subject(study, server.url, chat_template=SMOLLM2)
    with django_capture_on_commit_callbacks(execute=True):
        job = services.do_start_probe(subject)
    assert Job.objects.get(pk=job.pk).status == "succeeded" and server.count == 3
    services.run_probe_job(job.pk)  # the same task again: the job is finished
    assert server.count == 3


@pytest.mark.django_db
def test_the_api_exposes_the_probe_and_runs_it_for_owners(study, owner, member, outsider, fake,
                                                          django_capture_on_commit_callbacks):
    server = fake(no_completions=True, chat_prefill="continue_final_message")
    subject = make_subject(study, server.url)
    url = f"/api/v1/subject-models/{subject.pk}/"
    data = api(member).get(url).json()
    assert (data["continuation"], data["probe_result"], data["chat_template"]) == ("", {}, "")
    # The probe's fields are read-only; the chat template is the owner's to set.
    r = api(owner).patch(url, {"continuation": "completions", "probe_result": {"chosen": "completions"},
                               "chat_template": SMOLLM2, "check": False}, format="json")
    assert r.status_code == 200
    assert (r.json()["continuation"], r.json()["probe_result"], r.json()["chat_template"]) == ("", {}, SMOLLM2)
    assert api(member).post(f"{url}probe/").status_code == 403
    assert api(outsider).post(f"{url}probe/").status_code == 404
    with django_capture_on_commit_callbacks(execute=False) as queued:
        r = api(owner).post(f"{url}probe/")
    assert r.status_code == 202 and r.json()["kind"] == "probe" and r.json()["status"] == "queued"
    job_url = f"/api/v1/jobs/{r.json()['id']}/"
    assert api(owner).post(f"{url}probe/").status_code == 409  # one at a time
    assert server.count == 0
    for callback in queued:
        callback()
    job = api(member).get(job_url).json()
    assert job["status"] == "succeeded" and job["result"]["chosen"] == PREFILL
    data = api(member).get(url).json()
    assert data["continuation"] == PREFILL and data["probe_result"]["modes"][0]["status"] == 404
    server.stop()
    with django_capture_on_commit_callbacks(execute=True):
        r = api(owner).post(f"{url}probe/")
    assert r.status_code == 202
    job = api(owner).get(f"/api/v1/jobs/{r.json()['id']}/").json()
    assert job["status"] == "failed" and f"no server answers at {server.url}" in job["error"]
    assert api(member).get(url).json()["continuation"] == PREFILL


@pytest.mark.django_db
def test_the_form_sets_the_chat_template_with_the_models_line_ends(study, owner, fake):
    server = vllm_like(fake)
    subject = make_subject(study, server.url)
    form = {"name": "tiny", "model": "subject", "base_url": server.url, "api": "chat", "temperature": "0",
            "max_tokens": "512", "stop": "[]", "n_samples": "1", "concurrency": "2", "timeout_seconds": "30",
            "max_retries": "0", "price_input_per_mtok": "0", "price_output_per_mtok": "0",
            "prompt_template": subject.prompt_template_id, "chat_template": SMOLLM2.replace("\n", "\r\n"),
            "eos_token": "<|im_end|>"}
    r = web(owner).post(f"/subject-models/{subject.pk}/edit/", form)
    assert r.status_code == 302, r.content.decode()[:2000]
    subject.refresh_from_db()
    assert (subject.chat_template, subject.eos_token, subject.version) == (SMOLLM2, "<|im_end|>", 1)
    r = web(owner).post(f"/subject-models/{subject.pk}/edit/", {**form, "chat_template": "{% if x %}"})
    assert r.status_code == 400 and "the chat template does not compile" in r.content.decode()
