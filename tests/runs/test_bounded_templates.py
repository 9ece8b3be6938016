"""Issue 20, "user templates": prompt templates (Django's engine, subject models and judges) and chat
templates (the Jinja sandbox) render within bounds of work, output and filter arguments, mutate
nothing, and fail with their own error type and a message."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from judges import protocol
from judges import services as judge_services
from runs import chat_template, templating
from runs.chat_template import ChatTemplateError, render_chat
from subjects import prompts
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db
NESTED_FOR = "".join("{% for c" + str(i) + " in problem %}" for i in range(6)) + "x" + "{% endfor %}" * 6
NESTED_EMPTY_FOR = "".join("{% for c" + str(i) + " in problem %}" for i in range(6)) + "{% endfor %}" * 6


def render(template: str, problem: str = "What is 2+2?", exemplars: list | None = None) -> str:
    return prompts.render(template, problem=problem, exemplars=exemplars)


@pytest.mark.parametrize("template, message", [
    ('{{ problem|ljust:"300000000" }}', "ljust filter's argument is 300000000"),
    ('{{ problem|center:"300000000" }}', "center filter's argument"),
    ('{{ problem|stringformat:"0300000000d" }}', "stringformat filter's argument"),
    ('{{ 1.5|floatformat:"100000000" }}', "floatformat filter's argument"),
    ('{{ problem|wordwrap:"999999999" }}', "wordwrap filter's argument"),
    (NESTED_FOR, "more than 200,000 steps"),
    (NESTED_EMPTY_FOR, "more than 200,000 steps"),
    ("{% with a=problem|add:problem %}" * 1 + "{{ a }}{% endwith %}", None),
    ('{{ 1|divisibleby:0 }}', "ZeroDivisionError"),
])
def test_prompt_templates_are_bounded_and_fail_with_their_own_error(template, message, monkeypatch):
    # The step bound is what is tested here: on a loaded machine the time bound (2 s) could fire
    # first, with its own message, so it is moved out of the way (it has a test of its own below).
    monkeypatch.setattr(templating, "MAX_SECONDS", 600.0)
    if message is None:
        assert render(template) == "What is 2+2?What is 2+2?"
        return
    with pytest.raises(templating.PromptTemplateError, match=message):
        render(template, problem="x" * 100)
    with pytest.raises(templating.PromptTemplateError, match=message):
        protocol.compile_template(template).render({"problem": "x" * 100})


def test_output_is_bounded_while_it_is_produced():
    # 2,000 x 1,000 characters: stopped at the output limit, not after building it all.
    template = "{% for a in problem %}{% for b in exemplars %}{{ b }}{% endfor %}{% endfor %}"
    with pytest.raises(templating.PromptTemplateError, match="more than 1,000,000 characters"):
        prompts.render(template, problem="x" * 2000, exemplars=["y" * 1000] * 1000)


def test_a_doubling_add_chain_is_bounded():
    template = "".join("{% with p=problem|add:problem %}{% with problem=p %}" for _ in range(30)) + "{{ problem }}"
    template += "{% endwith %}{% endwith %}" * 30
    with pytest.raises(templating.PromptTemplateError, match="add filter"):
        render(template, problem="x" * 1000)


@pytest.mark.parametrize("tag", ["{% lorem 2000000 w %}", "{% debug %}", '{% include "x.html" %}'])
def test_tags_a_prompt_has_no_use_for_do_not_compile(tag):
    assert "not allowed in a prompt template" in prompts.template_error(tag)
    assert "not allowed in a prompt template" in protocol.template_error(tag)


def test_templates_cannot_mutate_their_context():
    exemplars = [{"question": "q1", "answer": "a1"}, {"question": "q2", "answer": "a2"}]
    out = render("{{ exemplars.pop }}{{ exemplars.0.clear }}{{ exemplars.clear }}|{{ exemplars|length }}",
                 exemplars=exemplars)
    assert out == "|2"
    assert exemplars == [{"question": "q1", "answer": "a1"}, {"question": "q2", "answer": "a2"}]
    # What templates do with the data still works on the read-only copies.
    assert render(prompts.K_SHOT_TEMPLATE, exemplars=exemplars).startswith("Q: q1\nA: a1\n\nQ: q2")


# --------------------------------------------------------------------------
# Chat templates (Jinja sandbox)

CHAT = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("template, message", [
    ("{{ 'x' * 1500000000 }}", "more than 1,000,000 characters or items"),
    ("{{ messages * 10000000 }}", "more than 1,000,000 characters or items"),
    ("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "steps"),
    ("{{ range(10**9) }}", "range too large"),
    ("{{ 7 ** 100000000 }}", "bits"),
    ("{% set s = 'x' * 100000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}", "steps"),
    ("{% set s = 'x' * 1000000 %}{% for a in range(100) %}{{ s }}{% endfor %}", "more than 2,000,000 characters"),
    ("{{ messages.append(1) }}", "failed"),
    ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "failed"),
    ("{{ 1 // 0 }}", "ZeroDivisionError"),
])
def test_chat_templates_are_bounded_and_fail_with_their_own_error(template, message, monkeypatch):
    monkeypatch.setattr(chat_template, "MAX_SECONDS", 600.0)  # the step bound, not the clock (as above)
    with pytest.raises(ChatTemplateError, match=message):
        render_chat(template, CHAT)


def test_a_real_chat_template_still_renders():
    template = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
                "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    assert render_chat(template, CHAT) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


# --------------------------------------------------------------------------
# Previews


def test_the_subject_template_preview_answers_400_with_the_templates_error(study, owner):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=owner)[0].key}")
    r = client.post(f"/api/v1/studies/{study.pk}/prompt-templates/preview/",
                    {"template": '{{ problem|ljust:"300000000" }}'}, format="json")
    assert r.status_code == 400 and "ljust filter's argument" in r.content.decode()


def test_the_judge_prompt_preview_is_for_owners_and_shows_the_error(client, study, owner, member, do_import):
    do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "2+3?", "gold_answer": "5"},
                    {"kind": "trace", "problem_id": "p", "model": "m", "trace_id": "tr-1", "steps": ["2+3=5"],
                     "answer": "5"}))
    judge, _ = judge_services.do_save_judge(study, {"name": "j", "model": "m", "base_url": "http://127.0.0.1:9/v1"})
    url = reverse("judge-prompt", args=[judge.pk])
    body = {"action": "preview", "template": '{{ problem|ljust:"300000000" }}', "trace": "tr-1"}
    client.force_login(member)
    assert client.post(url, body).status_code == 403
    client.force_login(owner)
    page = client.post(url, body).content.decode()
    assert "ljust filter&#x27;s argument is 300000000" in page


def test_a_template_past_its_time_bound_stops_with_its_own_error(monkeypatch):
    # A deadline already passed: the first check (every 256 steps) stops the render.
    monkeypatch.setattr(templating, "MAX_SECONDS", 0.0)
    with pytest.raises(templating.PromptTemplateError, match="longer than 0 s"):
        render(NESTED_FOR, problem="x" * 100)
    monkeypatch.setattr(chat_template, "MAX_SECONDS", 0.0)
    with pytest.raises(ChatTemplateError, match="longer than 0 s"):
        render_chat("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", CHAT)
