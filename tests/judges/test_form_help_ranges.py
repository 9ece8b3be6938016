"""The judge form's help says each number's range, from the one declaration of it (runs.params; issue 31: the
judge help omitted its maximums)."""

from __future__ import annotations

import pytest
from django.test import Client

from judges.forms import JudgeConfigForm
from runs import params

pytestmark = pytest.mark.django_db


def test_every_numeric_field_says_its_range(study, owner):
    form = JudgeConfigForm(study=study)
    for name in ("concurrency", "rate_limit_per_minute", "max_retries", "timeout_seconds", "max_tokens"):
        assert params.range_words(name) in str(form.fields[name].help_text), name
    assert "0 to 600 seconds" not in form.fields["timeout_seconds"].help_text  # the declared minimum is 0.1
    assert "0.1 to 600 seconds" in form.fields["timeout_seconds"].help_text
    web = Client()
    web.force_login(owner)
    page = web.get(f"/studies/{study.pk}/judges/new/").content.decode()
    assert "1 to 64 requests at once" in page and "0 to 20 retries" in page and "1 to 262,144" in page
