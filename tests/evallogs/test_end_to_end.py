"""make_logs.py end to end: today's Inspect AI and lm-eval run against the fake server and write logs
that the importers read, with regimes true to the requests the server received. This is what keeps
the committed logs honest when either tool changes its format. Runs both tools (about 20 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from annotation.importing import regime
from annotation.importing.pipeline import import_stream
from annotation.models import Trace
from tests.evallogs import make_logs

pytestmark = pytest.mark.django_db

SCRIPT = Path(make_logs.__file__)


@pytest.fixture(scope="module")
def fresh_logs(tmp_path_factory) -> tuple[Path, dict[str, list[dict]]]:
    out = tmp_path_factory.mktemp("evallogs")
    requests = out / "requests.json"
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out / "logs"), "--requests", str(requests)],
                          capture_output=True, text=True, env=env, cwd=SCRIPT.parents[2], timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return out / "logs", json.loads(requests.read_text())


def _import(study, path: Path, fmt: str):
    with path.open("rb") as fh:
        return import_stream(study, fh, fmt)


def test_fresh_inspect_log_imports_with_the_regime_it_was_sent_with(study, fresh_logs):
    logs, requests = fresh_logs
    report = _import(study, logs / "inspect.eval", "inspect")
    assert report.committed and report.rejected == []
    assert (report.problems_created, report.traces_created) == (4, 8)
    traces = list(Trace.objects.filter(study=study))
    assert len(requests["inspect"]) == 8
    sent = {regime.messages_hash(r["messages"]): r for r in requests["inspect"]}
    for trace in traces:
        assert trace.thought.startswith("Let me work through")
        wire = sent[trace.regime["messages_hash"]]  # the hash is the hash of what was sent
        assert (trace.regime["seed"], trace.regime["temperature"], trace.regime["max_tokens"], trace.regime["stop"]) == (
            wire["seed"], wire["temperature"], wire["max_tokens"], wire["stop"])
    assert sorted(t.answer_correct for t in traces) == [False, False] + [True] * 6
    assert _import(study, logs / "inspect.eval", "inspect").traces_created == 0


def test_fresh_lm_eval_run_imports_with_the_regime_it_was_sent_with(study, fresh_logs):
    logs, requests = fresh_logs
    samples = next((logs / "lm-eval").glob("samples_gsm8k_local_*.jsonl"))
    report = _import(study, samples, "lm-eval")
    assert report.committed and report.rejected == []
    assert (report.problems_created, report.traces_created) == (4, 4)
    assert len(requests["lm-eval"]) == 4
    sent = {regime.messages_hash(r["messages"]): r for r in requests["lm-eval"]}
    traces = list(Trace.objects.filter(study=study))
    for trace in traces:
        wire = sent[trace.regime["messages_hash"]]
        assert trace.regime["model"] == wire["model"]
        assert (trace.regime["seed"], trace.regime["temperature"], trace.regime["max_tokens"], trace.regime["stop"]) == (
            wire["seed"], wire["temperature"], wire["max_tokens"], wire["stop"])
    assert sorted(t.answer_correct for t in traces) == [False, True, True, True]
