"""Shared fixtures: the three standard users of every permission test
(owner, member, outsider) and a study they relate to."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterable

import pytest

from annotation import services
from annotation.importing.pipeline import ImportReport, import_stream
from annotation.models import Membership, Study

# The real llama-cpp-python server fixture (``llama``) for the real-model tests.
pytest_plugins = ["tests.llama"]


@pytest.fixture(autouse=True)
def _fresh_file_cache():
    """Each test starts with an empty cache where the cache is this test process's own folder (the embedded
    defaults): it outlives a test, and a job id SQLite hands out again showed the progress an earlier test's
    job had cached (the blind non-interference test read a stranger's "709 / 800"). A shared cache (Redis,
    pass 2) is left alone: clearing it would clear the broker's queues, and PostgreSQL never reuses an id."""
    from django.conf import settings
    from django.core.cache import cache

    if settings.CACHES["default"]["BACKEND"].endswith("FileBasedCache"):
        cache.clear()


@pytest.fixture(scope="session")
def live_server(live_server):
    """pytest-django's live server, answering one request at a time while it
    shares the test's in-memory SQLite connection (the embedded pass).

    Its request threads then run on that one ``sqlite3`` connection, and two
    threads running the same statement at once (a page's htmx preview and
    the form posted beside it both load the session) can read no row: the
    session looks empty, its cookie is deleted and the browser is signed out
    mid-test. Each thread of a real deployment has its own connection; on
    PostgreSQL nothing is shared and requests stay concurrent."""
    if live_server.thread.connections_override:
        httpd = live_server.thread.httpd
        httpd.set_app(_one_at_a_time(httpd.get_app(), threading.Lock()))
    return live_server


def _one_at_a_time(app, lock: threading.Lock):
    def serve(environ, start_response) -> Iterable[bytes]:
        with lock:
            response = app(environ, start_response)
            try:
                # A streamed body (an export, a static file) reads the database or files
                # as it goes: read it whole inside the lock.
                return [b"".join(response)]
            finally:
                getattr(response, "close", lambda: None)()

    return serve


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
def adjudicator(django_user_model, study):
    """A third member of ``study``, an adjudicator."""
    user = django_user_model.objects.create_user("adam", password="pw-adam")
    services.do_add_member(study, user.username, Membership.Role.ADJUDICATOR)
    return user


@pytest.fixture
def study(owner, member) -> Study:
    study, _ = services.do_get_or_create_study("Study A", owner=owner)
    services.do_add_member(study, member.username, Membership.Role.ANNOTATOR)
    return study


def signed_in(user):
    """A test client of the web pages, signed in as ``user``."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def api(user=None):
    """A REST client authenticated as ``user`` by the user's API token (the door scripts use), or anonymous."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def jsonl(*records: dict | str) -> bytes:
    """A JSONL file from dicts (encoded) or raw strings (taken as they are)."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def do_import(study) -> Callable[..., ImportReport]:
    def run(data: bytes, fmt: str = "reasonaudit", *, skip_invalid: bool = False, target: Study | None = None):
        return import_stream(target or study, io.BytesIO(data), fmt, skip_invalid=skip_invalid)

    return run
