"""Produce real eval logs for the importer tests by running the tools themselves.

Starts a small fake OpenAI-compatible server on 127.0.0.1 (a thread) that
answers chat completions with a short chain of thought and ``#### <number>``
(and, for Inspect, a separate ``reasoning_content`` channel), then runs

* Inspect AI (``inspect_ai.eval`` with an ``openai-api/...`` model whose base
  URL is the fake server) over a local ``MemoryDataset``, two epochs, and
* lm-evaluation-harness (``lm_eval`` CLI, ``local-chat-completions``,
  ``--apply_chat_template --log_samples``) over a custom GSM8K-like task whose
  dataset is a local JSONL file,

and copies the logs those tools wrote into OUT (default: tests/data/evallogs/):
``inspect.eval`` and ``lm-eval/samples_gsm8k_local_<time>.jsonl`` with the
``results_<time>.json`` beside it. Nothing is downloaded: the dataset is local
and HF_DATASETS_OFFLINE / HF_HUB_OFFLINE are set for the lm-eval run.

    .venv/bin/python tests/evallogs/make_logs.py [OUT] [--requests FILE]

One problem is answered wrongly on purpose, so the logs hold both verdicts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "tiny-math"
SERVICE = "fake"  # Inspect's openai-api/<service>/<model>: reads FAKE_API_KEY
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "data" / "evallogs"

# GSM8K-like problems: (id, question, reference solution with "#### N", the
# fake model's chain of thought, the number it answers).
PROBLEMS: list[dict[str, Any]] = [
    {
        "id": "duck-eggs",
        "question": "Janet's ducks lay 16 eggs per day. She eats 3 for breakfast and bakes muffins with 4. "
        "She sells the rest at $2 per egg. How many dollars does she make every day?",
        "answer": "She has 16 - 3 - 4 = <<16-3-4=9>>9 eggs left.\nShe makes 9 * 2 = $<<9*2=18>>18.\n#### 18",
        "steps": ["Eggs left: 16 - 3 - 4 = 9.", "Income: 9 * 2 = 18 dollars."],
        "reply": "18",
    },
    {
        "id": "robe-fiber",
        "question": "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total?",
        "answer": "White fiber: 2 / 2 = <<2/2=1>>1 bolt.\nTotal: 2 + 1 = <<2+1=3>>3 bolts.\n#### 3",
        "steps": ["White fiber: 2 / 2 = 1 bolt.", "Total: 2 + 1 = 3 bolts."],
        "reply": "3",
    },
    {
        "id": "house-flip",
        "question": "Josh buys a house for $80,000 and puts in $50,000 in repairs. This increased the value "
        "of the house by 150%. How much profit did he make?",
        "answer": "Cost: 80000 + 50000 = <<80000+50000=130000>>130000.\n"
        "New value: 80000 * 2.5 = <<80000*2.5=200000>>200000.\n"
        "Profit: 200000 - 130000 = <<200000-130000=70000>>70000.\n#### 70000",
        # Wrong on purpose (adds the 150% to the cost, not the price).
        "steps": ["Cost: 80000 + 50000 = 130000.", "New value: 130000 * 1.5 = 195000.",
                  "Profit: 195000 - 130000 = 65000."],
        "reply": "65000",
    },
    {
        "id": "sprints",
        "question": "James runs 3 sprints 3 times a week, 60 meters each sprint. How many meters a week?",
        "answer": "Sprints: 3 * 3 = <<3*3=9>>9.\nMeters: 9 * 60 = <<9*60=540>>540.\n#### 540",
        "steps": ["Sprints a week: 3 * 3 = 9.", "Meters: 9 * 60 = 540."],
        "reply": "540",
    },
]

TEMPLATE = "Solve the problem step by step, then give the answer as '#### <number>'.\n\n{prompt}"


def _problem_for(text: str) -> dict[str, Any] | None:
    return next((p for p in PROBLEMS if p["question"] in text), None)


class _Handler(BaseHTTPRequestHandler):
    server: _FakeServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # keep the tools' output readable

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "test"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        messages = body.get("messages") or []
        text = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
        problem = _problem_for(text)
        if problem is None:
            content, reasoning = "I cannot tell which problem this is.\n#### 0", "No problem matched."
        else:
            content = "\n".join(problem["steps"]) + f"\n#### {problem['reply']}"
            reasoning = f"Let me work through '{problem['id']}' carefully before answering."
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if self.server.reasoning:
            message["reasoning_content"] = reasoning
        self.server.requests.append(body)
        self._send(200, {
            "id": f"chatcmpl-{len(self.server.requests)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": MODEL,
            "system_fingerprint": "fake-1",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(text.split()), "completion_tokens": len(content.split()),
                      "total_tokens": len(text.split()) + len(content.split())},
        })


class _FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, reasoning: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.reasoning = reasoning
        self.requests: list[dict[str, Any]] = []


@contextmanager
def fake_server(*, reasoning: bool = True) -> Iterator[_FakeServer]:
    """A fake OpenAI-compatible server on a free port of 127.0.0.1; ``server.url`` is its /v1 base URL."""
    server = _FakeServer(reasoning)
    thread = threading.Thread(target=server.serve_forever, name="fake-openai", daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}/v1"  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --- Inspect AI ----------------------------------------------------------------


def run_inspect(base_url: str, out: Path) -> Path:
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import GenerateConfig
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate, prompt_template

    dataset = MemoryDataset(
        [Sample(id=p["id"], input=p["question"], target=p["answer"].rsplit("####", 1)[1].strip()) for p in PROBLEMS],
        name="gsm8k-local",
    )
    task = Task(
        name="gsm8k_local",
        dataset=dataset,
        solver=[prompt_template(TEMPLATE), generate()],
        scorer=match(location="end", numeric=True),
        epochs=2,
        config=GenerateConfig(temperature=0.0, top_p=1.0, seed=7, max_tokens=256, stop_seqs=["Question:"]),
    )
    os.environ[f"{SERVICE.upper()}_API_KEY"] = "not-a-secret"
    with tempfile.TemporaryDirectory() as log_dir:
        logs = inspect_eval(task, model=f"openai-api/{SERVICE}/{MODEL}", model_base_url=base_url, log_dir=log_dir,
                            log_format="eval", display="none", max_connections=2)
        log = logs[0]
        if log.status != "success":
            raise RuntimeError(f"Inspect run failed: {log.status} {log.error}")
        out.mkdir(parents=True, exist_ok=True)
        target = out / "inspect.eval"
        shutil.copyfile(log.location, target)
    return target


# --- lm-evaluation-harness ----------------------------------------------------------

TASK_YAML = """\
task: gsm8k_local
dataset_path: json
dataset_kwargs:
  data_files:
    test: problems.jsonl
