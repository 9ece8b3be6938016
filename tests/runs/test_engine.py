"""The run engine's pieces without a database: worker identities, the final
status, the backoff, and the ModelPool's heartbeat, retries, structured-output
fallback and token accounting against the fake server on a real socket."""

from __future__ import annotations

import json
import os
import threading

import pytest

from annotation.models import Job
from runs import engine, identity, transport
from runs.transport import Endpoint, ModelPool, ModelRequest
from tests.runs.fake_openai import FakeOpenAI, Fault

pytestmark = pytest.mark.usefixtures("quick_retries")


def _in_child(fn) -> str:
    """``fn()`` evaluated in a forked child process (as a prefork pool forks its workers)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.write(write, fn().encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        value = fh.read()
    os.waitpid(pid, 0)
    return value


def test_every_forked_worker_process_holds_chunks_under_its_own_name():
    parent = identity.holder("celery@box")
    first = _in_child(lambda: identity.holder("celery@box"))
    second = _in_child(lambda: identity.holder("celery@box"))
    assert len({parent, first, second}) == 3
    # ... yet all name the same worker start, so a restarted worker can tell its orphans
    boot = f"celery@box/{identity.BOOT_ID}/"
    assert parent.startswith(boot) and first.startswith(boot) and second.startswith(boot)
    assert identity.holder("celery@box") == parent  # stable within a process


@pytest.mark.parametrize("done, failed, status", [
    (40, 0, Job.Status.SUCCEEDED), (0, 0, Job.Status.SUCCEEDED), (40, 37, Job.Status.PARTIAL),
    (40, 40, Job.Status.FAILED), (3, 1, Job.Status.PARTIAL),
])
def test_a_run_status_says_what_happened(done, failed, status):
    assert engine.final_status(done, failed) == status


def test_the_backoff_doubles_up_to_the_cap_with_jitter_and_honours_retry_after():
    top = lambda a, b: b  # noqa: E731 - the largest jitter
    bottom = lambda a, b: a  # noqa: E731
    assert [transport.backoff_seconds(n, 1.0, 30.0, None, 120.0, top) for n in (1, 2, 3, 6, 9)] == [1, 2, 4, 30, 30]
    assert transport.backoff_seconds(2, 1.0, 30.0, None, 120.0, bottom) == 1.0  # half of 2 s
    assert transport.backoff_seconds(1, 1.0, 30.0, 7.0, 120.0, bottom) == 7.0
    assert transport.backoff_seconds(1, 1.0, 30.0, 900.0, 120.0, bottom) == 120.0


def _request(item: int, schema: dict | None = None) -> ModelRequest:
    def build(output_mode: str) -> dict:
        return {"messages": [{"role": "user", "content": f"Step 1: step 1 of trace {item}"}], "max_tokens": 50}

    def parse(content: str):
        data = transport_json(content)
        if "steps" not in data:
            raise transport.Malformed("steps: Field required")
        return data

    return ModelRequest(item=item, build=build, parse=parse, schema=schema)


def transport_json(content: str) -> dict:
    try:
        value = json.loads(content)
    except ValueError:
        start = content.find("{")
        value = json.loads(content[start:content.rfind("}") + 1]) if start >= 0 else None
    if not isinstance(value, dict):
        raise transport.Malformed("no JSON object in the answer")
    return value


class CountingControl:
    """A run's control without a database: cancels after ``cancel_after`` heartbeats."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.beats = 0
        self.cancel_after = cancel_after
        self.cancelled_at: int | None = None
        self.event = threading.Event()

    def heartbeat(self) -> str | None:
        self.beats += 1
        if self.cancel_after is not None and self.beats >= self.cancel_after:
            self.event.set()
            return "cancelled"
        return None

    def stop_reason(self) -> str | None:
        return "cancelled" if self.event.is_set() else None

    def charge(self, cost_usd: float) -> None:
        pass


