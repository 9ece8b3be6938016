"""Fixtures of the step-importance tests: reasoning models on the fake thinking server
(tests/runs/fake_thinking.py) -- one whose answer depends on its plan step ("plan"), one that ignores its
thought ("ignore") -- probed, with two problems generated each."""

from __future__ import annotations

import pytest

from subjects import services as subject_services
from tests.faithfulness.conftest import SMOLLM2
from tests.runs.fake_thinking import IGNORE, PLAN, FakeThinking
from tests.subjects.conftest import generate, problem_records


@pytest.fixture(autouse=True)
def quick_retries(settings):
    settings.RUN_RETRY_BASE_SECONDS = 0.01
    settings.RUN_RETRY_MAX_SECONDS = 0.05


@pytest.fixture
def reasoners(study, do_import):
    """{behaviour: (subject, server)} for "plan" and "ignore": 2 problems generated each ("Ann has i+2 apples
    and buys i+3 more"; the plan model thinks in 4 steps, the plan second)."""
    assert do_import(problem_records(2)).committed
    servers, made = [], {}
    for behaviour in (PLAN, IGNORE):
        server = FakeThinking(form="field", behaviour=behaviour).start()
        servers.append(server)
        subject, _ = subject_services.do_save_subject(study, {
            "name": behaviour, "model": "r1-fake", "base_url": server.url, "concurrency": 4, "max_retries": 1,
            "timeout_seconds": 5.0, "seed": 0, "chat_template": SMOLLM2, "thinking": "on"})
        subject_services.do_probe_subject_model(subject)
        assert subject.continuation == "completions"
        assert generate(subject)[1].status == "succeeded"
        made[behaviour] = (subject, server)
    yield made
    for s in servers:
        s.stop()
