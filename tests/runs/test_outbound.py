"""Issue 20, "the server's environment is sent to any URL a user names" and "outbound requests go
anywhere": the key allow-list (REASONAUDIT_MODEL_KEYS), the address policy (REASONAUDIT_MODEL_NETWORKS)
at save time and on every request, URLs without credentials, and short, sanitized server errors."""

from __future__ import annotations

import ipaddress
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from annotation.models import Job
from reasonaudit.env import env_model_keys
from runs import outbound
from runs.transport import Endpoint, FatalRunError, ModelPool, ModelRequest, NoStop
from subjects import services as subject_services
from subjects.models import SubjectModel
from tests.conftest import api
from tests.runs.fake_openai import FakeOpenAI

pytestmark = pytest.mark.django_db
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


@pytest.fixture
def fake():
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def production(settings):
    """The production default: no non-public network allowed."""
    settings.MODEL_NETWORKS = ()
    return settings


def subject_body(base_url: str, **extra) -> dict:
    return {"name": "tiny", "model": "m", "base_url": base_url, "check": False, **extra}


def judge_body(base_url: str, **extra) -> dict:
    return {"name": "j", "model": "m", "base_url": base_url, **extra}


def chat(n: int = 0) -> ModelRequest:
    return ModelRequest(item=n, build=lambda _mode: {"messages": [{"role": "user", "content": "hi"}]})


def run_pool(endpoint: Endpoint) -> list:
    pool = ModelPool(endpoint, "test")
    try:
        return list(pool.run([chat()], NoStop()))
    finally:
        pool.close()


# --------------------------------------------------------------------------
# Keys


