"""Issue 29, H1 and M8: only the settings the application passes reach a model server (nothing from the
worker's environment: OPENAI_* variables, proxies, .netrc), and every outbound model call -- runs,
probes, continuations, the save-time check -- has a total deadline (connect + headers + body) and a
response size cap, against loopback servers that record headers, trickle bytes or never end."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from runs import outbound, transport
from runs.continuation import ModelServer, probe_model
from runs.transport import Endpoint, ModelPool, ModelRequest, NoStop
from subjects import services as subject_services

COMPLETION = json.dumps({
    "id": "c", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}).encode()


class Server:
    """A loopback HTTP server; ``behaviour(handler)`` writes each answer. Records every request's headers."""

    def __init__(self, behaviour: Callable[[BaseHTTPRequestHandler], None]) -> None:
        self.headers: list[dict[str, str]] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _any(self) -> None:
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                try:
                    behaviour(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up: what these tests want

            do_GET = do_POST = _any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def answer(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(COMPLETION)))
    handler.end_headers()
    handler.wfile.write(COMPLETION)


def trickle_body(every: float) -> Callable[[BaseHTTPRequestHandler], None]:
    """Headers at once, then the body one byte every ``every`` seconds (a read never times out)."""
    def behaviour(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(COMPLETION)))
        handler.end_headers()
        for byte in COMPLETION:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(every)
    return behaviour


def trickle_headers(every: float) -> Callable[[BaseHTTPRequestHandler], None]:
    def behaviour(handler: BaseHTTPRequestHandler) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(every)
    return behaviour


def endless(handler: BaseHTTPRequestHandler) -> None:
    """A chunked body that never ends (until the client goes)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    chunk = b"x" * 65536
    while True:
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))


@pytest.fixture(autouse=True)
def fresh_clients():
    # Clients are made once per process (runs.transport.shared_client): each test builds its own
    # under the environment it sets.
    transport._CLIENTS.clear()
    yield
    transport._CLIENTS.clear()


def chat() -> ModelRequest:
    return ModelRequest(item=0, build=lambda _mode: {"messages": [{"role": "user", "content": "hi"}]})


def run(endpoint: Endpoint) -> list:
    return list(ModelPool(endpoint, "test").run([chat()], NoStop()))


# --------------------------------------------------------------------------
# H1: nothing ambient


CANARIES = {
    "OPENAI_ORG_ID": "canary-org",
    "OPENAI_PROJECT_ID": "canary-project",
    "OPENAI_CUSTOM_HEADERS": "Authorization: Bearer canary-gateway\nX-Canary: canary-custom",
    "OPENAI_API_KEY": "canary-api-key",
    "OPENAI_ADMIN_KEY": "canary-admin-key",
    "OPENAI_WEBHOOK_SECRET": "canary-webhook",
    "OPENAI_BASE_URL": "http://127.0.0.1:9/canary-base-url",
    "OPENAI_LOG": "debug",
}


@pytest.fixture
def ambient(monkeypatch, tmp_path):
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    # A proxy would take the request elsewhere (and past the address policy); a .netrc would add a login.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login canary-user password canary-netrc\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)


def assert_clean(headers: dict[str, str]) -> None:
    for name, value in headers.items():
        assert "canary" not in value.lower(), (name, value)
    assert set(headers) <= outbound.SENT_HEADERS | {"user-agent", "accept-encoding", "authorization"}, headers


def test_no_ambient_credential_or_header_reaches_a_model_server(ambient):
    with Server(answer) as server:
        outcomes = run(Endpoint(server.url, "m", max_retries=0))
    assert [o.status for o in outcomes] == ["ok"], outcomes[0].reason
    (headers,) = server.headers  # the request went to the configured URL, not OPENAI_BASE_URL or a proxy
    assert_clean(headers)
    assert "authorization" not in headers  # no key named: none sent, not OPENAI_API_KEY nor the gateway's


def test_the_apps_own_key_is_the_only_authorization(ambient, settings, monkeypatch):
    settings.MODEL_KEYS = {"LAB_KEY": ("127.0.0.1",)}
    monkeypatch.setenv("LAB_KEY", "lab-secret")
    with Server(answer) as server:
        outcomes = run(Endpoint(server.url, "m", api_key_env="LAB_KEY", max_retries=0))
    assert outcomes[0].status == "ok"
    (headers,) = server.headers
    assert_clean(headers)
    assert headers["authorization"] == "Bearer lab-secret"
    assert headers["user-agent"] == outbound.USER_AGENT and headers["accept-encoding"] == "identity"


def test_the_save_time_check_and_the_probe_send_nothing_ambient(ambient):
    with Server(answer) as server:
        subject_services.check_reachable(server.url, timeout=5)
        probe_model(ModelServer(server.url, "m", timeout_seconds=5))
    assert len(server.headers) >= 2
    for headers in server.headers:
        assert_clean(headers)


# --------------------------------------------------------------------------
# M8: total deadlines, capped bodies

# No timed assertion here (a loaded machine would fail it): a trickling server never trips a per-read timeout,
# so without a total deadline these calls succeed after ~17 s; that they fail "timed out after" the deadline is
# what shows the deadline held. The durations are measured in docs/configuration.md and runs.md.


@pytest.mark.parametrize("behaviour", [trickle_body(0.05), trickle_headers(0.05)], ids=["body", "headers"])
def test_a_trickling_server_holds_a_run_no_longer_than_its_deadline(behaviour):
    with Server(behaviour) as server:
        outcomes = run(Endpoint(server.url, "m", max_retries=0, timeout_seconds=0.6))
    # Without the total deadline each byte resets the 0.6 s read timeout: the body arrives whole after ~17 s.
    assert outcomes[0].status == "failed" and "timed out after 0.6s" in outcomes[0].reason


def test_a_trickling_server_holds_the_save_time_check_and_the_probe_no_longer_than_their_deadline():
    with Server(trickle_body(0.05)) as server:
        with pytest.raises(subject_services.Unreachable):  # the body would have arrived whole, late
            subject_services.check_reachable(server.url, timeout=0.6)
        result = probe_model(ModelServer(server.url, "m", probe_timeout_seconds=0.6, probe_retries=0))
        # Three requests (one per continuation mode), each ended by its deadline; none answered.
        assert result.chosen is None and all("timed out" in e.reason for e in result.modes)


def test_an_endless_body_is_cut_at_the_cap_and_the_item_fails_with_the_reason(settings):
    settings.MODEL_RESPONSE_MAX_BYTES = 256 * 1024
    with Server(endless) as server:
        outcomes = run(Endpoint(server.url, "m", max_retries=3, timeout_seconds=30))
    assert outcomes[0].status == "failed"  # the endless body was cut (it never ends by itself)
    assert "larger than 262,144 bytes" in outcomes[0].reason and "REASONAUDIT_MODEL_RESPONSE_MAX_BYTES" in outcomes[0].reason
    assert len(outcomes[0].calls) == 1  # not retried: the same request would get the same answer


def test_a_deadline_holds_from_connect_to_the_last_byte():
    # A listening socket that never accepts: connect succeeds (backlog), the request waits for headers.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        outcomes = run(Endpoint(url, "m", max_retries=0, timeout_seconds=0.5))
    assert outcomes[0].status == "failed" and "timed out" in outcomes[0].reason
