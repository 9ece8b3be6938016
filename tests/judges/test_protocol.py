"""The judge protocol: what the prompt shows in each mode and output mode,
and how answers are validated."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from judges import protocol
from judges.providers import TraceInput

TRACE = TraceInput(
    trace_pk=1, trace_id="t1", model="m", problem="Janet has 16 eggs and eats 3. How many are left?",
    gold_answer="13", answer="13", steps=("16 - 3 = 13", "She has 13 left."),
    skeleton=(("16 - 3 = 13", "16-3=13"), ("answer 13", "")),
)


def answer(*steps, **extra) -> str:
    return json.dumps({"steps": list(steps), **extra})


def test_the_skeleton_mode_prompt_shows_problem_gold_skeleton_and_numbered_steps():
    text = protocol.render_prompt("", TRACE, "skeleton", "json_schema")
    for part in ("Janet has 16 eggs", "Gold answer: 13", "S1. 16 - 3 = 13", "S2. answer 13", "Step 1: 16 - 3 = 13",
                 "Step 2: She has 13 left.", "skeleton_refs"):
        assert part in text
    assert '"$schema"' not in text and "JSON schema" not in text  # the server enforces it


def test_the_reference_free_prompt_hides_the_skeleton():
    text = protocol.render_prompt("", TRACE, "reference-free", "json_object")
    assert "S1." not in text and "skeleton_refs" not in text
    assert "Gold answer: 13" in text and "Step 2: She has 13 left." in text


@pytest.mark.parametrize("output_mode", ["json_object", "prompt"])
def test_without_json_schema_the_schema_travels_in_the_prompt(output_mode):
    text = protocol.render_prompt("", TRACE, "skeleton", output_mode)
    assert json.dumps(protocol.output_schema("skeleton", 2, 2)) in text


def test_response_formats_per_output_mode():
    assert protocol.response_format(TRACE, "skeleton", "json_schema")["json_schema"]["schema"]["required"] == ["steps"]
    # the json_object fallback carries the trace's schema (llama-cpp-python enforces it with a grammar)
    assert protocol.response_format(TRACE, "skeleton", "json_object") == {
        "type": "json_object", "schema": protocol.output_schema("skeleton", 2, 2)}
    assert protocol.response_format(TRACE, "skeleton", "prompt") is None


def test_the_schema_bounds_what_a_grammar_could_repeat():
    schema = protocol.trace_schema(TRACE, "skeleton")
    steps = schema["properties"]["steps"]
    assert (steps["minItems"], steps["maxItems"]) == (1, 2)
    step = steps["items"]["properties"]["step"]
    # enum spells 1..N out: llama-cpp-python's grammar ignores minimum/maximum on integers
    assert (step["minimum"], step["maximum"], step["enum"]) == (1, 2, [1, 2])
    assert steps["items"]["properties"]["reason"]["maxLength"] == protocol.REASON_MAX_CHARS
    refs = steps["items"]["properties"]["skeleton_refs"]
    assert refs["maxItems"] == 2 and refs["items"]["enum"] == [1, 2]
    assert schema["additionalProperties"] is False and steps["items"]["additionalProperties"] is False
    # reference-free: no skeleton references at all; a longer trace, a longer list
    free = protocol.output_schema("reference-free", 7)
    assert "skeleton_refs" not in free["properties"]["steps"]["items"]["properties"]
    assert free["properties"]["steps"]["maxItems"] == 7
    assert free["properties"]["steps"]["items"]["properties"]["step"]["enum"] == list(range(1, 8))


def test_max_tokens_is_derived_from_the_steps_unless_set():
    assert protocol.derived_max_tokens(3) == 256 + 3 * 128
    assert protocol.derived_max_tokens(1) < protocol.derived_max_tokens(2) < protocol.derived_max_tokens(10)
    assert protocol.derived_max_tokens(500) == protocol.MAX_TOKENS_CAP
    assert protocol.effective_max_tokens(None, 3) == 640
    assert protocol.effective_max_tokens(2048, 3) == 2048


def test_a_custom_template_renders_without_html_escaping():
    text = protocol.render_prompt("Q: {{ problem }} <{{ n_steps }}> {% for s in steps %}[{{ s.text }}]{% endfor %}",
                                  replace(TRACE, problem="a < b & c"), "skeleton", "json_schema")
    assert text.startswith("Q: a < b & c <2> [16 - 3 = 13][She has 13 left.]")


def test_a_broken_template_is_reported():
    assert "endfor" in protocol.template_error("{% for s in steps %}")
    assert protocol.template_error(protocol.DEFAULT_TEMPLATE) is None


def test_a_valid_answer_becomes_labels_in_step_order():
    out = protocol.parse_output(
        answer({"step": 2, "verdict": "Invalid", "confidence": 0.4, "reason": " off "},
               {"step": 1, "verdict": "valid", "skeleton_refs": [1, 1], "reason": "ok"}, answer_correct=False),
        n_steps=2, n_skeleton=2, mode="skeleton")
    assert [(lab.step, lab.verdict, lab.skeleton_refs, lab.confidence, lab.reason) for lab in out.labels] == [
        (1, "valid", [1], None, "ok"), (2, "invalid", [], 0.4, "off")]
    assert out.answer_correct is False and out.warnings == []


def test_steps_outside_the_trace_are_ignored_with_warnings_and_missing_steps_stay_unlabelled():
    out = protocol.parse_output(
        answer({"step": 0, "verdict": "valid"}, {"step": 1, "verdict": "valid", "skeleton_refs": [3]},
               {"step": 1, "verdict": "invalid"}, {"step": 9, "verdict": "valid"}),
        n_steps=3, n_skeleton=2, mode="skeleton")
    assert [lab.step for lab in out.labels] == [1] and out.labels[0].skeleton_refs == []
    assert out.warnings == ["step 0 is outside 1..3; ignored", "step 1: skeleton step 3 is outside 1..2; ignored",
                            "step 1 was labelled twice; kept the first", "step 9 is outside 1..3; ignored"]
    assert out.answer_correct is None


def test_reference_free_answers_keep_no_skeleton_refs():
    out = protocol.parse_output(answer({"step": 1, "verdict": "valid", "skeleton_refs": [1]}), 1, 0, "reference-free")
    assert out.labels[0].skeleton_refs == [] and out.warnings == []


@pytest.mark.parametrize("content", [
    'Sure! Here it is:\n```json\n{"steps": [{"step": 1, "verdict": "neutral"}]}\n```',
    'My verdicts: {"steps": [{"step": 1, "verdict": "neutral"}]} -- hope that helps {',
])
def test_json_is_found_inside_prose_and_fences(content):
    assert protocol.parse_output(content, 1, 0, "skeleton").labels[0].verdict == "neutral"


def test_a_confidence_outside_0_to_1_is_dropped_with_a_warning_and_the_verdict_kept():
    out = protocol.parse_output(answer({"step": 1, "verdict": "valid", "confidence": 7, "reason": "r"},
                                       {"step": 2, "verdict": "invalid", "confidence": 0.5, "reason": "r"}),
                                2, 0, "reference-free")
    assert [(lab.verdict, lab.confidence) for lab in out.labels] == [("valid", None), ("invalid", 0.5)]
    assert out.warnings == ["step 1: confidence 7 is outside 0..1; dropped"]


@pytest.mark.parametrize("content, message", [
    ("", "empty"),
    ("I think every step is fine.", "no JSON object"),
    ('{"steps": [{"step": 1, "verdict": "maybe"}]}', "steps.0.verdict"),
    ('{"steps": [{"step": 1, "verdict": "valid", "confidence": "sure"}]}', "steps.0.confidence"),
    ('{"verdicts": []}', "steps"),
    ('{"steps": "all good"}', "steps"),
])
def test_malformed_answers_are_refused(content, message):
    with pytest.raises(protocol.MalformedOutput, match=message):
        protocol.parse_output(content, 1, 0, "skeleton")
