"""runs.chat_template: a model's own chat template rendered as Hugging Face renders it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runs.chat_template import ChatTemplateError, render_chat, template_from_text

SMOLLM2 = (Path(__file__).parent / "data" / "smollm2_chat_template.jinja").read_text()
SMOLLM2_SYSTEM = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"


def test_smollm2_template_renders_chatml_with_its_default_system_prompt():
    text = render_chat(SMOLLM2, [{"role": "user", "content": "What is 2 + 2?"}])
    assert text == SMOLLM2_SYSTEM + "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n"


def test_smollm2_template_keeps_a_given_system_prompt_and_the_turns_in_order():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "2+2?"}]
    text = render_chat(SMOLLM2, messages, add_generation_prompt=False)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n")


def test_trim_blocks_and_lstrip_blocks_as_hugging_face_sets_them():
    template = "{% for m in messages %}\n    {{ m['content'] }}|\n{% endfor %}"
    assert render_chat(template, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]) == "    a|\n    b|\n"


def test_tojson_does_not_escape_html_and_generation_blocks_render_their_body():
    template = "{% for m in messages %}{% generation %}{{ m | tojson }}{% endgeneration %}{% endfor %}"
    text = render_chat(template, [{"role": "user", "content": "<b>é</b>"}])
    assert text == json.dumps({"role": "user", "content": "<b>é</b>"}, ensure_ascii=False)


def test_a_template_refusing_the_conversation_raises_its_message():
    template = "{% if messages[0]['role'] != 'user' %}{{ raise_exception('Conversation must start with user') }}{% endif %}"
    with pytest.raises(ChatTemplateError, match="Conversation must start with user"):
        render_chat(template, [{"role": "assistant", "content": "x"}])


def test_the_sandbox_is_immutable():
    with pytest.raises(ChatTemplateError):
        render_chat("{{ messages.append({'role': 'user'}) }}", [{"role": "user", "content": "x"}])


def test_bad_or_missing_templates_are_refused():
    with pytest.raises(ChatTemplateError, match="does not compile"):
        render_chat("{% for m in messages %}", [])
    with pytest.raises(ChatTemplateError, match="no chat template"):
        render_chat("  ", [])


def test_template_from_a_jinja_file_or_a_tokenizer_config():
    assert template_from_text(SMOLLM2).template == SMOLLM2
    config = {"chat_template": SMOLLM2, "eos_token": {"content": "<|im_end|>", "lstrip": False}, "bos_token": "<s>"}
    source = template_from_text(json.dumps(config))
    assert (source.template, source.eos_token, source.bos_token) == (SMOLLM2, "<|im_end|>", "")
    listed = {"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}
    assert template_from_text(json.dumps(listed)).template == "D"
    with pytest.raises(ChatTemplateError, match="no chat_template"):
        template_from_text(json.dumps({"model_max_length": 8192}))
