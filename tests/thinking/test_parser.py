"""reasonlib.thinking: every form of a reasoning model's output splits into the same thought and answer,
with offsets that hold (docs/import-format.md, "The thinking channel")."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlib import segmentation
from reasonlib.thinking import (
    THOUGHT_MARK,
    ReasoningBlock,
    ThinkingSplit,
    channel_steps_hash,
    parse_channels,
    split_thinking,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "thinking"


def check_offsets(raw: str, split: ThinkingSplit) -> None:
    """The invariants every split keeps, whatever the form."""
    assert len(split.answer_view) == len(raw)
    for b in split.blocks:
        assert split.thought[b.start:b.end].strip() == split.thought[b.start:b.end]
        if b.raw_start is not None:
            assert raw[b.raw_start:b.raw_end] == split.thought[b.start:b.end]
            # A thought block is never part of the answer.
            assert all(e <= b.raw_start or s >= b.raw_end for s, e in split.answer_spans)
    assert split.thought == "\n\n".join(split.thought[b.start:b.end] for b in split.blocks)
    for s, e in split.answer_spans:
        assert split.answer_view[s:e] == raw[s:e]
    assert split.answer == "\n\n".join(raw[s:e] for s, e in split.answer_spans)
    steps = parse_channels(raw, split, "lines", "paragraphs")
    for seg in steps.thought:
        assert split.thought[seg.start:seg.end] == seg.text
    for seg in steps.answer:
        assert raw[seg.start:seg.end] == seg.text


# -- the forms, one by one -----------------------------------------------------------------------------


def test_think_tags_split_thought_from_answer():
    raw = "<think>\nFirst, 16 - 3 - 4 = 9.\n\nWait, then 9 * 2 = 18.\n</think>\n\n9 * 2 = 18\nThe answer is 18."
    s = split_thinking(raw)
    assert (s.form, s.truncated) == ("tags", False)
    assert s.thought == "First, 16 - 3 - 4 = 9.\n\nWait, then 9 * 2 = 18."
    assert s.answer == "9 * 2 = 18\nThe answer is 18."
    check_offsets(raw, s)
    steps = parse_channels(raw, s, "lines", "paragraphs")
    assert [x.text for x in steps.thought] == ["First, 16 - 3 - 4 = 9.", "Wait, then 9 * 2 = 18."]
    assert [x.text for x in steps.answer] == ["9 * 2 = 18"]
    assert steps.final_answer == "18"


@pytest.mark.parametrize("open_tag, close_tag", [("<thinking>", "</thinking>"), ("<THINK>", "</THINK>"),
                                                 ("< think >", "< / think >")])
def test_thinking_tag_spellings(open_tag, close_tag):
    raw = f"{open_tag}Let me see.{close_tag}The answer is 4."
    s = split_thinking(raw)
    assert (s.form, s.thought, s.answer) == ("tags", "Let me see.", "The answer is 4.")
    check_offsets(raw, s)


def test_a_real_r1_trace_starts_mid_thought():
    """DeepSeek-R1-Distill-Qwen-14B on MATH 330: the prompt ends in "<think>\\n", the output only closes it."""
    record = json.loads((DATA / "r1_qwen14b_problem_330_base_solution.json").read_text())
    raw = record["solution"]
    assert record["prompt"].endswith("<think>\n") and "<think>" not in raw
    s = split_thinking(raw)
    assert (s.form, s.truncated) == ("mid_thought", False)
    head, _, tail = raw.partition("</think>")
    assert s.thought == head.strip() and s.answer == tail.strip()
    assert s.thought.startswith("Okay, so I've got this math problem")
    check_offsets(raw, s)
    steps = parse_channels(raw, s, "paragraphs", "paragraphs")
    assert len(steps.thought) > 30  # the thought is the long part
    assert steps.final_answer == record["answer"] == "88572"
    # A box inside the thought is not the model's answer: the answer is read from the answer channel only.
    assert "\\boxed{88572}" in s.thought
    gave_up = head + "</think>\n\nI give up."
    assert parse_channels(gave_up, split_thinking(gave_up), "paragraphs", "paragraphs").final_answer is None


def test_an_unclosed_thought_is_kept_and_truncated_with_no_answer():
    raw = "<think>\nLet me compute 16 - 3 = 13.\n\nThen 13 - 4 = 9, so the answer is \\boxed{9}"
    s = split_thinking(raw)
    assert (s.form, s.truncated, s.answer) == ("unclosed", True, "")
    assert s.thought.startswith("Let me compute") and s.thought.endswith("\\boxed{9}")
    check_offsets(raw, s)
    steps = parse_channels(raw, s, "lines", "paragraphs")
    # Nothing of a cut thought is the model's answer, not even a box in it.
    assert (len(steps.thought), steps.answer, steps.final_answer) == (2, [], None)


def test_text_with_no_tag_is_an_unclosed_thought_when_the_prompt_opened_it():
    raw = "Let me think about the ducks.\n\nThey lay 16"
    assert split_thinking(raw).form == "none"
    s = split_thinking(raw, opened=True)
    assert (s.form, s.truncated, s.thought, s.answer) == ("unclosed", True, raw, "")
    # ... and a closing tag still ends it.
    closed = split_thinking("Ducks.</think>The answer is 18.", opened=True)
    assert (closed.form, closed.truncated, closed.answer) == ("mid_thought", False, "The answer is 18.")


def test_answer_text_before_a_thought_that_is_cut_is_flagged():
    raw = "Sure.\n<think>\nhmm"
    s = split_thinking(raw)
    assert (s.truncated, s.answer, s.thought, s.flags["answer_before_cut"]) == (True, "Sure.", "hmm", True)


def test_a_real_separate_reasoning_field():
    """openai/gpt-oss-120b on GSM8K: the reasoning comes in its own field, the content is the answer."""
    record = json.loads((DATA / "gsm8k_gpt-oss-120b_head3.jsonl").read_text().splitlines()[0])
    message = record["raw_message"]
    s = split_thinking(message["content"], reasoning_field=message["reasoning"])
    assert (s.form, s.truncated) == ("field", False)
    assert s.thought == message["reasoning"].strip() and s.answer == message["content"].strip()
    assert s.blocks[0].source == "field" and s.blocks[0].raw_start is None
    check_offsets(message["content"], s)


def test_a_separate_field_comes_before_inline_blocks():
    raw = "<think>inline</think>The answer is 2."
    s = split_thinking(raw, reasoning_field="separate")
    assert s.thought == "separate\n\ninline"
    assert [b.source for b in s.blocks] == ["field", "tags"]
    assert s.forms == ("field", "tags") and s.form == "tags"
    check_offsets(raw, s)


def test_a_separate_thought_cut_before_any_answer_is_truncated():
    s = split_thinking("", reasoning_field="Let me think", cut=True)
    assert (s.truncated, s.answer, s.thought) == (True, "", "Let me think")
    assert not split_thinking("The answer is 1.", reasoning_field="Let me think", cut=True).truncated


def test_several_thought_blocks_stay_in_order():
    raw = "<think>one</think>Step A: x = 1\n<thinking>two</thinking>\nStep B: y = 2\n<think>three</think>The answer is 3."
    s = split_thinking(raw)
    assert s.thought == "one\n\ntwo\n\nthree"
    assert [s.thought[b.start:b.end] for b in s.blocks] == ["one", "two", "three"]
    assert s.answer == "Step A: x = 1\n\nStep B: y = 2\n\nThe answer is 3."
    check_offsets(raw, s)
    steps = parse_channels(raw, s, "markers", "sentences")
    # A marker step never runs across a hidden thought: clipped at the block.
    assert [x.text for x in steps.answer] == ["Step A: x = 1", "Step B: y = 2"]
    assert [x.text for x in steps.thought] == ["one", "two", "three"]


def test_an_empty_thought_block_is_recorded_not_kept():
    raw = "<think>\n\n</think>\n\nThe answer is 7."
    s = split_thinking(raw)
    assert (s.form, s.thought, s.answer, s.flags) == ("tags", "", "The answer is 7.", {"empty_thought": True})
    assert not s.has_thought


def test_a_stray_closing_tag_in_the_answer_is_hidden():
    raw = "<think>a</think>b</think>c"
    s = split_thinking(raw)
    assert (s.thought, s.answer, s.flags["stray_close_tags"]) == ("a", "b\n\nc", 1)
    check_offsets(raw, s)


HARMONY = ("<|channel|>analysis<|message|>We need 16 - 3 - 4 = 9 eggs.\n\nSo 9 * 2 = 18.<|end|>"
           "<|start|>assistant<|channel|>final<|message|>She makes $18.\nThe answer is 18.<|return|>")


def test_gpt_oss_harmony_channels():
    s = split_thinking(HARMONY)
    assert (s.form, s.truncated) == ("harmony", False)
    assert s.thought == "We need 16 - 3 - 4 = 9 eggs.\n\nSo 9 * 2 = 18."
    assert s.answer == "She makes $18.\nThe answer is 18."
    check_offsets(HARMONY, s)
    assert parse_channels(HARMONY, s, "lines", "paragraphs").final_answer == "18"


def test_harmony_starting_inside_the_analysis_message():
    raw = HARMONY.removeprefix("<|channel|>analysis<|message|>")
    s = split_thinking(raw)
    assert (s.form, s.thought, s.answer) == ("harmony", split_thinking(HARMONY).thought, "She makes $18.\nThe answer is 18.")
    check_offsets(raw, s)


def test_harmony_analysis_cut_by_max_tokens():
    raw = "<|channel|>analysis<|message|>We need 16 - 3"
    s = split_thinking(raw)
    assert (s.truncated, s.thought, s.answer) == (True, "We need 16 - 3", "")


def test_harmony_commentary_is_shown_and_tokens_may_be_dropped():
    raw = ("<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary to=functions.calc "
           "<|constrain|>json<|message|>{\"x\": 1}<|call|>")
    s = split_thinking(raw)
    assert (s.thought, s.answer) == ("think", "{\"x\": 1}")
    rendered = "analysisWe need 9 * 2 = 18.assistantfinalThe answer is 18."
    s = split_thinking(rendered)
    assert (s.form, s.thought, s.answer, s.flags) == ("harmony", "We need 9 * 2 = 18.", "The answer is 18.",
                                                      {"harmony_tokens_dropped": True})


def test_lm_eval_think_end_token():
    raw = "Let me add 2 and 2.<|end_of_thought|>\nThe answer is 4."
    s = split_thinking(raw, think_end="<|end_of_thought|>")
    assert (s.form, s.thought, s.answer) == ("think_end", "Let me add 2 and 2.", "The answer is 4.")
    check_offsets(raw, s)
    # An opening tag before it is not part of the thought.
    s = split_thinking("<think>hm<|end_of_thought|>4", think_end="<|end_of_thought|>")
    assert (s.thought, s.answer) == ("hm", "4")
    # lm-eval removes the thought before it logs a response: without the token there is none to find.
    for token in ("<|end_of_thought|>", "</think>"):
        s = split_thinking("The answer is 4.", think_end=token)
        assert (s.form, s.thought, s.answer, s.flags) == ("none", "", "The answer is 4.", {"thought_not_logged": True})
    s = split_thinking("<think>never closed", think_end="</think>")
    assert (s.truncated, s.thought) == (True, "never closed")


def test_inspect_reasoning_blocks_keep_redacted_and_summary_flags():
    blocks = [ReasoningBlock("A summary of hidden reasoning.", redacted=True, summary=True),
              ReasoningBlock("", redacted=True), ReasoningBlock("Plain reasoning.")]
    s = split_thinking("The answer is 4.", reasoning_blocks=blocks)
    assert s.form == "blocks" and s.thought == "A summary of hidden reasoning.\n\nPlain reasoning."
    assert [(b.redacted, b.summary) for b in s.blocks] == [(True, True), (False, False)]
    assert s.flags == {"redacted": True, "summary": True, "empty_blocks": 1}
    meta = s.meta()
    assert meta["redacted"] and meta["blocks"][0] == {"start": 0, "end": 30, "source": "blocks", "redacted": True,
                                                       "summary": True}


def test_free_text_before_a_reasoning_section_is_the_thought():
    raw = "Hmm, eggs.\n<Reasoning>\n16 - 3 - 4 = 9\n</Reasoning>\n<Answer>9</Answer>"
    s = split_thinking(raw)
    assert (s.form, s.thought) == ("pre_reasoning", "Hmm, eggs.")
    check_offsets(raw, s)
    steps = parse_channels(raw, s, "lines", "paragraphs")
    assert ([x.text for x in steps.answer], steps.final_answer) == (["16 - 3 - 4 = 9"], "9")
    # The old <think> wrapper around it is no part of the thought (the tags found it already).
    s = split_thinking("<think>Hmm</think>\n<Reasoning>\n1 + 1 = 2\n</Reasoning>")
    assert (s.form, s.thought) == ("tags", "Hmm")


def test_an_output_without_a_thought():
    raw = "16 - 3 - 4 = 9\n9 * 2 = 18\nThe answer is 18."
    s = split_thinking(raw)
    assert (s.form, s.thought, s.blocks, s.answer, s.answer_view) == ("none", "", (), raw, raw)
    assert s.meta() == {"form": "none", "blocks": []}
    # The answer's steps are exactly what the segmenter gives the whole text.
    steps = parse_channels(raw, s, "lines", "paragraphs")
    assert steps.answer == segmentation.parse_trace(raw, "lines").steps
    assert split_thinking(None).form == "none" and split_thinking("").answer_spans == ()


def test_an_unknown_segmenter_is_refused_even_without_an_answer():
    s = split_thinking("<think>cut")
    with pytest.raises(ValueError, match="unknown segmentation method"):
        parse_channels("<think>cut", s, "words", "paragraphs")


def test_the_steps_hash_marks_the_channel_and_keeps_old_hashes():
    answer = ["3 + 4 = 7", "7 * 2 = 14"]
    assert channel_steps_hash([], answer) == hashlib.sha256("\x1e".join(answer).encode()).hexdigest()
    assert channel_steps_hash(["3 + 4 = 7"], ["7 * 2 = 14"]) != channel_steps_hash([], answer)
    assert THOUGHT_MARK[0].isspace()  # so no stripped step text can start with it


# -- the same trace in every form ----------------------------------------------------------------------

_words = st.text(alphabet=st.sampled_from("abcdefgh 0123456789+-=*."), min_size=1, max_size=30).map(str.strip).filter(bool)
_paragraphs = st.lists(_words, min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(thought=_paragraphs, answer=st.lists(_words, min_size=1, max_size=4))
def test_inline_mid_thought_field_and_harmony_give_the_same_steps(thought, answer):
    t_text, a_text = "\n\n".join(thought), "\n".join(answer)
    forms = {
        "inline": split_thinking(f"<think>\n{t_text}\n</think>\n\n{a_text}"),
        "mid": split_thinking(f"{t_text}\n</think>\n\n{a_text}"),
        "field": split_thinking(a_text, reasoning_field=t_text),
        "harmony": split_thinking(f"<|channel|>analysis<|message|>{t_text}<|end|><|start|>assistant"
                                  f"<|channel|>final<|message|>{a_text}<|return|>"),
    }
    raws = {"inline": f"<think>\n{t_text}\n</think>\n\n{a_text}", "mid": f"{t_text}\n</think>\n\n{a_text}",
            "field": a_text, "harmony": f"<|channel|>analysis<|message|>{t_text}<|end|><|start|>assistant"
                                        f"<|channel|>final<|message|>{a_text}<|return|>"}
    got = set()
    for name, s in forms.items():
        check_offsets(raws[name], s)
        steps = parse_channels(raws[name], s, "lines", "paragraphs")
        got.add((s.thought, tuple(x.text for x in steps.thought), tuple(x.text for x in steps.answer)))
    assert len(got) == 1


_pieces = st.lists(st.one_of(
    _words, st.sampled_from(["<think>", "</think>", "<thinking>", "</THINKING>", "\n", "\n\n", "<|channel|>",
                             "analysis", "final", "<|message|>", "<|end|>", "<|start|>", "<Reasoning>", "</Reasoning>",
                             "<Answer>", "The answer is 5.", "\\boxed{3}"])), max_size=25)


@settings(max_examples=300, deadline=None)
@given(pieces=_pieces, opened=st.booleans(), field=st.one_of(st.none(), _words), cut=st.booleans())
def test_any_text_splits_with_offsets_that_hold(pieces, opened, field, cut):
    raw = "".join(pieces)
    s = split_thinking(raw, reasoning_field=field, opened=opened, cut=cut)
    assert s.form in ("none", "tags", "mid_thought", "unclosed", "field", "harmony", "pre_reasoning")
    check_offsets(raw, s)
    if s.truncated and not cut:
        assert s.form in ("unclosed", "harmony")


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(
    st.text(alphabet=st.sampled_from(list("ab <>|/\n\t x.:analysisfnt")), max_size=60),
    st.lists(st.sampled_from(["<<6*3=18>>", "<", " < ", "<|", "< think>", "</ Think >", "<reasoning>", "<ANSWER>",
                              "< /answer>", "text", "\n", "assistantfinal", "analysis", "18"]), max_size=8).map("".join),
), cut=st.booleans())
def test_a_text_without_any_thought_marker_splits_as_the_full_search_would(text, cut):
    """split_thinking's shortcut for texts with no thought marker and no "assistantfinal" (all answer, no
    search; a GSM8K "<<6*3=18>>" is no marker) gives exactly the split the search gives."""
    from reasonlib import thinking

    searched = thinking._split_by_search(text, None, None, None, False, cut)
    if thinking._ANY_MARKER_RE.search(text) is None and "assistantfinal" not in text:
        assert thinking._plain_answer(text) == searched
    assert split_thinking(text, cut=cut) == searched
    check_offsets(text, searched)


@pytest.mark.parametrize("raw", ["", "   ", "\n 18 \n", "Step 1: 9 * 2 = 18.\nA: 18", "analysis then the final answer",
                                 "He has 6*3 = <<6*3=18>>18 apples.\nA: 18", "a < b so 2 <3"])
def test_plain_answers_keep_their_split(raw):
    from reasonlib import thinking

    assert split_thinking(raw) == thinking._split_by_search(raw, None, None, None, False, False)
