"""Issue 29, L4: the outbound policy by construction. Credentials are refused wherever a URL can hold
them (query, path parameters, tokens in the path) and redacted wherever one is shown; IPv6 addresses
that embed an IPv4 address (IPv4-compatible, NAT64, 6to4, Teredo) are judged as that address; and
saving a model contacts no server, so its time tells nothing about ports."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from annotation.models import Job
from runs import outbound
from subjects.models import SubjectModel
from tests.conftest import api

pytestmark = pytest.mark.django_db


def errors(response) -> dict[str, str]:
    return {e["field"]: e["message"] for e in response.json()["errors"]}


@pytest.mark.parametrize("base_url, reason", [
    ("http://127.0.0.1:8000/v1?pwd=hunter2", "query parameter 'pwd'"),
    ("http://127.0.0.1:8000/v1?bearer=abc", "query parameter 'bearer'"),
    ("http://127.0.0.1:8000/v1?Passphrase=abc", "query parameter 'Passphrase'"),
    ("http://127.0.0.1:8000/v1;api_key=abc", "a parameter in the path ('api_key')"),
    ("http://127.0.0.1:8000/v1/%3Btoken%3Dabc/x", "a parameter in the path ('token')"),
    ("http://127.0.0.1:8000/sk-proj-abcdefghijklmnop/v1", "key or token in the path"),
    ("http://127.0.0.1:8000/hf_AbCdEfGhIjKlMnOp/v1", "key or token in the path"),
    ("http://127.0.0.1:8000/v1/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "key or token in the path"),
    ("http://127.0.0.1:8000/key/Zk3QaP9xW2mN7bV4cR8tY1uI6oL0eK5sD/v1", "key or token in the path"),
])
def test_credentials_anywhere_in_a_url_are_refused_at_save_time(study, owner, base_url, reason):
    for url, body in ((f"/api/v1/studies/{study.pk}/subject-models/",
                       {"name": "tiny", "model": "m", "base_url": base_url, "check": False}),
                      (f"/api/v1/studies/{study.pk}/judges/", {"name": "j", "model": "m", "base_url": base_url})):
        r = api(owner).post(url, body, format="json")
        assert r.status_code == 400, r.content
        assert reason in errors(r)["base_url"] and "api_key_env" in errors(r)["base_url"]
    assert not SubjectModel.objects.exists()


@pytest.mark.parametrize("base_url", [
    "http://127.0.0.1:8000/v1", "https://api.openai.com/v1", "http://gpu-box:8000/openai/deployments/gpt-4o-mini/v1",
    # A gateway's account id: lower-case hex, not a key.
    "https://gateway.ai.cloudflare.com/v1/0123456789abcdef0123456789abcdef/my-gateway/openai",
])
def test_ordinary_base_urls_hold_no_credentials(base_url):
    assert outbound.url_credentials(base_url) is None
    assert outbound.redact_url(base_url) == base_url


def test_what_looks_like_a_credential_is_redacted_wherever_a_url_is_shown():
    shown = outbound.redact_url("http://h:1/sk-abcdefghijklmnop/v1;api_key=abc?pwd=x&bearer=y&model=m")
    assert shown == "http://h:1/REDACTED/REDACTED?pwd=REDACTED&bearer=REDACTED&model=m"
    assert "abcdefghijklmnop" not in outbound.server_message("see http://h/v1/sk-abcdefghijklmnop/x")


@pytest.mark.parametrize("literal, ipv4", [
    ("::127.0.0.1", "127.0.0.1"),  # IPv4-compatible
    ("::ffff:0:7f00:1", "127.0.0.1"),  # IPv4-translated
    ("64:ff9b::a9fe:a9fe", "169.254.169.254"),  # NAT64, well-known prefix
    ("64:ff9b:1:a9fe:a9:fea9:fe00:0", "169.254.169.254"),  # NAT64, local-use prefix (/48 layout)
    ("2002:a9fe:a9fe::", "169.254.169.254"),  # 6to4
    ("2002:a00:1::1", "10.0.0.1"),
])
def test_ipv6_forms_that_embed_an_ipv4_address_are_judged_as_it(study, owner, settings, literal, ipv4):
    settings.MODEL_NETWORKS = ()
    address = ipaddress.ip_address(literal)
    assert ipaddress.ip_address(ipv4) in outbound.embedded_ipv4(address)
    assert not outbound.address_allowed(address)
    with pytest.raises(outbound.OutboundRefused, match="address policy"):
        outbound.check_host(f"[{literal}]", 8000, must_resolve=True)  # every request checks again
    r = api(owner).post(f"/api/v1/studies/{study.pk}/subject-models/",
                        {"name": "tiny", "model": "m", "base_url": f"http://[{literal}]:8000/v1", "check": False},
                        format="json")
    assert r.status_code == 400 and "address policy" in errors(r)["base_url"]
    # The operator's list decides for the embedded address as for the address itself.
    settings.MODEL_NETWORKS = (ipaddress.ip_network(f"{ipv4}/32"),)
    assert outbound.address_allowed(address) == (len(set(outbound.embedded_ipv4(address))) == 1)


def test_public_ipv4_behind_nat64_stays_public(settings):
    settings.MODEL_NETWORKS = ()
    assert outbound.address_allowed(ipaddress.ip_address("64:ff9b::808:808"))
    assert outbound.address_allowed(ipaddress.ip_address("2606:4700::1111"))


def test_saving_contacts_no_server_so_its_time_tells_nothing(study, owner, settings):
    """A closed port, a port that never answers and nothing at all: the save answers the same, at once,
    and a probe job (for a worker) is what will contact the server."""
    settings.MODEL_NETWORKS = (ipaddress.ip_network("127.0.0.0/8"),)
    with socket.socket() as closed, socket.socket() as silent:
        closed.bind(("127.0.0.1", 0))
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections into its backlog and never answers
        for n, sock in enumerate((closed, silent)):
            r = api(owner).post(f"/api/v1/studies/{study.pk}/subject-models/",
                                {"name": f"m{n}", "model": "m", "base_url": f"http://127.0.0.1:{sock.getsockname()[1]}/v1"},
                                format="json")
            assert r.status_code == 201, r.content
        silent.setblocking(False)
        with pytest.raises(BlockingIOError):
            silent.accept()  # nobody connected
    assert Job.objects.filter(kind="probe").count() == 2


def test_a_url_saved_before_the_rule_is_shown_redacted_to_members(study, owner, member):
    """Rows written before paths were checked keep their URL (the run refuses it), but the API shows
    members no credential in it, as the pages do."""
    from judges import services as judge_services
    from subjects import services as subject_services

    judge, _ = judge_services.do_save_judge(study, {"name": "j", "model": "m", "base_url": "http://127.0.0.1:9/v1"})
    subject, _ = subject_services.do_save_subject(study, {"name": "s", "model": "m", "base_url": "http://127.0.0.1:9/v1"})
    leaky = "http://127.0.0.1:9/sk-abcdefghijklmnop/v1;api_key=abc?pwd=x"
    type(judge).objects.filter(pk=judge.pk).update(base_url=leaky)
    SubjectModel.objects.filter(pk=subject.pk).update(base_url=leaky)
    for url in (f"/api/v1/judges/{judge.pk}/", f"/api/v1/subject-models/{subject.pk}/"):
        shown = api(member).get(url).json()["base_url"]
        assert shown == "http://127.0.0.1:9/REDACTED/REDACTED?pwd=REDACTED", shown
    ordinary = api(member).get(f"/api/v1/studies/{study.pk}/judges/").json()
    assert all("abcdefghijklmnop" not in str(row) for row in ordinary["results"])
