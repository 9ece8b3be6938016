"""docs/runs.md's list of kinds and parameters is what the registry says (manage.py run_kinds_doc)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework import serializers

from runs import kinds, kinds_doc


def test_docs_runs_md_lists_the_kinds_the_registry_declares():
    text = kinds_doc.doc_path().read_text(encoding="utf-8")
    assert kinds_doc.current(text) == kinds_doc.render(), "docs/runs.md is out of date: python manage.py run_kinds_doc"
    for kind in kinds.all_kinds():
        assert f"### `{kind.name}`: {kind.label}" in text


def test_a_new_kind_or_parameter_makes_the_doc_out_of_date(monkeypatch):
    class Echo(kinds.RunParams):
        words = serializers.IntegerField(min_value=1, max_value=9, default=3, label="Words", help_text="how many")

    monkeypatch.setitem(kinds._KINDS, "echo", kinds.RunKind("echo", "Echo", Echo, lambda study, data, user: None,
                                                            help="Say it again."))
    rendered = kinds_doc.render()
    assert "### `echo`: Echo" in rendered
    assert "| `words` | `--words` | Words | whole number 1 to 9 | `3` | how many |" in rendered
    with pytest.raises(CommandError, match="out of date"):
        call_command("run_kinds_doc", "--check")
