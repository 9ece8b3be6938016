"""Fixtures the engine's tests share: the fake OpenAI-compatible server (tests/run_fixtures.py), and retries
short enough that a test of failures does not wait out the production backoff (here asked for by name, not
automatic as in the run clients' tests)."""

from __future__ import annotations

import pytest

from tests.run_fixtures import openai_server  # noqa: F401 (fixtures)


@pytest.fixture
def quick_retries(settings) -> None:
    settings.RUN_RETRY_BASE_SECONDS = 0.01
    settings.RUN_RETRY_MAX_SECONDS = 0.05
