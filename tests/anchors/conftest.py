"""Fixtures of the step-importance tests: reasoning models on the fake thinking server
(tests/runs/fake_thinking.py) -- one whose answer depends on its plan step ("plan"), one that ignores its
thought ("ignore") -- probed, with two problems generated each."""

from __future__ import annotations

import pytest

from tests.faithfulness.conftest import probed_reasoners
from tests.runs.fake_thinking import IGNORE, PLAN


@pytest.fixture(autouse=True)
def quick_retries(settings):
    settings.RUN_RETRY_BASE_SECONDS = 0.01
    settings.RUN_RETRY_MAX_SECONDS = 0.05


@pytest.fixture
def reasoners(study, do_import):
    """{behaviour: (subject, server)} for "plan" and "ignore": 2 problems generated each (the plan model thinks
    in 4 steps, the plan second)."""
    with probed_reasoners(study, do_import, (PLAN, IGNORE), problems=2, concurrency=4) as made:
        yield made
