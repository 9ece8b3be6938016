"""Fixtures shared by the tests of every runs client (generation, abstraction, fidelity, judges,
faithfulness): retries that do not wait, and the fake OpenAI server (plain, or in generation mode). A
conftest or test module takes them with ``from tests.run_fixtures import generation_server,
quick_retries_fixture`` (or ``openai_server``); they register under the names ``server`` and ``quick_retries``."""

from __future__ import annotations

import pytest

from tests.runs.fake_openai import FakeOpenAI


@pytest.fixture(autouse=True, name="quick_retries")
def quick_retries_fixture(settings):
    settings.RUN_RETRY_BASE_SECONDS = 0.01
    settings.RUN_RETRY_MAX_SECONDS = 0.05


@pytest.fixture(name="server")
def generation_server():
    fake = FakeOpenAI(generation=True).start()
    yield fake
    fake.stop()


@pytest.fixture(name="server")
def openai_server():
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()
