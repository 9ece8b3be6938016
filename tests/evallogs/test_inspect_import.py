"""``--format inspect``: a real Inspect AI log (tests/data/evallogs/inspect.eval, written by make_logs.py)
read through inspect_ai's own reader, with the reasoning channel and the inference regime."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from inspect_ai import __version__ as inspect_version
from inspect_ai.log import read_eval_log, write_eval_log

from annotation.importing import regime
from annotation.models import Problem, Trace
from tests.conftest import jsonl
from tests.evallogs import make_logs
from tests.evallogs.conftest import INSPECT_LOG

pytestmark = pytest.mark.django_db

PROBLEMS = {p["id"]: p for p in make_logs.PROBLEMS}


def traces(study) -> dict[str, Trace]:
    return {t.trace_id: t for t in Trace.objects.filter(study=study).select_related("problem")}


def test_it_imports_one_trace_per_sample_and_epoch(study, import_file):
    report = import_file(INSPECT_LOG, "inspect")
    assert report.committed and report.rejected == []
    assert (report.problems_created, report.traces_created) == (4, 8)
    eval_id = read_eval_log(str(INSPECT_LOG), header_only=True).eval.eval_id
    got = traces(study)
    assert set(got) == {f"inspect/{eval_id}/{pid}/{epoch}" for pid in PROBLEMS for epoch in (1, 2)}
    for trace in got.values():
        pid = trace.problem.problem_id.split("/", 1)[1]
        problem = PROBLEMS[pid]
        assert trace.problem.problem_id == f"gsm8k-local/{pid}"
        assert trace.problem.statement == problem["question"]
        assert trace.problem.gold_answer == problem["answer"].rsplit("####", 1)[1].strip()
        assert trace.model == f"openai-api/{make_logs.SERVICE}/{make_logs.MODEL}"
        # The reasoning channel is the trace's thought, apart from the output, and a channel of steps.
        assert trace.thought == f"Let me work through '{pid}' carefully before answering."
        assert trace.thought not in trace.raw
        steps = [(s.channel, s.text) for s in trace.steps.order_by("index")]
        assert steps == [("thought", trace.thought)] + [("answer", text) for text in problem["steps"]]
        assert trace.meta["thought"]["form"] == "blocks"
        assert trace.answer == problem["reply"]
        # The scorer's verdict is the imported correctness: the fake model is wrong on house-flip only.
        assert trace.answer_correct is (pid != "house-flip")
        assert trace.answer_origin == Trace.AnswerOrigin.IMPORTED
        assert trace.meta["inspect"]["scores"] == {"match": "I" if pid == "house-flip" else "C"}


def test_every_trace_carries_the_regime_it_was_sampled_under(study, import_file):
    import_file(INSPECT_LOG, "inspect")
    imported = traces(study)
    assert len(imported) == 8  # 4 problems x 2 epochs: the loop below must not pass on an empty import
    for trace in imported.values():
        r = trace.regime
        pid = trace.problem.problem_id.split("/", 1)[1]
        assert set(regime.REGIME_KEYS) <= set(r)
        assert r["model"] == make_logs.MODEL  # as the server reported it
        assert r["provider_model"] == trace.model
        assert r["base_url_host"].startswith("127.0.0.1:")
        assert r["api"] == "chat"
        assert (r["temperature"], r["top_p"], r["seed"], r["max_tokens"], r["stop"]) == (0.0, 1.0, 7, 256, ["Question:"])
        assert r["k"] == 2 and r["epoch"] == int(trace.trace_id.rsplit("/", 1)[1])
        assert (r["tool_access"], r["continuation"]) == ("none", "none")
        assert r["code_version"].startswith("inspect_ai 0.3.285")
        assert r["prompt_template"] == "gsm8k_local:prompt_template+generate"
        # The hash of what the model was sent: the task's template around the question.
        sent = make_logs.TEMPLATE.format(prompt=PROBLEMS[pid]["question"])
        assert r["messages_hash"] == regime.messages_hash([{"role": "user", "content": sent}])


def test_reimporting_the_log_changes_nothing(study, import_file):
    import_file(INSPECT_LOG, "inspect")
    before = list(Trace.objects.order_by("pk").values_list("pk", "trace_id", "thought", "regime"))
    again = import_file(INSPECT_LOG, "inspect")
    assert again.committed and again.rejected == []
    assert (again.problems_created, again.traces_created, again.unchanged) == (0, 0, 12)
    assert list(Trace.objects.order_by("pk").values_list("pk", "trace_id", "thought", "regime")) == before


def test_an_upload_without_a_file_name_reads_the_same(study, do_import):
    # The API and web uploads hand the pipeline a stream; the reader gets a temporary copy.
    report = do_import(INSPECT_LOG.read_bytes(), "inspect")
    assert report.committed and report.traces_created == 8


def test_the_json_layout_of_the_same_log_is_the_same_traces(study, import_file, tmp_path):
    # Written by inspect_ai itself from the .eval log: same eval_id, so the same trace ids.
    json_log = tmp_path / "inspect.json"
    write_eval_log(read_eval_log(str(INSPECT_LOG)), str(json_log))
    first = import_file(json_log, "inspect")
    assert first.committed and first.traces_created == 8
    assert all(t.thought for t in Trace.objects.filter(study=study))
    again = import_file(INSPECT_LOG, "inspect")
    assert (again.traces_created, again.unchanged) == (0, 12)


def _eval_copy(out: Path, edit) -> Path:
    """The committed .eval log with some of its zip members edited: ``edit(name, data) -> data``."""
    with zipfile.ZipFile(INSPECT_LOG) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, edit(info.filename, src.read(info.filename)))
    return out


def _eval_copy_with_version(tmp_path: Path, version: int) -> Path:
    """The committed .eval log with its format version edited (header and journal start)."""

    def edit(name: str, data: bytes) -> bytes:
        if name not in ("header.json", "_journal/start.json"):
            return data
        doc = json.loads(data)
        doc["version"] = version
        return json.dumps(doc).encode()

    return _eval_copy(tmp_path / f"v{version}.eval", edit)


def _json_copy_with_version(tmp_path: Path, version: int) -> Path:
    out = tmp_path / f"v{version}.json"
    write_eval_log(read_eval_log(str(INSPECT_LOG)), str(out))
    doc = json.loads(out.read_text())
    doc["version"] = version
    out.write_text(json.dumps(doc))
    return out


def test_a_log_of_a_newer_format_version_is_refused_with_the_reason(study, import_file, tmp_path):
    eval_v3, json_v3 = _eval_copy_with_version(tmp_path, 3), _json_copy_with_version(tmp_path, 3)
    # What inspect_ai 0.3.285 itself does: the .eval reader returns the header without checking the
    # version; the .json reader refuses it ("Unable to read version 3 of log format.").
    assert read_eval_log(str(eval_v3), header_only=True).version == 3
    with pytest.raises(ValueError):
        read_eval_log(str(json_v3), header_only=True)
    for path, reason in (
        (eval_v3, f"Inspect log format version 3: inspect_ai {inspect_version} reads versions up to 2"),
        (json_v3, "Unable to read version 3 of log format."),
    ):
        report = import_file(path, "inspect")
        assert not report.committed
        assert len(report.rejected) == 1 and report.rejected[0]["line"] == 0
        assert reason in report.rejected[0]["reason"]
    assert not Trace.objects.exists() and not Problem.objects.exists()


def test_an_older_format_version_is_read_as_the_library_upgrades_it(study, import_file, tmp_path):
    # inspect_ai reads version-1 JSON logs (and reports them as version 2).
    report = import_file(_json_copy_with_version(tmp_path, 1), "inspect")
    assert report.committed and report.traces_created == 8


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\xff\xfe\x00\x01 not text \x80\x81", id="not-utf8"),
        pytest.param(jsonl({"kind": "problem", "problem_id": "p", "statement": "s", "gold_answer": "1"}), id="jsonl"),
        pytest.param(b'{"status": "success", "eval": {"task": "x"}}', id="json-not-a-log"),
        pytest.param(b"PK\x03\x04 a truncated zip", id="broken-zip"),
    ],
)
def test_a_file_that_is_not_an_inspect_log_is_refused(study, do_import, data):
    report = do_import(data, "inspect")
    assert not report.committed
    assert [r["line"] for r in report.rejected] == [0]
    assert report.rejected[0]["reason"].startswith((f"not an Inspect log that inspect_ai {inspect_version} can read (",
                                                    "not a readable .eval (zip) file ("))
    assert not Trace.objects.exists()


def test_a_sample_the_reader_cannot_load_is_refused_with_its_position(study, import_file, tmp_path):
    broken = _eval_copy(tmp_path / "broken.eval",
                        lambda name, data: b"{not json" if name == "samples/robe-fiber_epoch_1.json" else data)
    report = import_file(broken, "inspect")
    assert not report.committed
    # Samples are read in the header's order (duck-eggs epochs 1 and 2, then robe-fiber): the third.
    assert [r["line"] for r in report.rejected] == [3]
    assert report.rejected[0]["reason"].startswith("sample 3: unreadable (")
    assert not Trace.objects.exists()


def test_the_cli_imports_a_log(tmp_path, db):
    from tests.test_import_cli import run

    status, out = run(INSPECT_LOG, study="Inspect study", format="inspect", json=True)
    assert status == 0
    assert json.loads(out)["traces_created"] == 8
