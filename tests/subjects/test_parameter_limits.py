"""Every numeric run parameter has one documented range (runs/params.py, docs/runs.md), refused the same
way by the web form, the REST API and the command: max_tokens 99,999,999,999 (too big for a PostgreSQL
integer) and a timeout of 1e9 seconds (a worker pinned for ever) were accepted before."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from subjects.models import SubjectModel

pytestmark = pytest.mark.django_db

HUGE = {"max_tokens": 99_999_999_999, "timeout_seconds": 1e9}


@pytest.mark.parametrize(("field", "message"), [("max_tokens", "262144"), ("timeout_seconds", "600")])
def test_rest_web_and_cli_refuse_the_same_out_of_range_values(study, owner, server, field, message):
    body = {"name": "tiny", "model": "m", "base_url": server.url, "check": False, field: HUGE[field]}
    token, _ = Token.objects.get_or_create(user=owner)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    r = api.post(f"/api/v1/studies/{study.pk}/subject-models/", body, format="json")
    assert r.status_code == 400 and r.json()["detail"].startswith(f"{field}:") and message in r.json()["detail"]

    web = Client()
    web.force_login(owner)
    form = {"name": "tiny", "model": "m", "base_url": server.url, "api": "chat", "temperature": "0",
            "max_tokens": "128", "stop": "[]", "n_samples": "1", "concurrency": "2", "timeout_seconds": "30",
            "max_retries": "1", "price_input_per_mtok": "0", "price_output_per_mtok": "0", field: str(HUGE[field])}
    page = web.post(f"/studies/{study.pk}/subject-models/new/", form)
    assert page.status_code in (200, 400) and message in page.content.decode()

    option = {"max_tokens": "--max-tokens", "timeout_seconds": "--timeout"}[field]
    with pytest.raises(CommandError, match=f"{field}: .*{message}"):
        call_command("add_model", "--study", study.name, "--name", "tiny", "--base-url", server.url, "--model", "m",
                     "--no-check", option, str(int(HUGE[field])))
    assert not SubjectModel.objects.exists()
