"""Fixtures the engine's tests share: the fake OpenAI-compatible server, and retries short enough
that a test of failures does not wait out the production backoff."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.runs.fake_openai import FakeOpenAI


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


@pytest.fixture
def quick_retries(settings) -> None:
    settings.RUN_RETRY_BASE_SECONDS = 0.01
    settings.RUN_RETRY_MAX_SECONDS = 0.05
