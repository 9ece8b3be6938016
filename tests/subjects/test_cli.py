"""The add_model and generate commands (docs/generation.md)."""

from __future__ import annotations

import socket

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Trace
from subjects.models import PromptTemplate, SubjectModel
from tests.runs.fake_openai import Fault

pytestmark = pytest.mark.django_db


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there once the socket is closed


def test_add_model_checks_the_server_then_creates_and_versions(study, server, capsys):
    call_command("add_model", "--study", study.name, "--name", "tiny", "--base-url", server.url, "--model", "m",
                 "--temperature", "0.7", "--seed", "3", "--samples", "4", "--template", "gsm8k-8shot-cot",
                 "--api-key-env", "TINY_KEY", "--stop", "Q:", "--max-tokens", "256")
    out = capsys.readouterr().out
    assert "created subject model tiny" in out and "template gsm8k-8shot-cot v1, k=4" in out
    assert server.gets == ["/v1/models"] and server.count == 0  # one cheap check, no generation
    tiny = SubjectModel.objects.get(study=study, name="tiny")
    assert (tiny.temperature, tiny.seed, tiny.n_samples, tiny.api_key_env, tiny.stop, tiny.version) == (
        0.7, 3, 4, "TINY_KEY", ["Q:"], 1)
    assert len(tiny.prompt_template.exemplars) == 8
    # concurrency does not change completions; the temperature does
    call_command("add_model", "--study", study.name, "--name", "tiny", "--base-url", server.url, "--model", "m",
                 "--concurrency", "8", "--no-check")
    tiny.refresh_from_db()
    assert tiny.version == 1 and tiny.concurrency == 8
    call_command("add_model", "--study", study.name, "--name", "tiny", "--base-url", server.url, "--model", "m",
                 "--temperature", "0.2", "--no-check")
    tiny.refresh_from_db()
    assert tiny.version == 2


def test_an_unreachable_base_url_saves_nothing(study):
    url = closed_port_url()
    with pytest.raises(CommandError, match=f"no model server answered at {url}"):
        call_command("add_model", "--study", study.name, "--name", "tiny", "--base-url", url, "--model", "m",
                     "--template", "gsm8k-8shot-cot")
    assert not SubjectModel.objects.exists() and not PromptTemplate.objects.exists()
    # --no-check saves it anyway (a server that is not up yet)
    call_command("add_model", "--study", study.name, "--name", "tiny", "--base-url", url, "--model", "m", "--no-check")
    assert SubjectModel.objects.filter(name="tiny").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--base-url", "ftp://x"], "base_url"),
    (["--template", "nope"], "no prompt template named 'nope'"),
    (["--temperature", "5"], "temperature"),
])
def test_add_model_refuses_bad_input(study, server, args, message):
    base = ["--study", study.name, "--name", "tiny", "--base-url", server.url, "--model", "m", "--no-check"]
    with pytest.raises(CommandError, match=message):
        call_command("add_model", *base, *args)
    assert not SubjectModel.objects.exists()


def test_generate_waits_and_reports(make_problems, subject, server, study, capsys):
    make_problems(2)
    subject(n_samples=2)
    call_command("generate", "--study", study.name, "--model", "tiny", "--wait")
    out = capsys.readouterr().out
    assert "2 sample(s) for each of 2 problems" in out and "succeeded: 2 of 2 problems done, 0 failed" in out
    assert "traces 4 new" in out and Trace.objects.filter(model="tiny").count() == 4
    call_command("generate", "--study", study.name, "--model", "tiny", "--problems", "missing", "--samples", "3",
                 "--wait")
    assert "traces 2 new" in capsys.readouterr().out and Trace.objects.filter(model="tiny").count() == 6


def test_generate_exits_1_when_the_run_fails(make_problems, subject, server, study):
    make_problems(1)
    subject(max_retries=0)
    server.inject(Fault(status=500, message="down"))
    with pytest.raises(SystemExit) as exc:
        call_command("generate", "--study", study.name, "--model", "tiny", "--wait")
    assert exc.value.code == 1
    with pytest.raises(CommandError, match="no subject model named 'nope'"):
        call_command("generate", "--study", study.name, "--model", "nope")


def test_add_template_makes_versions_and_refuses_bad_templates(study, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("{% for e in exemplars %}Question: {{ e.question }}\nSolution: {{ e.answer }}\n{% endfor %}"
                    "Question: {{ problem }}\nSolution:")
    shots = tmp_path / "shots.json"
    shots.write_text('[{"question": "1 + 1?", "answer": "1 + 1 = 2. The answer is 2."}]')
    call_command("add_template", "--study", study.name, "--name", "mine", "--file", str(text), "--exemplars", str(shots))
    assert "template mine v1 (k-shot, 1 exemplars)" in capsys.readouterr().out
    call_command("add_template", "--study", study.name, "--name", "mine", "--file", str(text), "--exemplars", str(shots))
    assert "template mine v1" in capsys.readouterr().out  # unchanged: no new version
    text.write_text("{{ problem }}")
    call_command("add_template", "--study", study.name, "--name", "mine", "--file", str(text))
    assert "template mine v2 (zero-shot, 0 exemplars)" in capsys.readouterr().out
    text.write_text("{% if %}")
    with pytest.raises(CommandError, match="does not compile"):
        call_command("add_template", "--study", study.name, "--name", "mine", "--file", str(text))
    shots.write_text('[{"q": 1}]')
    text.write_text("{{ problem }}!")
    with pytest.raises(CommandError, match="exemplars must be a list"):
        call_command("add_template", "--study", study.name, "--name", "mine", "--file", str(text), "--exemplars",
                     str(shots))
    with pytest.raises(CommandError, match="not a registered tag library"):  # the sandbox loads none
        text.write_text("{% load static %}{{ problem }}")
        call_command("add_template", "--study", study.name, "--name", "mine", "--file", str(text))
    assert PromptTemplate.objects.filter(study=study, name="mine").count() == 2
