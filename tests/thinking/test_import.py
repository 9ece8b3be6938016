"""The import segments both channels: a real R1 trace imported three ways gives the same steps; thought
steps come first, know their channel and offsets; re-imports stay idempotent and a bad line rolls the
thought back with everything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotation.importing.pipeline import write_records
from annotation.importing.records import validate
from annotation.models import Step, StepLabel, Trace
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

DATA = Path(__file__).resolve().parent.parent / "data" / "thinking"
R1 = json.loads((DATA / "r1_qwen14b_problem_330_base_solution.json").read_text())
R1_PROBLEM = json.loads((DATA / "r1_qwen14b_problem_330_problem.json").read_text())
PROBLEM = {"kind": "problem", "problem_id": "math/330", "statement": R1_PROBLEM["problem"],
           "gold_answer": R1_PROBLEM["gt_answer"]}


def trace(**fields) -> dict:
    return {"kind": "trace", "problem_id": "math/330", "model": "r1-distill-qwen-14b", **fields}


def steps_of(trace_id: str) -> list[tuple]:
    t = Trace.objects.get(trace_id=trace_id)
    return [(s.index, s.channel, s.text) for s in t.steps.order_by("index")]


def check_offsets(t: Trace) -> None:
    for s in t.steps.all():
        assert t.channel_text(s.channel)[s.start:s.end] == s.text


def test_an_r1_trace_imported_three_ways_gives_the_same_steps(do_import):
    solution = R1["solution"]
    thought, _, answer = solution.partition("</think>")
    report = do_import(jsonl(
        PROBLEM,
        trace(trace_id="mid-thought", raw=solution),  # as the model wrote it: the prompt opened <think>
        trace(trace_id="inline", raw="<think>\n" + solution),  # as a raw log with the whole text
        trace(trace_id="separate", reasoning_content=thought, raw=answer),  # as a server's reasoning parser
    ))
    assert report.committed, report.rejected
    mid, inline, separate = steps_of("mid-thought"), steps_of("inline"), steps_of("separate")
    assert mid == inline == separate
    t = Trace.objects.get(trace_id="mid-thought")
    # A study's default thought segmenter, reasoning moves: the thought's 129 paragraphs, lead-ins ending in
    # ":" joined with the formula they introduce and paragraphs cut where "Wait", "Actually"... open a move.
    assert t.n_thought_steps == 103 and t.n_steps == len(mid) > 103
    assert [c for _, c, _ in mid] == ["thought"] * 103 + ["answer"] * (len(mid) - 103)
    assert mid[0][2].startswith("Okay, so I've got this math problem")
    for trace_id, form in (("mid-thought", "mid_thought"), ("inline", "tags"), ("separate", "field")):
        t = Trace.objects.get(trace_id=trace_id)
        assert t.meta["thought"]["form"] == form
        assert t.thought == thought.strip() and not t.thought_truncated
        assert (t.answer, t.answer_correct) == ("88572", True)
        check_offsets(t)


def test_the_study_picks_a_segmenter_per_channel(study, do_import):
    study.segmenter, study.thought_segmenter = "paragraphs", "lines"
    study.save()
    raw = "<think>a = 1\nb = 2\n\nc = 3</think>\nx = 1\ny = 2\n\nThe answer is 2."
    do_import(jsonl(PROBLEM, trace(trace_id="t", raw=raw)))
    assert steps_of("t") == [(1, "thought", "a = 1"), (2, "thought", "b = 2"), (3, "thought", "c = 3"),
                             (4, "answer", "x = 1\ny = 2")]
    check_offsets(Trace.objects.get(trace_id="t"))


def test_a_truncated_thought_is_kept_with_no_answer(do_import):
    cut = R1["solution"][:2000]
    do_import(jsonl(PROBLEM, trace(trace_id="cut", raw=cut, prompt_opens_thought=True),
                    trace(trace_id="cut-field", reasoning=cut, raw="", meta={"finish_reason": "length"})))
    for tid in ("cut", "cut-field"):
        t = Trace.objects.get(trace_id=tid)
        assert t.thought_truncated and t.meta["thought"]["truncated"]
        assert t.n_thought_steps == t.n_steps > 0 and not t.empty
        assert (t.answer, t.answer_correct) == ("", None)
    assert steps_of("cut") == steps_of("cut-field")


def test_labels_number_steps_over_both_channels(do_import, member):
    raw = "<think>Think one.\n\nThink two.</think>\n3 + 4 = 7\nThe answer is 7."
    labels = [{"step": 2, "verdict": "invalid", "annotator": member.username},
              {"step": 3, "verdict": "valid", "annotator": member.username}]
    report = do_import(jsonl(PROBLEM, trace(trace_id="t", raw=raw, labels=labels)))
    assert report.committed, report.rejected
    got = {(lab.step.channel, lab.step.text): lab.verdict for lab in StepLabel.objects.select_related("step")}
    assert got == {("thought", "Think two."): "invalid", ("answer", "3 + 4 = 7"): "valid"}
    bad = do_import(jsonl(PROBLEM, trace(trace_id="u", raw=raw, labels=[{**labels[0], "step": 4}])))
    assert bad.rejected == [{"line": 2, "reason": "label for step 4, but the trace has 3 steps"}]


def test_reimport_is_idempotent_and_the_hash_covers_the_channel(do_import):
    raw = "<think>7 * 2 = 14</think>\n3 + 4 = 7"
    first = do_import(jsonl(PROBLEM, trace(trace_id="t", raw=raw)))
    again = do_import(jsonl(PROBLEM, trace(trace_id="t", raw=raw)))
    assert (first.traces_created, again.traces_created, again.unchanged) == (1, 0, 2)
    # The same texts in other channels are other steps: refused under the same id.
    moved = do_import(jsonl(PROBLEM, trace(trace_id="t", raw="<think>3 + 4 = 7</think>\n7 * 2 = 14")))
    assert moved.rejected == [{"line": 2, "reason": 'trace_id "t" was imported before with different steps'}]
    # Without a trace_id, the id's hash tells the channels apart too.
    do_import(jsonl(PROBLEM, trace(raw="<think>a</think>b"), trace(raw="a\nb"), trace(raw="<think>a\nb</think>")))
    assert Trace.objects.count() == 4


def test_a_bad_line_rolls_back_the_thought_steps_too(do_import):
    report = do_import(jsonl(PROBLEM, trace(trace_id="t", raw="<think>a\n\nb</think>c"), trace(raw=5)))
    assert not report.committed
    assert (Trace.objects.count(), Step.objects.count()) == (0, 0)


def test_the_canonical_format_takes_every_name_of_the_separate_thought(do_import):
    for key in ("thought", "reasoning_content", "reasoning"):
        do_import(jsonl(PROBLEM, trace(trace_id=key, raw="The answer is 7.", **{key: "Let me see.\n\n3 + 4 = 7."})))
        assert steps_of(key)[:2] == [(1, "thought", "Let me see."), (2, "thought", "3 + 4 = 7.")]
    same = do_import(jsonl(PROBLEM, trace(trace_id="same", raw="7", thought="x", reasoning_content="x")))
    assert same.committed
    report = do_import(jsonl(PROBLEM, trace(raw="7", thought="x", reasoning="y")))
    assert report.rejected == [{"line": 2, "reason": '"thought" and "reasoning" both give the separate thought, '
                                                     "with different texts: keep one"}]


def test_given_steps_for_both_channels(do_import):
    raw = "<think>a = 1 so b = 2</think>\na = 1\nb = 2"
    report = do_import(jsonl(PROBLEM, trace(trace_id="t", raw=raw, thought_steps=["a = 1", "so b = 2"],
                                            steps=["a = 1", "b = 2"])))
    assert report.committed, report.rejected
    t = Trace.objects.get(trace_id="t")
    got = [(s.channel, s.text, s.start) for s in t.steps.order_by("index")]
    # The answer's "a = 1" is found after the thought, not inside it.
    assert got == [("thought", "a = 1", 0), ("thought", "so b = 2", 6), ("answer", "a = 1", raw.index("\na") + 1),
                   ("answer", "b = 2", raw.rindex("b = 2"))]
    check_offsets(t)
    empty = do_import(jsonl(PROBLEM, trace(raw=raw, thought_steps=["a", " "])))
    assert empty.rejected == [{"line": 2, "reason": '"thought_steps": step 2 is empty'}]


def test_eval_log_blocks_and_think_end_token_through_the_record(do_import):
    do_import(jsonl(
        PROBLEM,
        trace(trace_id="inspect", raw="The answer is 7.", thought_blocks=[
            {"text": "A summary.", "redacted": True, "summary": True}, {"text": "Plain."}]),
        trace(trace_id="lm-eval", raw="Let me add.<|end_of_thought|>The answer is 7.", think_end_token="<|end_of_thought|>"),
    ))
    t = Trace.objects.get(trace_id="inspect")
    assert t.thought == "A summary.\n\nPlain." and t.meta["thought"]["redacted"] is True
    assert t.meta["thought"]["blocks"][0]["summary"] is True
    assert steps_of("lm-eval")[0] == (1, "thought", "Let me add.")


def test_a_model_that_does_not_think_when_asked_is_flagged(do_import):
    regime = {"thinking": "on", "thought_tokens": 0}
    do_import(jsonl(PROBLEM, trace(trace_id="silent", raw="The answer is 7.", regime=regime),
                    trace(trace_id="thinks", raw="<think>hm</think>The answer is 7.", regime=regime),
                    trace(trace_id="plain", raw="The answer is 7.")))
    assert Trace.objects.get(trace_id="silent").meta["thought"]["missing"] is True
    assert "missing" not in Trace.objects.get(trace_id="thinks").meta["thought"]
    assert "thought" not in Trace.objects.get(trace_id="plain").meta


def test_generation_records_go_through_the_same_parser(study):
    """write_records (generation runs) with a completion's reasoning_content and an inline thought."""
    write_records(study, [validate(PROBLEM)])
    records = [validate(trace(trace_id="g1", raw="The answer is 7.", thought="3 + 4 = 7")),
               validate(trace(trace_id="g2", raw="<think>\n3 + 4 = 7\n</think>\nThe answer is 7."))]
    report = write_records(study, records)
    assert report.traces_created == 2
    assert steps_of("g1") == steps_of("g2") == [(1, "thought", "3 + 4 = 7")]


