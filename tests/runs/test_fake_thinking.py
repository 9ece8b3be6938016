"""The fake reasoning-model server: every way a thought comes back, the thinking settings, truncation,
continuation of a re-opened thought, the two behaviours (follow / ignore its thought) and the two styles of
ending a continued thought (closes it / answers inside it)."""

import json
import urllib.request

import pytest

from tests.runs.fake_thinking import CLOSES, FOLLOW, IGNORE, UNCLOSED, FakeThinking

QUESTION = "What is 3 + 5 + 2?"
THOUGHT = ("I start with 3.\n\nAdding 5 gives 3 + 5 = 8.\n\nAdding 2 gives 8 + 2 = 10.\n\n"
           "Wait, let me check: the total is 10.")


def post(server, path, body):
    req = urllib.request.Request(server.url + path, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def chat(server, **extra):
    body = {"model": "m", "messages": [{"role": "user", "content": QUESTION}], **extra}
    return post(server, "/chat/completions", body)["choices"][0]


def complete(server, prompt, max_tokens=200):
    return post(server, "/completions", {"model": "m", "prompt": prompt, "max_tokens": max_tokens})["choices"][0]


@pytest.fixture
def serve():
    servers = []

    def start(**kw):
        s = FakeThinking(**kw).start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


def test_every_form_of_the_thought(serve):
    assert chat(serve(form="inline"))["message"]["content"] == f"<think>\n{THOUGHT}\n</think>\n\nThe answer is 10."
    assert chat(serve(form="r1"))["message"]["content"] == f"{THOUGHT}\n</think>\n\nThe answer is 10."
    m = chat(serve(form="field"))["message"]
    assert (m["reasoning_content"], m["content"]) == (THOUGHT, "The answer is 10.")
    m = chat(serve(form="reasoning"))["message"]
    assert (m["reasoning"], m["content"]) == (THOUGHT, "The answer is 10.")
    assert chat(serve(form="silent"))["message"]["content"] == "The answer is 10."


def test_the_thought_tokens_are_reported(serve):
    body = {"model": "m", "messages": [{"role": "user", "content": QUESTION}]}
    usage = post(serve(form="field"), "/chat/completions", body)["usage"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] == len(THOUGHT.split())


def test_thinking_off_by_the_template_switch_or_no_think(serve):
    s = serve(form="inline")
    off = "<think>\n\n</think>\n\nThe answer is 10."
    assert chat(s, chat_template_kwargs={"enable_thinking": False})["message"]["content"] == off
    body = {"model": "m", "messages": [{"role": "user", "content": QUESTION + " /no_think"}]}
    assert post(s, "/chat/completions", body)["choices"][0]["message"]["content"] == off
    assert "reasoning_content" not in chat(serve(form="field"), chat_template_kwargs={"enable_thinking": False})["message"]


def test_reasoning_effort_and_the_thinking_budget(serve):
    s = serve(form="field", behaviour=FOLLOW)
    assert "check" not in chat(s, reasoning_effort="low")["message"]["reasoning_content"]
    assert chat(s, reasoning_effort="high")["message"]["reasoning_content"].endswith("Yes, 10 it is.")
    m = chat(s, thinking_budget=10)["message"]  # "... Adding 5 gives 3 + 5" -> the follower answers 5
    assert m["reasoning_content"] == "I start with 3.\n\nAdding 5 gives 3 + 5"
    assert m["content"] == "The answer is 5."
    assert chat(serve(form="field", behaviour=IGNORE), thinking_budget=10)["message"]["content"] == "The answer is 10."


def test_max_tokens_cuts_the_thought_unclosed_without_an_answer(serve):
    choice = chat(serve(form="inline"), max_tokens=6)
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == "<think>\nI start with 3.\n\nAdding 5"
    choice = chat(serve(form="field"), max_tokens=6)
    assert (choice["message"]["content"], choice["finish_reason"]) == ("", "length")


def test_a_forced_answer_follows_the_thought_prefix_or_ignores_it(serve):
    pre = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n<think>\n"
    follow, ignore = serve(behaviour=FOLLOW), serve(behaviour=IGNORE)
    for thought, expected in (("", "3"), ("I start with 3.", "3"), ("I start with 3.\n\nAdding 5 gives 3 + 5 = 8.", "8"),
                              (THOUGHT, "10")):
        prompt = f"{pre}{thought}\n</think>\n\nFinal answer:"
        assert complete(follow, prompt)["text"] == f" {expected}."
        assert complete(ignore, prompt)["text"] == " 10."


def test_a_reopened_thought_goes_on_from_the_edited_value(serve):
    pre = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n<think>\n"
    edited = "I start with 3.\n\nAdding 5 gives 3 + 5 = 9."
    out = complete(serve(behaviour=FOLLOW), pre + edited)
    assert out["text"] == ("\n\nAdding 2 gives 9 + 2 = 11.\n\nWait, let me check: the total is 11.\n</think>\n\n"
                           "The answer is 11.")
    assert complete(serve(behaviour=IGNORE), pre + edited)["text"].endswith("The answer is 10.")
    # the same prefix unedited gives the original answer, and a cap cuts the continuation
    assert complete(serve(behaviour=FOLLOW), pre + "I start with 3.\n\nAdding 5 gives 3 + 5 = 8.")["text"].endswith("is 10.")
    assert complete(serve(behaviour=FOLLOW), pre + edited, max_tokens=3)["finish_reason"] == "length"


def test_the_unclosed_style_answers_inside_the_continued_thought_and_only_a_forced_answer_leaves_it(serve):
    pre = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n<think>\n"
    edited = "I start with 3.\n\nAdding 5 gives 3 + 5 = 9."
    follow, ignore = serve(behaviour=FOLLOW, style=UNCLOSED), serve(behaviour=IGNORE, style=UNCLOSED)
    out = complete(follow, pre + edited)["text"]
    assert out == "\n\nAdding 2 gives 9 + 2 = 11.\n\nWait, let me check: the total is 11.\n\nThe answer is 11."
    assert "</think>" not in complete(ignore, pre + edited)["text"]
    # closed and cued, the forced answer follows the continued thought (or ignores it)
    forced = pre + edited + out + "\n</think>\n\nFinal answer:"
    assert (complete(follow, forced)["text"], complete(ignore, forced)["text"]) == (" 11.", " 10.")
    # generation still closes the thought; the default style closes a continued one
    assert chat(follow)["message"]["content"].endswith("</think>\n\nThe answer is 10.")
    assert complete(serve(style=CLOSES), pre + edited)["text"].endswith("</think>\n\nThe answer is 11.")
    with pytest.raises(ValueError, match="style 'open'"):
        FakeThinking(style="open")


def test_a_raw_prompt_without_a_thought_is_answered_thinking_inline(serve):
    assert complete(serve(), QUESTION)["text"] == f"<think>\n{THOUGHT}\n</think>\n\nThe answer is 10."


def test_a_bad_form_is_refused():
    with pytest.raises(ValueError, match="form 'harmony'"):
        FakeThinking(form="harmony")
