"""An LLM judge tags the functions of steps: the protocol (judges.tag_protocol) and the run of kind
"step-tags" through the run engine against the fake OpenAI-compatible server (tests/runs/fake_openai.py),
started through the one door every kind shares (runs.kinds.start)."""

from __future__ import annotations

import json

import pytest
from rest_framework import serializers
from rest_framework.test import APIClient

from annotation.models import Step, StepTag, Trace
from judges import tag_protocol
from judges.models import JudgeConfig, TagRun
from runs import engine, kinds
from runs.transport import Malformed
from tests.conftest import jsonl
from tests.runs.fake_openai import Fault

pytestmark = pytest.mark.django_db

STEPS = ["Ann has 3 apples and buys 2.", "My plan: add the two amounts.", "3 + 2 = 5",
         "Wait, let me check that again.", "The answer is 5."]


def test_the_prompt_names_the_eight_functions_and_numbers_the_steps():
    text = tag_protocol.prompt("How many?", STEPS)
    assert "Step 3: 3 + 2 = 5" in text and "- uncertainty_management: expresses doubt" in text
    schema = tag_protocol.schema(5)
    entry = schema["properties"]["steps"]["items"]["properties"]
    assert entry["step"]["enum"] == [1, 2, 3, 4, 5] and len(entry["tags"]["items"]["enum"]) == 8
    assert tag_protocol.max_tokens(5) == 256 + 5 * 32 and tag_protocol.max_tokens(1000) == 4096
    assert tag_protocol.max_tokens(5, 99) == 99


def test_an_answer_is_read_leniently_and_its_slips_are_warned():
    content = "Sure:\n```json\n" + json.dumps({"steps": [
        {"step": 2, "tags": ["Plan Generation", "plan-generation"]},
        {"step": 1, "tags": ["problem_setup", "musing"]},
        {"step": 1, "tags": ["fact_retrieval"]},
        {"step": 9, "tags": ["self_checking"]},
    ]}) + "\n```"
    answer = tag_protocol.parse(content, 5)
    assert answer.tags == {1: ["problem_setup"], 2: ["plan_generation"]}
    assert len(answer.warnings) == 3 and any('"musing"' in w for w in answer.warnings)


@pytest.mark.parametrize("content", ["", "no json here", '{"steps": 3}', '{"steps": [{"step": 1, "tags": ["x"]}]}'])
def test_an_answer_with_nothing_usable_is_malformed(content):
    with pytest.raises(Malformed):
        tag_protocol.parse(content, 3)


@pytest.fixture
def tagger(study, do_import, llm_judge):
    report = do_import(jsonl(
        {"kind": "problem", "problem_id": "p", "statement": "Ann has 3 apples and buys 2. How many?", "gold_answer": "5"},
        {"kind": "trace", "problem_id": "p", "model": "m", "trace_id": "t1", "steps": STEPS, "answer": "5"},
        {"kind": "trace", "problem_id": "p", "model": "m", "trace_id": "t2", "steps": STEPS[2:], "answer": "5"},
        {"kind": "trace", "problem_id": "p", "model": "m", "trace_id": "empty", "steps": [], "answer": "5"}))
    assert report.committed, report.rejected
    return llm_judge("tagger")


def run(study, owner, **data) -> TagRun:
    record = kinds.start("step-tags", study, data, owner)
    engine.run_inline(record.run)
    record.refresh_from_db()
    return record


def judge_tags(trace_id: str) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for index, tag in StepTag.objects.filter(kind="judge", step__trace__trace_id=trace_id).order_by(
            "step__index", "tag").values_list("step__index", "tag"):
        out.setdefault(index, []).append(tag)
    return out


def test_a_tagging_run_writes_the_judges_tags_through_the_engine(study, owner, server, tagger):
    record = run(study, owner, judge="tagger")
    assert judge_tags("t1") == {1: ["problem_setup"], 2: ["plan_generation"], 3: ["active_computation"],
                                4: ["self_checking", "uncertainty_management"], 5: ["final_answer_emission"]}
    assert judge_tags("t2") == {1: ["active_computation"], 2: ["self_checking", "uncertainty_management"],
                                3: ["final_answer_emission"]}
    assert (record.traces_tagged, record.tags_created, record.tags_removed) == (2, 10, 0)
    empty = Trace.objects.get(trace_id="empty").pk
    assert record.failures == {str(empty): "the trace has no steps; nothing to tag"}
    assert record.run.requests == 2 and record.job.status == "partial"
    # Again: the answers come from the cache, nothing changes; only the judge's tags are its to replace.
    Step.objects.filter(trace__trace_id="t1", index=1).get().tags.create(kind="human", annotator=owner, tag="fact_retrieval")
    again = run(study, owner, judge="tagger", trace_ids=["t1"])
    assert (again.traces_tagged, again.tags_created, again.tags_removed) == (1, 0, 0)
    assert again.run.cache_hits == 1 and server.count == 2
    assert StepTag.objects.filter(kind="human").count() == 1


def test_a_changed_answer_replaces_the_judges_tags(study, owner, server, tagger):
    run(study, owner, judge="tagger", trace_ids=["t2"])
    server.inject(Fault(content=json.dumps({"steps": [{"step": 1, "tags": ["fact_retrieval"]}]})))
    record = run(study, owner, judge="tagger", trace_ids=["t2"], force=True)
    assert judge_tags("t2") == {1: ["fact_retrieval"]}
    assert (record.tags_created, record.tags_removed) == (1, 4)


def test_only_an_llm_judge_tags(study, owner, tagger):
    mechanistic = JudgeConfig.objects.get(study=study, provider="mechanistic")
    with pytest.raises(serializers.ValidationError) as exc:
        kinds.start("step-tags", study, {"judge": mechanistic.name}, owner)
    assert "only an LLM judge" in str(exc.value.detail["judge"])
    with pytest.raises(serializers.ValidationError) as exc:
        kinds.start("step-tags", study, {"judge": "tagger", "trace_ids": ["nope"]}, owner)
    assert "trace_ids" in exc.value.detail


def test_the_rest_door_starts_it_too(study, owner, tagger):
    client = APIClient()
    client.force_authenticate(owner)
    response = client.post(f"/api/v1/studies/{study.pk}/runs/", {"kind": "step-tags", "judge": "tagger"},
                           format="json")
    assert response.status_code in (201, 202), response.content
    assert TagRun.objects.filter(judge=tagger).count() == 1
    bad = client.post(f"/api/v1/studies/{study.pk}/runs/", {"kind": "step-tags", "judge": "mechanistic"},
                      format="json")
    assert bad.status_code == 400 and "judge" in bad.content.decode()