def _endpoint(server: FakeOpenAI, **kw) -> Endpoint:
    return Endpoint(base_url=server.url, model="fake", **{"concurrency": 2, "max_retries": 3, "timeout_seconds": 5.0,
                                                          **kw})


SCHEMA = {"type": "object", "properties": {"steps": {"type": "array"}}, "required": ["steps"]}


def test_the_heartbeat_beats_while_every_slot_waits_and_a_cancel_stops_retries_at_once(server):
    # Every answer is a slow 503: both slots sit in requests and back-offs and
    # never free up. Today's main looked for a cancel only when a slot freed.
    server.rule(lambda body: True, Fault(status=503, delay=1.5))
    control = CountingControl(cancel_after=3)  # about a second in: heartbeats every 0.5 s
    pool = ModelPool(_endpoint(server, max_retries=10), "test")
    try:
        outcomes = list(pool.run([_request(i, SCHEMA) for i in range(4)], control))
    finally:
        pool.close()
    # the two requests in flight finished; no retry and no queued item started after the cancel
    assert server.count == 2
    assert sorted(o.status for o in outcomes) == ["skipped"] * 4
    assert all(len(o.calls) <= 1 for o in outcomes)


def test_the_json_object_fallback_carries_the_schema(server):
    server.reject_json_schema = True  # llama-cpp-python: HTTP 500 "Input should be 'text' or 'json_object'"
    server.json_object_needs_schema = True  # without it, the small model echoes the schema
    pool = ModelPool(_endpoint(server), "test")
    try:
        outcomes = list(pool.run([_request(i, SCHEMA) for i in range(3)], CountingControl()))
    finally:
        pool.close()
    assert [o.status for o in outcomes] == ["ok"] * 3
    objects = [r.body["response_format"] for r in server.requests if r.body["response_format"]["type"] == "json_object"]
    assert objects and all(fmt["schema"] == SCHEMA for fmt in objects)
    assert pool.accepted_mode == "json_object"
    assert {c.outcome for o in outcomes for c in o.calls} <= {"ok", "rejected_format"}


def test_a_timed_out_call_records_its_tokens_as_unknown_not_zero(server):
    server.inject(Fault(delay=1.0))
    pool = ModelPool(_endpoint(server, timeout_seconds=0.3, max_retries=1), "test")
    try:
        [outcome] = list(pool.run([_request(1, SCHEMA)], CountingControl()))
    finally:
        pool.close()
    timed_out, answered = outcome.calls
    assert timed_out.error.startswith("timed out") and not timed_out.tokens_known
    assert (timed_out.prompt_tokens, timed_out.completion_tokens) == (None, None)
    assert (answered.prompt_tokens, answered.completion_tokens) == (100, 20)


def test_an_unreachable_server_is_named_in_the_reason():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    pool = ModelPool(Endpoint(base_url=url, model="m", max_retries=0, timeout_seconds=2.0), "test")
    try:
        [outcome] = list(pool.run([_request(1)], CountingControl()))
    finally:
        pool.close()
    assert outcome.status == "failed" and f"could not connect to {url}" in outcome.reason
    assert outcome.calls[0].tokens_known and outcome.calls[0].prompt_tokens == 0  # refused: nothing was sent


def test_completions_requests_send_a_prompt_with_per_request_sampling(server):
    # Subject-model runs (generation, continuations) use /v1/completions with their own seed and temperature.
    seen = []
    server.on_request = seen.append
    request = ModelRequest(item=7, build=lambda mode: {"prompt": "Q: 2+2?\nA:", "seed": 3, "temperature": 0.7,
                                                       "max_tokens": 8},
                           api=transport.COMPLETIONS)
    pool = ModelPool(_endpoint(server), "test")
    try:
        outcomes = list(pool.run([request], CountingControl()))
    finally:
        pool.close()
    assert outcomes[0].status == "ok"
    assert seen[0]["prompt"] == "Q: 2+2?\nA:" and (seen[0]["seed"], seen[0]["temperature"]) == (3, 0.7)
