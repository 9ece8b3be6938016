"""Thinking settings of subject models: what each sends (Qwen3's template switch and /no_think,
reasoning_effort, thinking_budget), the regime's record with the thought's tokens, the flag for a
model that does not think when asked to, and the form, REST and CLI that set them."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Job, Trace
from subjects import services, thinking
from subjects.models import SubjectModel
from tests.runs.fake_thinking import FakeThinking
from tests.subjects.conftest import generate

pytestmark = pytest.mark.django_db


@pytest.fixture
def thinker():
    servers = []

    def start(**kw) -> FakeThinking:
        s = FakeThinking(**kw).start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


def make(study, server, name="qwen", **fields) -> SubjectModel:
    made, _ = services.do_save_subject(study, {"name": name, "model": "qwen3", "base_url": server.url,
                                               "max_retries": 1, "timeout_seconds": 5.0, **fields})
    return made


# -- pure -----------------------------------------------------------------------------------------------------


def test_what_each_setting_adds_to_a_request():
    assert thinking.request_extras("", "template", "", None) == {}
    assert thinking.request_extras("off", "template", "", None) == {"chat_template_kwargs": {"enable_thinking": False}}
    assert thinking.request_extras("on", "prompt", "", None) == {}
    assert thinking.request_extras("on", "both", "high", 512) == {
        "chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "high", "thinking_budget": 512}
    assert thinking.request_extras("off", "template", "", 512) == {"chat_template_kwargs": {"enable_thinking": False}}
    assert thinking.user_text("What is 2 + 2?\n", "off", "prompt") == "What is 2 + 2? /no_think"
    assert thinking.user_text("What is 2 + 2?", "on", "both") == "What is 2 + 2? /think"
    assert thinking.user_text("What is 2 + 2?", "on", "template") == "What is 2 + 2?"
    with pytest.raises(ValueError, match="reasoning_effort 'max'"):
        thinking.request_extras("", "template", "max", None)


# -- generation -------------------------------------------------------------------------------------------------


def test_thinking_on_sends_the_switch_and_the_regime_records_settings_and_thought_tokens(make_problems, study,
                                                                                           thinker):
    make_problems(1)  # "Ann has 2 apples and buys 3 more" -> 5
    server = thinker(form="field")
    subject = make(study, server, thinking="on", reasoning_effort="low", thinking_budget=100)
    _, job = generate(subject)
    assert job.status == Job.Status.SUCCEEDED
    sent = server.requests[0].body
    assert sent["chat_template_kwargs"] == {"enable_thinking": True}
    assert (sent["reasoning_effort"], sent["thinking_budget"]) == ("low", 100)
    t = Trace.objects.get(model="qwen")
    assert t.thought == "I start with 2.\n\nAdding 3 gives 2 + 3 = 5."
    assert t.answer == "5"
    r = t.regime
    assert (r["thinking"], r["thinking_switch"], r["reasoning_effort"], r["thinking_budget"]) == (
        "on", "template", "low", 100)
    assert r["thought_tokens"] == thinking.approx_tokens(t.thought) == 14
    assert not t.meta["thought"].get("missing")


def test_thinking_off_through_the_prompt_and_a_budget_change_makes_a_new_version(make_problems, study, thinker):
    make_problems(1)
    server = thinker(form="inline")
    subject = make(study, server, thinking="off", thinking_switch="prompt")
    generate(subject)
    sent = server.requests[0].body
    assert "chat_template_kwargs" not in sent and sent["messages"][-1]["content"].endswith(" /no_think")
    t = Trace.objects.get(model="qwen")
    assert t.regime["thinking"] == "off" and t.regime["thought_tokens"] == 0
    subject, _ = services.do_save_subject(study, {"thinking_budget": 64}, subject=subject)
    assert subject.version == 2


def test_a_plain_model_regime_is_unchanged_and_an_inline_thought_is_counted(make_problems, study, thinker):
    make_problems(1)
    generate(make(study, thinker(form="r1")))
    r = Trace.objects.get(model="qwen").regime
    assert "thinking" not in r and "reasoning_effort" not in r
    assert r["thought_tokens"] == 25  # the text before </think>: 14 + 11 pieces of the check


def test_a_model_that_returns_no_thought_when_thinking_is_on_is_flagged(make_problems, study, thinker):
    make_problems(1)
    generate(make(study, thinker(form="silent"), thinking="on"))
    t = Trace.objects.get(model="qwen")
    assert t.meta["thought"]["missing"] is True and t.regime["thought_tokens"] == 0


def test_a_thought_cut_by_max_tokens_is_counted_and_the_trace_kept_truncated(make_problems, study, thinker):
    make_problems(1)
    generate(make(study, thinker(form="inline"), thinking="on", max_tokens=6))
    t = Trace.objects.get(model="qwen")
    assert t.meta["truncated"] is True and t.regime["thought_tokens"] == 7  # "I start with 2 . Adding 3"


# -- CLI, REST, form ------------------------------------------------------------------------------------------


def test_add_model_sets_and_clears_the_thinking_settings(study, thinker, capsys):
    server = thinker()
    base = ["--study", study.name, "--name", "qwen", "--base-url", server.url, "--model", "qwen3", "--no-check"]
    call_command("add_model", *base, "--thinking", "on", "--thinking-switch", "both", "--reasoning-effort", "high",
                 "--thinking-budget", "1024")
    assert "thinking on (both), reasoning effort high, thinking budget 1024" in capsys.readouterr().out
    s = SubjectModel.objects.get(name="qwen")
    assert (s.thinking, s.thinking_switch, s.reasoning_effort, s.thinking_budget, s.version) == (
        "on", "both", "high", 1024, 1)
    call_command("add_model", *base, "--thinking", "default", "--reasoning-effort", "default", "--thinking-budget", "-1")
    s.refresh_from_db()
    assert (s.thinking, s.reasoning_effort, s.thinking_budget, s.version) == ("", "", None, 2)
    with pytest.raises(CommandError, match="--thinking-budget -5"):
        call_command("add_model", *base, "--thinking-budget", "-5")
    with pytest.raises(CommandError):
        call_command("add_model", *base, "--thinking", "maybe")


def test_rest_sets_the_settings_and_names_a_bad_one(study, owner, thinker):
    server = thinker()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=owner)[0].key}")
    url = f"/api/v1/studies/{study.pk}/subject-models/"
    r = client.post(url, {"name": "qwen", "model": "q", "base_url": server.url, "thinking": "off",
                          "reasoning_effort": "medium", "thinking_budget": 256}, format="json")
    assert r.status_code == 201, r.json()
    data = r.json()
    assert (data["thinking"], data["thinking_switch"], data["reasoning_effort"], data["thinking_budget"]) == (
        "off", "template", "medium", 256)
    r = client.post(url, {"name": "q2", "model": "q", "base_url": server.url, "reasoning_effort": "max"},
                    format="json")
    assert r.status_code == 400 and "reasoning_effort" in str(r.json())


def test_the_form_labels_and_saves_the_settings(study, owner, thinker):
    server = thinker()
    web = Client()
    web.force_login(owner)
    page = web.get(f"/studies/{study.pk}/subject-models/new/").content.decode()
    assert "How thinking is switched" in page and "Thinking budget (tokens)" in page and "server default" in page
    form = {"name": "qwen", "model": "m", "base_url": server.url, "api": "chat", "temperature": "0",
            "max_tokens": "128", "stop": "[]", "n_samples": "1", "concurrency": "2", "timeout_seconds": "30",
            "max_retries": "1", "price_input_per_mtok": "0", "price_output_per_mtok": "0",
            "prompt_template": services.find_template(study, "zero-shot").pk,
            "thinking": "on", "thinking_switch": "prompt", "reasoning_effort": "low", "thinking_budget": "300"}
    r = web.post(f"/studies/{study.pk}/subject-models/new/", form)
    assert r.status_code == 302, r.content.decode()[:2000]
    s = SubjectModel.objects.get(name="qwen")
    assert (s.thinking, s.thinking_switch, s.reasoning_effort, s.thinking_budget) == ("on", "prompt", "low", 300)
    detail = web.get(s.get_absolute_url()).content.decode()
    assert "on (in the prompt (/think or /no_think)), reasoning effort low, thinking budget 300 tokens" in detail


# -- a completions-API model whose chat template opens the thought ------------------------------------------------

THINKING_TEMPLATE = (Path(__file__).resolve().parents[1] / "runs" / "data" / "smollm2_thinking_chat_template.jinja") \
    .read_text()


def test_a_template_that_opens_the_thought_gives_a_trace_whose_thought_is_cut_unclosed(make_problems, study, thinker):
    make_problems(1)
    server = thinker()
    subject = make(study, server, api="completions", chat_template=THINKING_TEMPLATE, eos_token="<|im_end|>",
                   thinking="on", max_tokens=6)
    _, job = generate(subject)
    assert job.status == Job.Status.SUCCEEDED
    prompt = server.requests[0].body["prompt"]
    assert prompt.endswith("<|im_start|>assistant\n<think>\n") and "Ann has 2 apples" in prompt
    t = Trace.objects.get(model="qwen")
    # the completion began inside the thought and was cut: an unclosed thought, kept, with no answer
    assert t.raw == "I start with 2.\n\nAdding 3"
    assert (t.thought, t.thought_truncated, t.n_thought_steps, t.answer) == ("I start with 2.\n\nAdding 3", True, 2, "")
    assert t.meta["prompt_opened_thought"] is True and t.meta["truncated"] is True
    assert t.regime["thought_tokens"] == 7 and len(t.regime["messages_hash"]) == 64


def test_thinking_off_renders_the_templates_empty_thought_and_the_template_is_versioned(make_problems, study, thinker):
    make_problems(1)
    server = thinker()
    subject = make(study, server, api="completions", chat_template=THINKING_TEMPLATE, thinking="off")
    generate(subject)
    assert server.requests[0].body["prompt"].endswith("<think>\n\n</think>\n\n")
    assert "prompt_opened_thought" not in Trace.objects.get(model="qwen").meta
    subject, _ = services.do_save_subject(study, {"chat_template": THINKING_TEMPLATE + " "}, subject=subject)
    assert subject.version == 2  # a completions model's prompt is its template's rendering
