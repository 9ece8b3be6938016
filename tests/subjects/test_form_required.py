"""The subject-model form marks its required prompt template as the runs page marks a required field (" *") and
offers the built-in zero-shot template by default (issue 31: it was unmarked, with no default)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from subjects import prompts
from subjects.services import find_template

pytestmark = pytest.mark.django_db


def test_the_new_subject_model_form_marks_the_template_required_and_defaults_it(study, owner):
    web = Client()
    web.force_login(owner)
    page = web.get(f"/studies/{study.pk}/subject-models/new/").content.decode()
    assert re.search(r"<label[^>]*>Prompt template \*</label>", page)
    zero_shot = find_template(study, prompts.ZERO_SHOT)
    assert re.search(rf'<option value="{zero_shot.pk}" selected>', page)
    assert not re.search(r"<label[^>]*>System prompt \*</label>", page)  # optional fields stay unmarked
