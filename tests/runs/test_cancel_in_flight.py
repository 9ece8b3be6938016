"""A cancel ends the requests in flight within a second (docs/runs.md): the pool closes the client's
connections instead of waiting for a slow server (a 40 s timeout used to answer 40 s after a cancel)."""

from __future__ import annotations

import pytest

from runs import transport
from runs.transport import ModelPool
from tests.runs.fake_openai import FakeOpenAI, Fault
from tests.runs.test_engine import SCHEMA, CountingControl, _endpoint, _request


@pytest.fixture
def server():
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


class BudgetControl(CountingControl):
    """A budget spent after a few heartbeats: requests in flight finish (their answers are paid for)."""

    def heartbeat(self) -> str | None:
        self.beats += 1
        return "budget" if self.cancel_after is not None and self.beats >= self.cancel_after else None

    def stop_reason(self) -> str | None:
        return "budget" if self.cancel_after is not None and self.beats >= self.cancel_after else None


def test_a_cancel_aborts_requests_in_flight_within_a_second(server):
    server.rule(lambda body: True, Fault(delay=20.0))  # a server that thinks for 20 s
    control = CountingControl(cancel_after=3)  # the cancel is seen about a second in (heartbeat every 0.5 s)
    pool = ModelPool(_endpoint(server, timeout_seconds=40.0), "test")
    outcomes = list(pool.run([_request(i, SCHEMA) for i in range(4)], control))
    # The pool returned without waiting for the server: neither request in flight was answered (the fake
    # answers only after 20 s). No wall-clock bound: the time it takes is measured in benchmarks, not here.
    assert len(server.requests) == 2 and not any(seen.finished for seen in server.requests)
    assert sorted(o.status for o in outcomes) == ["skipped"] * 4
    aborted = [c for o in outcomes for c in o.calls]
    assert len(aborted) == 2 and all(c.error == "cancelled while in flight" and not c.tokens_known for c in aborted)
    # The closed client is forgotten: the next pool of the process gets a working one.
    server.rules.clear()
    fresh = ModelPool(_endpoint(server), "test")
    assert fresh.client is not pool.client
    assert [o.status for o in fresh.run([_request(9, SCHEMA)], CountingControl())] == ["ok"]


def test_a_spent_budget_lets_requests_in_flight_finish(server):
    server.rule(lambda body: True, Fault(delay=1.5))
    pool = ModelPool(_endpoint(server), "test")
    outcomes = list(pool.run([_request(i, SCHEMA) for i in range(4)], BudgetControl(cancel_after=2)))
    statuses = sorted(o.status for o in outcomes)
    assert statuses.count("ok") == 2 and statuses.count("skipped") == 2
    assert pool.client in transport._CLIENTS.values()