def test_the_bundled_r1_file_imports_from_the_command_line():
    """README's command: tests/data/thinking/r1_three_ways.jsonl, the same thought three ways plus a cut one."""
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("import_traces", str(DATA / "r1_three_ways.jsonl"), study="Thinking", json=True, stdout=out)
    report = json.loads(out.getvalue())
    assert (report["traces_created"], report["rejected"]) == (4, [])
    same = [steps_of(f"r1-330/{way}") for way in ("mid-thought", "inline", "separate")]
    assert same[0] == same[1] == same[2] and len(same[0]) > 103
    cut = Trace.objects.get(trace_id="r1-330/cut")
    assert cut.thought_truncated and cut.n_steps == cut.n_thought_steps > 0 and cut.answer == ""
    # The cut thought is the start of the whole one, step for step.
    assert steps_of("r1-330/cut")[:-1] == same[0][: cut.n_thought_steps - 1]


def test_the_regime_records_the_thought_tokens_the_server_reported(do_import):
    usage = {"completion_tokens": 160, "completion_tokens_details": {"reasoning_tokens": 120}}
    do_import(jsonl(
        PROBLEM,
        trace(trace_id="chat", raw="7", reasoning="3 + 4 = 7", usage=usage),
        trace(trace_id="responses", raw="7", reasoning="x", meta={"usage": {"output_tokens_details": {"reasoning_tokens": 9}}}),
        trace(trace_id="given", raw="7", reasoning="x", usage=usage, regime={"thought_tokens": 5}),
        trace(trace_id="unknown", raw="7", reasoning="x", usage={"completion_tokens": 3, "completion_tokens_details": None}),
    ))
    tokens = {t.trace_id: t.regime.get("thought_tokens") for t in Trace.objects.all()}
    assert tokens == {"chat": 120, "responses": 9, "given": 5, "unknown": None}
    assert Trace.objects.get(trace_id="chat").meta["usage"] == usage  # the record's own key is kept as well


def test_import_traces_chooses_the_thought_segmenter(tmp_path):
    """``import_traces --thought-segmenter``: this file's thoughts cut otherwise than the study's default."""
    from io import StringIO

    from django.core.management import call_command

    path = tmp_path / "one.jsonl"
    path.write_text(jsonl(PROBLEM, trace(trace_id="mid-thought", raw=R1["solution"])).decode())
    call_command("import_traces", str(path), study="Paragraphs", thought_segmenter="paragraphs", json=True,
                 stdout=StringIO())
    assert Trace.objects.get(trace_id="mid-thought").n_thought_steps == 129
    call_command("import_traces", str(path), study="Moves", json=True, stdout=StringIO())
    moves = Trace.objects.get(study__name="Moves", trace_id="mid-thought")
    assert moves.study.thought_segmenter == "moves" and moves.n_thought_steps == 103
