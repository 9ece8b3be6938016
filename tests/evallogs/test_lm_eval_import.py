"""``--format lm-eval``: a real lm-evaluation-harness samples file and the results JSON beside it
(tests/data/evallogs/lm-eval/, written by make_logs.py), one trace per (document, repeat)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from annotation.importing import regime
from annotation.models import Problem, Trace
from tests.conftest import jsonl
from tests.evallogs import make_logs
from tests.evallogs.conftest import LM_EVAL_RESULTS, LM_EVAL_SAMPLES

pytestmark = pytest.mark.django_db

RUN_TIME = LM_EVAL_RESULTS.name.removeprefix("results_").removesuffix(".json")


def lines(path: Path = LM_EVAL_SAMPLES) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def copy_run(tmp_path: Path, samples: list[dict] | bytes | None = None, results: dict | None = None) -> Path:
    """A copy of the committed run in tmp_path, with the samples and/or results replaced."""
    shutil.copyfile(LM_EVAL_RESULTS, tmp_path / LM_EVAL_RESULTS.name)
    if results is not None:
        (tmp_path / LM_EVAL_RESULTS.name).write_text(json.dumps(results))
    out = tmp_path / LM_EVAL_SAMPLES.name
    if samples is None:
        shutil.copyfile(LM_EVAL_SAMPLES, out)
    else:
        out.write_bytes(samples if isinstance(samples, bytes) else jsonl(*samples))
    return out


def by_doc(study) -> dict[int, Trace]:
    return {t.meta["lm_eval"]["doc_id"]: t for t in Trace.objects.filter(study=study).select_related("problem")}


def test_it_imports_one_trace_per_document(study, import_file):
    report = import_file(LM_EVAL_SAMPLES, "lm-eval")
    assert report.committed and report.rejected == []
    # Two lines per document (strict-match and flexible-extract) merge into one trace.
    assert len(lines()) == 8
    assert (report.problems_created, report.traces_created) == (4, 4)
    got = by_doc(study)
    for doc_id, problem in enumerate(make_logs.PROBLEMS):
        trace = got[doc_id]
        assert trace.trace_id == f"lm-eval/{make_logs.MODEL}/gsm8k_local/{RUN_TIME}/{doc_id}/0"
        assert trace.model == make_logs.MODEL
        assert trace.problem.problem_id == f"gsm8k_local/{doc_id}"
        assert trace.problem.statement == problem["question"]
        assert trace.problem.gold_answer == problem["answer"].rsplit("####", 1)[1].strip()
        assert trace.raw == "\n".join(problem["steps"]) + f"\n#### {problem['reply']}"
        assert [s.text for s in trace.steps.order_by("index")] == problem["steps"]
        assert trace.answer == problem["reply"]
        # exact_match of the task's first filter (strict-match) is the imported verdict.
        assert trace.answer_correct is (problem["id"] != "house-flip")
        assert trace.answer_origin == Trace.AnswerOrigin.IMPORTED
        assert trace.meta["lm_eval"]["verdict_from"] == "exact_match,strict-match"
        assert set(trace.meta["lm_eval"]["filters"]) == {"strict-match", "flexible-extract"}


def test_every_trace_carries_the_regime_from_the_results_file(study, import_file):
    import_file(LM_EVAL_SAMPLES, "lm-eval")
    results = json.loads(LM_EVAL_RESULTS.read_text())
    imported = by_doc(study)
    assert sorted(imported) == [0, 1, 2, 3]  # one trace per document: the loop below must not pass on an empty import
    for doc_id, trace in imported.items():
        r = trace.regime
        assert set(regime.REGIME_KEYS) <= set(r)
        assert r["model"] == make_logs.MODEL
        assert r["base_url_host"] == regime.host_of(results["config"]["model_args"]["base_url"])
        assert r["base_url_host"].startswith("127.0.0.1:")
        assert (r["api"], r["lm_eval_model"]) == ("chat", "local-chat-completions")
        assert (r["temperature"], r["max_tokens"], r["stop"], r["k"]) == (0.0, 256, ["Question:"], 1)
        # lm-eval 0.4's API models send seed 1234 unless model_args set one (checked on the wire end to end).
        assert r["seed"] == 1234
        assert (r["prompt_template"], r["prompt_template_version"], r["num_fewshot"]) == ("lm-eval:gsm8k_local", "1.0", 0)
        assert r["code_version"] == "lm_eval 0.4.13"
        assert (r["tool_access"], r["continuation"], r["repeat"]) == ("none", "none", 0)
        sent = f"Question: {make_logs.PROBLEMS[doc_id]['question']}\nAnswer:"
        assert r["messages_hash"] == regime.messages_hash([{"role": "user", "content": sent}])


def test_reimporting_the_run_changes_nothing(study, import_file):
    import_file(LM_EVAL_SAMPLES, "lm-eval")
    before = list(Trace.objects.order_by("pk").values_list("pk", "trace_id", "regime", "answer_correct"))
    again = import_file(LM_EVAL_SAMPLES, "lm-eval")
    assert again.committed and again.rejected == []
    assert (again.problems_created, again.traces_created, again.unchanged) == (0, 0, 8)
    assert list(Trace.objects.order_by("pk").values_list("pk", "trace_id", "regime", "answer_correct")) == before


def test_the_older_list_form_of_arguments_and_model_args_string_import_the_same(study, import_file, tmp_path):
    old = []
    for line in lines():
        args = line["arguments"]["gen_args_0"]
        # lm-eval before 0.4.3: "arguments": [[prompt, gen_kwargs]], the prompt as a plain string.
        line["arguments"] = [[args["arg_0"][0], args["arg_1"]]]
        old.append(line)
    results = json.loads(LM_EVAL_RESULTS.read_text())
    args = results["config"]["model_args"]
    results["config"]["model_args"] = ",".join(f"{k}={v}" for k, v in args.items())
    import_file(copy_run(tmp_path, old, results), "lm-eval")
    old_form = {d: (t.raw, t.answer_correct, t.regime) for d, t in by_doc(study).items()}
    Trace.objects.all().delete()
    Problem.objects.all().delete()
    import_file(LM_EVAL_SAMPLES, "lm-eval")
    assert old_form == {d: (t.raw, t.answer_correct, t.regime) for d, t in by_doc(study).items()}


def test_repeats_become_separate_traces_without_a_shared_verdict(study, import_file, tmp_path):
    # A copy of the run as if made with repeats: 2 (a second, different response per document).
    doubled = []
    for line in lines():
        line["resps"] = [[line["resps"][0][0], "I am not sure.\n#### 1"]]
        doubled.append(line)
    results = json.loads(LM_EVAL_RESULTS.read_text())
    results["configs"]["gsm8k_local"]["repeats"] = 2
    report = import_file(copy_run(tmp_path, doubled, results), "lm-eval")
    assert report.committed and report.traces_created == 8
    second = Trace.objects.get(trace_id=f"lm-eval/{make_logs.MODEL}/gsm8k_local/{RUN_TIME}/0/1")
    assert (second.regime["k"], second.regime["repeat"]) == (2, 1)
    # The metric scored the repeats together: each trace is checked against the gold answer instead.
    assert (second.answer, second.answer_correct, second.answer_origin) == ("1", False, Trace.AnswerOrigin.AUTOMATIC)


def test_a_samples_file_without_its_results_json_is_refused(study, import_file, tmp_path):
    alone = tmp_path / LM_EVAL_SAMPLES.name
    shutil.copyfile(LM_EVAL_SAMPLES, alone)
    report = import_file(alone, "lm-eval")
    assert not report.committed
    assert report.rejected == [
        {"line": 0, "reason": f"{LM_EVAL_RESULTS.name} (the run's results, written with the samples) is not beside "
                              f"{LM_EVAL_SAMPLES.name}"}
    ]
    assert not Trace.objects.exists()


def test_an_upload_is_refused_for_want_of_the_results_file(study, do_import):
    report = do_import(LM_EVAL_SAMPLES.read_bytes(), "lm-eval")
    assert not report.committed
    assert [r["line"] for r in report.rejected] == [0]
    assert "results_<time>.json beside it" in report.rejected[0]["reason"]


def test_a_non_utf8_line_is_refused_with_its_line_number(study, import_file, tmp_path):
    raw = LM_EVAL_SAMPLES.read_bytes().splitlines(keepends=True)
    raw[2] = b'{"doc_id": 2, "doc": "caf\xe9"}\n'
    report = import_file(copy_run(tmp_path, b"".join(raw)), "lm-eval")
    assert not report.committed
    assert report.rejected == [{"line": 3, "reason": "not valid UTF-8 (byte 25)"}]
    assert not Trace.objects.exists()


def test_a_file_that_is_not_an_lm_eval_log_is_refused_line_by_line(study, import_file, tmp_path):
    canonical = [
        {"kind": "problem", "problem_id": "p1", "statement": "2+2?", "gold_answer": "4"},
        {"kind": "trace", "problem_id": "p1", "model": "m", "raw": "2+2 = 4"},
        ["not", "an", "object"],
    ]
    report = import_file(copy_run(tmp_path, canonical), "lm-eval")
    assert not report.committed
    assert report.rejected == [
        {"line": 1, "reason": 'not an lm-eval sample line: missing "doc_id", "doc", "arguments", "resps"'},
        {"line": 2, "reason": 'not an lm-eval sample line: missing "doc_id", "doc", "arguments", "resps"'},
        {"line": 3, "reason": "not an lm-eval sample line: expected a JSON object, got list"},
    ]
    assert not Trace.objects.exists()


def test_a_results_file_that_is_not_one_is_refused(study, import_file, tmp_path):
    samples = copy_run(tmp_path, results={"hello": "world"})
    report = import_file(samples, "lm-eval")
    assert report.rejected == [{"line": 0, "reason": f'{LM_EVAL_RESULTS.name} is not an lm-eval results file (no "configs")'}]


def test_a_renamed_samples_file_takes_its_task_from_the_one_results_file_beside_it(study, import_file, tmp_path):
    copy_run(tmp_path)
    renamed = tmp_path / "my-run.jsonl"
    (tmp_path / LM_EVAL_SAMPLES.name).rename(renamed)
    report = import_file(renamed, "lm-eval")
    assert report.committed and report.traces_created == 4
    assert {t.trace_id.rsplit("/", 2)[0] for t in Trace.objects.all()} == {
        f"lm-eval/{make_logs.MODEL}/gsm8k_local/{RUN_TIME}"
    }


def test_a_think_end_token_in_model_args_splits_the_thought_off(study, import_file, tmp_path):
    """lm-eval's think_end_token: a response that still holds it is split there (thought, then answer);
    one without it is the answer alone, flagged: lm-eval cut the thought off before logging it."""
    samples = lines()
    first = samples[0]
    second = next(line for line in samples if line["doc_id"] != first["doc_id"])
    for line in samples:  # lm-eval writes one line per (document, filter): each carries the response
        if line["doc_id"] == first["doc_id"]:
            line["resps"] = [["Let me add.\n\nThat is all.</think>" + line["resps"][0][0]]]
    results = json.loads(LM_EVAL_RESULTS.read_text())
    results["config"]["model_args"] = {**results["config"]["model_args"], "think_end_token": "</think>"}
    report = import_file(copy_run(tmp_path, samples, results), "lm-eval")
    assert report.committed, report.rejected
    traces = by_doc(study)
    split = traces[first["doc_id"]]
    assert split.thought == "Let me add.\n\nThat is all." and split.n_thought_steps == 2
    assert split.meta["thought"]["form"] == "mid_thought"
    assert [s.channel for s in split.steps.order_by("index")][:3] == ["thought", "thought", "answer"]
    stripped = traces[second["doc_id"]]
    assert (stripped.thought, stripped.n_thought_steps) == ("", 0)
    assert stripped.meta["thought"] == {"form": "none", "blocks": [], "thought_not_logged": True}
