"""runs.thinking.thinking_request, the one place a subject model's thinking settings enter a call, and what
each continuation mode sends with them (pure: no server)."""

from __future__ import annotations

import pytest

from runs.continuation import ContinuationSpec, ModelServer, build_request_body
from runs.thinking import ThinkingSettings, thinking_request

MESSAGES = ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 3?\n"})
# A template that shows what it was given: the messages and enable_thinking.
TEMPLATE = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% if enable_thinking is defined and not enable_thinking %}"
            "<think></think>{% else %}<think>{% endif %}{% endif %}")


def test_unset_settings_add_nothing():
    req = thinking_request(ThinkingSettings(), MESSAGES)
    assert (req.messages, req.template_variables, req.extra_body) == ([dict(m) for m in MESSAGES], {}, {})


def test_the_soft_switch_joins_the_last_user_message_and_the_rest_goes_to_the_body():
    req = thinking_request(ThinkingSettings("off", "both", "low", 64), MESSAGES)
    assert req.messages[-1]["content"] == "What is 2 + 3? /no_think" and req.messages[0] == MESSAGES[0]
    assert req.template_variables == {"enable_thinking": False}
    # a budget is never sent with thinking off
    assert req.extra_body == {"chat_template_kwargs": {"enable_thinking": False}, "reasoning_effort": "low"}
    assert MESSAGES[-1]["content"] == "What is 2 + 3?\n"  # the caller's messages are left alone
    assert ThinkingSettings.of({"thinking": "on", "thinking_budget": 9}) == ThinkingSettings("on", "template", "", 9)
    with pytest.raises(ValueError, match="reasoning_effort 'max'"):
        thinking_request(ThinkingSettings("on", "template", "max"), MESSAGES)


@pytest.mark.parametrize("mode", ["completions", "prefill", "instructed"])
def test_every_continuation_mode_sends_the_settings(mode):
    server = ModelServer(base_url="http://127.0.0.1:1/v1", model="m", chat_template=TEMPLATE,
                         thinking=ThinkingSettings("on", "both", "high", 256))
    api, body = build_request_body(server, ContinuationSpec(MESSAGES, "<think>\nI add"), mode)
    extras = {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "high", "thinking_budget": 256}
    assert {k: v for k, v in body["extra_body"].items() if k in extras} == extras
    if mode == "completions":
        assert api == "completions"
        assert body["prompt"] == "<system>Be brief.<user>What is 2 + 3? /think<assistant><think><think>\nI add"
    else:
        user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        assert "What is 2 + 3? /think" in user
    if mode == "prefill":
        assert body["extra_body"]["continue_final_message"] is True
        assert body["extra_body"]["add_generation_prompt"] is False
    off = ModelServer(base_url="http://127.0.0.1:1/v1", model="m", chat_template=TEMPLATE,
                      thinking=ThinkingSettings("off"))
    _, body = build_request_body(off, ContinuationSpec(MESSAGES, "x"), mode)
    assert body["extra_body"]["chat_template_kwargs"] == {"enable_thinking": False}
    if mode == "completions":  # the template saw enable_thinking = false
        assert body["prompt"].endswith("<assistant><think></think>x")
