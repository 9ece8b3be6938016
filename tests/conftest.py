"""Shared fixtures: the three standard users of every permission test
(owner, member, outsider) and a study they relate to."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest

from annotation import services
from annotation.importing.pipeline import ImportReport, import_stream
from annotation.models import Membership, Study

# The real llama-cpp-python server fixture (``llama``) for the real-model tests.
pytest_plugins = ["tests.llama"]


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("olivia", password="pw-olivia")


@pytest.fixture
def member(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice")


@pytest.fixture
def outsider(django_user_model):
    return django_user_model.objects.create_user("mallory", password="pw-mallory")


@pytest.fixture
def study(owner, member) -> Study:
    study, _ = services.do_get_or_create_study("Study A", owner=owner)
    services.do_add_member(study, member.username, Membership.Role.ANNOTATOR)
    return study


def jsonl(*records: dict | str) -> bytes:
    """A JSONL file from dicts (encoded) or raw strings (taken as they are)."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def do_import(study) -> Callable[..., ImportReport]:
    def run(data: bytes, fmt: str = "reasonaudit", *, skip_invalid: bool = False, target: Study | None = None):
        return import_stream(target or study, io.BytesIO(data), fmt, skip_invalid=skip_invalid)

    return run
