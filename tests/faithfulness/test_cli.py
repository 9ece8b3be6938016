"""The interventions, anytime and report commands (the fake server; Celery is eager under the test settings)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

pytestmark = pytest.mark.django_db


def test_interventions_wait_prints_ifr_per_kind_and_mode(generated, study, capsys):
    call_command("interventions", "--study", study.name, "--model", "tiny", "--kinds", "value_flip,paraphrase",
                 "--wait")
    out = capsys.readouterr().out
    assert "interventions run" in out and "mode completions, 4 traces, 8 continuations" in out
    assert "succeeded: 8 of 8 continuations done, 0 failed" in out
    assert "value_flip         completions  n=4    strict 1.000" in out
    assert "answers forced 4, no answer even when forced 0: left out" in out
    assert "paraphrase         completions  n=4    invariance 1.000" in out


def test_anytime_wait_prints_acc_b_and_auc(generated, study, capsys):
    call_command("anytime", "--study", study.name, "--model", "tiny", "--budgets", "steps:1,2,full", "--wait")
    out = capsys.readouterr().out
    assert "grid steps:1,2,full (completions), N = 4" in out and "AUC_any = 0.667" in out


def test_bad_input_is_a_clear_command_error(generated, study):
    with pytest.raises(CommandError, match="not increasing"):
        call_command("anytime", "--study", study.name, "--model", "tiny", "--budgets", "tokens:64,32")
    with pytest.raises(CommandError, match="no subject model named 'zz'"):
        call_command("interventions", "--study", study.name, "--model", "zz")
    with pytest.raises(CommandError, match="unknown intervention kind"):
        call_command("interventions", "--study", study.name, "--model", "tiny", "--kinds", "flip")
    generated.continuation = ""
    generated.probe_result = {"modes": [{"mode": "completions", "supported": False, "reason": "no answer: HTTP 404"}]}
    generated.save()
    with pytest.raises(CommandError, match="modes tried: completions: no answer: HTTP 404"):
        call_command("anytime", "--study", study.name, "--model", "tiny")