test_split: test
output_type: generate_until
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_target: "{{answer.split('####')[-1].strip()}}"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore: [",", "\\\\$", "(?s).*#### ", "\\\\.$"]
generation_kwargs:
  until: ["Question:"]
  do_sample: false
  temperature: 0.0
  max_gen_toks: 256
repeats: 1
num_fewshot: 0
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: take_first
  - name: flexible-extract
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{2,})|(-?[0-9]+)"
      - function: take_first
metadata:
  version: 1.0
"""


def run_lm_eval(base_url: str, out: Path) -> Path:
    with tempfile.TemporaryDirectory() as work_dir:
        work = Path(work_dir)
        (work / "tasks").mkdir()
        (work / "tasks" / "gsm8k_local.yaml").write_text(TASK_YAML)
        # The data file is named relative to the working directory, so no temp path lands in the committed logs.
        (work / "problems.jsonl").write_text(
            "".join(json.dumps({"id": p["id"], "question": p["question"], "answer": p["answer"]}) + "\n"
                    for p in PROBLEMS)
        )
        env = {
            **os.environ,
            "HF_DATASETS_OFFLINE": "1",
            "HF_HUB_OFFLINE": "1",
            "HF_HOME": str(work / "hf"),  # the json builder's cache stays in the temp dir
            "TOKENIZERS_PARALLELISM": "false",
        }
        cmd = [
            sys.executable, "-m", "lm_eval",
            "--model", "local-chat-completions",
            "--model_args", f"model={MODEL},base_url={base_url}/chat/completions,num_concurrent=2,max_retries=1,"
                            "tokenized_requests=False",
            "--tasks", "gsm8k_local",
            "--include_path", "tasks",
            "--apply_chat_template",
            "--log_samples",
            "--seed", "7",
            "--output_path", "results",
        ]
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"lm_eval failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        samples = sorted((work / "results").rglob("samples_gsm8k_local_*.jsonl"))
        results = sorted((work / "results").rglob("results_*.json"))
        if len(samples) != 1 or len(results) != 1:
            raise RuntimeError(f"lm_eval wrote {samples} and {results}; expected one of each")
        dest = out / "lm-eval"
        dest.mkdir(parents=True, exist_ok=True)
        for old in [*dest.glob("samples_*.jsonl"), *dest.glob("results_*.json")]:
            old.unlink()
        shutil.copyfile(samples[0], dest / samples[0].name)
        shutil.copyfile(results[0], dest / results[0].name)
    return dest / samples[0].name


def main(out: Path = DEFAULT_OUT) -> tuple[dict[str, Path], dict[str, list[dict[str, Any]]]]:
    """Write both logs into ``out``; returns their paths and the requests each tool sent to the server."""
    with fake_server(reasoning=True) as server:
        url = server.url  # type: ignore[attr-defined]
        paths = {"inspect": run_inspect(url, out)}
        requests = {"inspect": list(server.requests)}
        server.requests.clear()
        paths["lm-eval"] = run_lm_eval(url, out)
        requests["lm-eval"] = list(server.requests)
    return paths, requests


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--requests", type=Path, help="also write the requests the server received (JSON), for tests")
    args = parser.parse_args()
    written, received = main(args.out)
    if args.requests:
        args.requests.write_text(json.dumps(received))
    for fmt, path in written.items():
        print(f"{fmt}: {path}")