@pytest.mark.parametrize("name", ["SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "PATH", "NOT_SET_ANYWHERE_X1"])
def test_a_key_name_off_the_allow_list_is_a_400_that_does_not_say_whether_it_exists(study, owner, fake, name):
    for url, body in ((f"/api/v1/studies/{study.pk}/subject-models/", subject_body(fake.url, api_key_env=name)),
                      (f"/api/v1/studies/{study.pk}/judges/", judge_body(fake.url, api_key_env=name))):
        r = api(owner).post(url, body, format="json")
        assert r.status_code == 400, r.content
        errors = {e["field"]: e["message"] for e in r.json()["errors"]}
        # The same words for a variable that exists (PATH, SECRET_KEY) and one that does not.
        assert errors["api_key_env"] == (f"{name} is not a key name the operator allows (REASONAUDIT_MODEL_KEYS); "
                                         "leave it blank for a server without a key")
    assert fake.count == 0 and not SubjectModel.objects.filter(study=study).exists()


def test_the_apps_own_settings_are_refused_even_when_the_operator_lists_them(settings, monkeypatch):
    monkeypatch.setenv("REASONAUDIT_MODEL_KEYS", "OPENAI_API_KEY=api.openai.com; SECRET_KEY=evil.example")
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY is one of the application's own settings"):
        env_model_keys("REASONAUDIT_MODEL_KEYS")
    monkeypatch.setenv("REASONAUDIT_MODEL_KEYS", "DATABASE_URL=*")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        env_model_keys("REASONAUDIT_MODEL_KEYS")
    monkeypatch.setenv("REASONAUDIT_MODEL_KEYS", "OPENAI_API_KEY=api.openai.com  QWEN=gpu-box,GPU.lab")
    assert env_model_keys("REASONAUDIT_MODEL_KEYS") == {"OPENAI_API_KEY": ("api.openai.com",),
                                                        "QWEN": ("gpu-box", "gpu.lab")}
    # A setting changed behind the parser's back still never sends the app's own secrets.
    settings.MODEL_KEYS = {"SECRET_KEY": ("*",)}
    with pytest.raises(outbound.OutboundRefused):
        outbound.api_key_for("http://127.0.0.1:9/v1", "SECRET_KEY")


def test_an_allowed_key_goes_only_to_its_hosts(study, owner, fake, settings, monkeypatch):
    settings.MODEL_KEYS = {"LAB_KEY": ("localhost",)}
    monkeypatch.setenv("LAB_KEY", "lab-secret")
    r = api(owner).post(f"/api/v1/studies/{study.pk}/subject-models/",
                        subject_body(fake.url, api_key_env="LAB_KEY"), format="json")
    assert r.status_code == 400
    assert "only for localhost, not for 127.0.0.1" in r.json()["errors"][0]["message"]
    localhost = fake.url.replace("127.0.0.1", "localhost")
    r = api(owner).post(f"/api/v1/studies/{study.pk}/subject-models/",
                        subject_body(localhost, api_key_env="LAB_KEY"), format="json")
    assert r.status_code == 201, r.content
    outcomes = run_pool(Endpoint(localhost, "m", api_key_env="LAB_KEY"))
    assert outcomes[0].status == "ok" and fake.requests[-1].authorization == "Bearer lab-secret"


def test_a_blank_key_sends_no_key_at_all_not_openai_api_key(fake, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "operator-openai-key")
    outcomes = run_pool(Endpoint(fake.url, "m"))
    assert outcomes[0].status == "ok"
    assert "operator-openai-key" not in fake.requests[-1].authorization


def test_a_stored_configuration_off_the_list_never_sends_the_variable(fake, monkeypatch):
    # A row saved before the allow-list existed (or written around it): the transport refuses it too.
    monkeypatch.setenv("SOMETHING_SECRET", "s3cret")
    with pytest.raises(FatalRunError, match="not a key name the operator allows"):
        ModelPool(Endpoint(fake.url, "m", api_key_env="SOMETHING_SECRET"), "test")
    with pytest.raises(FatalRunError, match="not a key name"):
        ModelPool(Endpoint(fake.url, "m", api_key_env="SECRET_KEY"), "test")
    assert fake.count == 0


def test_the_cli_refuses_a_key_off_the_list(study):
    with pytest.raises(CommandError, match="api_key_env: DATABASE_URL is not a key name"):
        call_command("add_model", "--study", study.name, "--name", "x", "--base-url", "http://127.0.0.1:9/v1",
                     "--model", "m", "--api-key-env", "DATABASE_URL", "--no-check")
    with pytest.raises(CommandError, match="api_key_env: DATABASE_URL is not a key name"):
        call_command("add_judge", "--study", study.name, "--name", "x", "--base-url", "http://127.0.0.1:9/v1",
                     "--model", "m", "--api-key-env", "DATABASE_URL")


def test_the_web_form_refuses_a_key_off_the_list(client, study, owner):
    client.force_login(owner)
    r = client.post(f"/studies/{study.pk}/judges/new/", {
        "name": "j", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "SECRET_KEY",
        "temperature": 0, "mode": "skeleton", "output_mode": "auto", "concurrency": 1, "max_retries": 1,
        "timeout_seconds": 10, "price_input_per_mtok": 0, "price_output_per_mtok": 0})
    assert r.status_code == 400
    assert b"SECRET_KEY is not a key name the operator allows" in r.content


# --------------------------------------------------------------------------
# Addresses


@pytest.mark.parametrize("base_url", [
    "http://127.0.0.1:1/v1", "http://169.254.169.254/latest", "http://[::1]:5432/v1", "http://localhost:8000/admin/",
    "http://10.0.0.5:8000/v1", "http://[::ffff:127.0.0.1]:8000/v1", "http://0.0.0.0:8000/v1",
])
def test_production_refuses_loopback_private_and_link_local_at_save_time(study, owner, production, base_url):
    for url, body in ((f"/api/v1/studies/{study.pk}/subject-models/", subject_body(base_url)),
                      (f"/api/v1/studies/{study.pk}/judges/", judge_body(base_url))):
        r = api(owner).post(url, body, format="json")
        assert r.status_code == 400, r.content
        message = {e["field"]: e["message"] for e in r.json()["errors"]}["base_url"]
        assert "address policy" in message and "REASONAUDIT_MODEL_NETWORKS" in message


def test_a_listed_network_is_allowed(study, owner, production, fake):
    production.MODEL_NETWORKS = (ipaddress.ip_network("127.0.0.1/32"),)
    r = api(owner).post(f"/api/v1/studies/{study.pk}/subject-models/", subject_body(fake.url), format="json")
    assert r.status_code == 201, r.content


def test_the_reachability_check_never_tells_open_from_closed_ports(study, owner, production, fake):
    # Production: the web process does not even connect to loopback.
    r = api(owner).post(f"/api/v1/studies/{study.pk}/subject-models/", {**subject_body(fake.url), "check": True},
                        format="json")
    assert r.status_code == 400 and fake.gets == []
    assert "address policy" in r.content.decode()
    # Allowed networks: one message whatever went wrong, without the connection error.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    production.MODEL_NETWORKS = LOOPBACK
    with pytest.raises(subject_services.Unreachable) as caught:
        subject_services.check_reachable(closed, timeout=2)
    assert "refused" not in str(caught.value).lower() and "Errno" not in str(caught.value)


def test_a_name_that_resolves_elsewhere_at_request_time_is_refused_and_not_called(fake, production, monkeypatch):
    """DNS rebinding: public at save time, loopback when the worker calls. The request-time check sees
    the new address, and the connection would go to the address that was checked in any case."""
    port = int(fake.url.rsplit(":", 1)[1].split("/")[0])
    answers = {"rebind.example": "93.184.216.34"}

    def getaddrinfo(host, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers.get(host, host), port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    url = f"http://rebind.example:{port}/v1"
    outbound.check_endpoint(url, "")  # save time: a public address
    pool = ModelPool(Endpoint(url, "m", max_retries=0), "test")  # so is the start of the run
    answers["rebind.example"] = "127.0.0.1"
    outcomes = None
    with pytest.raises(FatalRunError, match="address policy"):
        outcomes = list(pool.run([chat()], NoStop()))
    assert outcomes is None and fake.count == 0
    answers["rebind.example"] = "127.0.0.1"
    with pytest.raises(FatalRunError, match="address policy"):
        ModelPool(Endpoint(url, "m"), "test")  # a run started now is refused before any request


def test_an_allowed_name_is_connected_at_the_address_that_was_checked(fake, monkeypatch):
    # A name with two answers: the connection goes to the first checked address, with the name in Host.
    seen = []

    def getaddrinfo(host, port, *args, **kwargs):
        seen.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    port = fake.url.rsplit(":", 1)[1].split("/")[0]
    outcomes = run_pool(Endpoint(f"http://model-box.internal:{port}/v1", "m"))
    assert outcomes[0].status == "ok" and "model-box.internal" in seen and fake.count == 1


# --------------------------------------------------------------------------
# URLs and server messages


@pytest.mark.parametrize("base_url, what", [
    ("http://user:token@127.0.0.1:8080/v1", "user name or password"),
    ("http://127.0.0.1:8080/v1?api-key=abc", "api-key"),
    ("https://host.example/openai?sig=xyz&x=1", "sig"),
])
def test_credentials_inside_the_base_url_are_refused(study, owner, base_url, what):
    r = api(owner).post(f"/api/v1/studies/{study.pk}/subject-models/", subject_body(base_url), format="json")
    assert r.status_code == 400
    message = {e["field"]: e["message"] for e in r.json()["errors"]}["base_url"]
    assert what in message and "abc" not in message and "token@" not in message


def test_urls_are_shown_without_userinfo_or_secret_parameters():
    assert outbound.redact_url("http://u:p@h:8080/v1?api-key=abc&model=x") == "http://h:8080/v1?api-key=REDACTED&model=x"
    assert outbound.redact_url("https://[::1]/v1?token=t") == "https://[::1]/v1?token=REDACTED"


def test_server_error_bodies_are_truncated_and_sanitized():
    text = "bad\x00\x1b[31m " + "http://u:pw@h/v1?key=k " + "x" * 5000
    shown = outbound.server_message(text)
    assert len(shown) <= outbound.SERVER_MESSAGE_CHARS + 3
    assert "\x00" not in shown and "\x1b" not in shown and "pw@" not in shown and "key=k" not in shown


# --------------------------------------------------------------------------
# A server that answers HTML with 200


class HtmlServer:
    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _html(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                data = b"<html><body>It works!</body></html>"
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _html

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_probe_of_a_server_that_answers_html_ends_failed(study, owner, django_capture_on_commit_callbacks,
                                                          settings):
    settings.RUN_RETRY_BASE_SECONDS = settings.RUN_RETRY_MAX_SECONDS = 0.01
    html = HtmlServer()
    try:
        subject, _ = subject_services.do_save_subject(study, {"name": "web", "base_url": html.url, "model": "m",
                                                              "max_retries": 0})
        with django_capture_on_commit_callbacks(execute=True):
            r = api(owner).post(f"/api/v1/subject-models/{subject.pk}/probe/")
        job = Job.objects.get(pk=r.json()["id"])
        assert job.status in (Job.Status.FAILED, Job.Status.SUCCEEDED), job.status
        assert job.finished_at is not None
        outcomes = run_pool(Endpoint(html.url, "m", max_retries=0))
        assert outcomes[0].status == "failed" and "not a completion" in outcomes[0].reason
    finally:
        html.stop()


def test_delete_ends_a_running_probe_job(study, owner):
    subject, _ = subject_services.do_save_subject(study, {"name": "p", "base_url": "http://127.0.0.1:9/v1",
                                                          "model": "m"})
    job = Job.objects.create(study=study, kind=subject_services.PROBE_JOB_KIND, status=Job.Status.RUNNING,
                             params={"subject_model_id": subject.pk})
    r = api(owner).delete(f"/api/v1/jobs/{job.pk}/")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    # The probe ending afterwards leaves the cancel alone; a new probe may start.
    from annotation import jobs

    jobs.finish(job.pk, status=Job.Status.FAILED, error="late", if_running=True)
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    assert subject_services.active_probe(subject) is None


def test_pages_and_run_configs_show_urls_without_credentials(client, study, member, fake):
    # A row saved before the refusal existed (written around the services here).
    secret_url = fake.url.replace("http://", "http://user:hunter2@") + "?api-key=sekrit"
    subject, _ = subject_services.do_save_subject(study, {"name": "old", "base_url": fake.url, "model": "m"})
    SubjectModel.objects.filter(pk=subject.pk).update(base_url=secret_url)
    subject.refresh_from_db()
    client.force_login(member)
    for url in (f"/subject-models/{subject.pk}/", f"/studies/{study.pk}/subject-models/"):
        page = client.get(url).content.decode()
        assert "hunter2" not in page and "sekrit" not in page and "api-key=REDACTED" in page
    assert "hunter2" not in str(subject_services.config_snapshot(subject))
    # And it never runs: the transport refuses the stored credentials.
    with pytest.raises(FatalRunError, match="user name or password"):
        ModelPool(Endpoint(secret_url, "m"), "test")

