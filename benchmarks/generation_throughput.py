"""Generation throughput, side by side with Inspect AI and lm-evaluation-harness.

One fake OpenAI-compatible server in a process of its own
(``python -m tests.runs.fake_openai LATENCY generation``: every answer after
LATENCY seconds, a three-line chain of thought), then for each case
CONCURRENCY:WORKERS (default ``8:1,32:4``), against that same server, the same
N prompts (default 2,000: the zero-shot prompt of the subject models rendered
on N synthetic problems) and the same number of requests in flight:

* **ReasonAudit**: a generation run of a fresh subject model (cold cache,
  K = 1) queued to real ``celery worker`` process(es) (prefork,
  ``--concurrency=WORKERS``, ``RUN_PARALLEL_CHUNKS=WORKERS``: one lane of
  chunks per process) on PostgreSQL with a Redis broker; timed from
  ``do_start_generation`` until the job has finished (every completion stored
  as a segmented, answer-checked Trace). The worker is started before the clock.
* **Inspect AI**: ``inspect eval task.py --model openai-api/fake/fake-model
  --model-base-url URL --max-connections CONCURRENCY`` over a task whose
  dataset holds the same prompts (solver ``generate()``, scorer ``match``).
* **lm-evaluation-harness**: ``lm_eval --model local-chat-completions
  --model_args ...,num_concurrent=CONCURRENCY --apply_chat_template`` over a
  local ``generate_until`` task with the same prompts.

For each: the wall time of the work (ReasonAudit: start to end of the job;
Inspect: the log's started/completed times; lm-eval: its
``total_evaluation_time_seconds``) and the wall time of the whole process
(start-up included), the requests the server saw and the most it had in flight,
and the ratio to the ideal ``N x latency / concurrency``.

    DATABASE_URL=postgres://... CELERY_BROKER_URL=redis://... \\
        python benchmarks/generation_throughput.py [--n 2000] [--latency 0.2] [--cases 8:1,32:4] [--skip-peers]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _util import machine  # noqa: E402

QUEUE = f"gen-bench-{uuid.uuid4().hex[:8]}"
MODEL = "fake-model"
MAX_TOKENS = 256


def setup_django(data_dir: str, database_url: str, broker: str) -> None:
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "reasonaudit.settings", "DJANGO_DEBUG": "false", "SECRET_KEY": "benchmark-only",
        "REASONAUDIT_MODEL_NETWORKS": "127.0.0.0/8",  # the fake server listens on loopback
        "REASONAUDIT_DATA_DIR": data_dir, "DATABASE_URL": database_url, "CELERY_BROKER_URL": broker,
        "CELERY_TASK_ALWAYS_EAGER": "false", "REASONAUDIT_QUEUE": QUEUE,
    })
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class FakeServer:
    """tests/runs/fake_openai.py in generation mode, in its own process (as a real model server is)."""

    def __init__(self, latency: float) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.runs.fake_openai", str(latency), "generation"],
                                     cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()

    def stats(self, reset: bool = False) -> dict:
        import urllib.request

        with urllib.request.urlopen(self.url.removesuffix("/v1") + ("/reset" if reset else "/stats")) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def problems(n: int) -> list[dict]:
    """Problem p{i}: two numbers to add (the fake's answer is right)."""
    return [{"kind": "problem", "problem_id": f"p{i}",
             "statement": f"Ann has {i + 2} apples and buys {i + 3} more. How many apples does she have?",
             "gold_answer": str(2 * i + 5)} for i in range(n)]


def prompts_of(records: list[dict]) -> list[str]:
    """The user message ReasonAudit sends for each problem (the zero-shot template), for the peers to send too."""
    from subjects import prompts

    return [prompts.render(prompts.ZERO_SHOT_TEMPLATE, problem=r["statement"], problem_id=r["problem_id"])
            for r in records]


# --------------------------------------------------------------------------
# ReasonAudit


def start_worker(processes: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "reasonaudit", "worker", "--pool=prefork",
         f"--concurrency={processes}", "-Q", QUEUE, "-n", f"{QUEUE}-{processes}@%h", "--loglevel=info",
         "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=os.environ.copy(), stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"celery worker exited:\n{log.read_text()[-3000:]}")
        if "ready." in log.read_text(errors="replace"):
            time.sleep(1)  # the pool's children finish starting
            return proc
        time.sleep(0.2)
    raise SystemExit(f"celery worker did not become ready:\n{log.read_text()[-3000:]}")


def reasonaudit(server: FakeServer, records: list[dict], concurrency: int, processes: int, tmp: Path) -> dict:
    from annotation import services as study_services
    from annotation.importing.pipeline import import_stream
    from annotation.models import Job, Trace
    from subjects import services
    from subjects.models import Generation

    study, _ = study_services.do_get_or_create_study(f"gen-bench-{uuid.uuid4().hex[:8]}")
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    import io

    report = import_stream(study, io.BytesIO(data), "reasonaudit")
    assert report.committed, report.rejected[:3]
    subject, _ = services.do_save_subject(study, {
        "name": f"bench-c{concurrency}", "model": MODEL, "base_url": server.url, "concurrency": concurrency,
        "max_tokens": MAX_TOKENS, "temperature": 0.0, "timeout_seconds": 60.0,
    })
    from django.conf import settings

    # As a deployment with that many worker processes would set it: one lane of chunks per process.
    settings.RUN_PARALLEL_CHUNKS = processes
    worker = start_worker(processes, tmp / f"worker-{concurrency}-{processes}.log")
    try:
        before = server.stats()["count"]
        started = time.perf_counter()
        record = services.do_start_generation(subject, scope="all", samples=1, queue=True)
        while True:
            job = Job.objects.get(pk=record.job_id)
            if job.finished:
                break
            time.sleep(0.05)
        wall = time.perf_counter() - started
    finally:
        worker.terminate()
        worker.wait(30)
    stats = server.stats()
    assert job.status == Job.Status.SUCCEEDED and job.done == len(records), (job.status, job.done, job.error)
    traces = Trace.objects.filter(study=study, model=subject.name).count()
    generations = Generation.objects.filter(subject=subject).count()
    assert traces == generations == len(records), (traces, generations)
    return {"tool": "ReasonAudit", "work_s": wall, "process_s": None, "requests": stats["count"] - before,
            "stored": f"{traces} traces", "lanes": record.run.lanes}


# --------------------------------------------------------------------------
# The floor: the openai client alone


def bare_client(server: FakeServer, rows: list[dict], concurrency: int, tmp: Path) -> dict:
    """The same requests from CONCURRENCY threads sharing one openai client, nothing stored: what this
    machine allows a Python client at this moment (the others cannot do better)."""
    code = f"""
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
import openai
rows = json.load(open(sys.argv[1]))
client = openai.OpenAI(base_url={server.url!r}, api_key="x", max_retries=0, timeout=60)
def call(row):
    return client.chat.completions.create(model={MODEL!r}, messages=[{{"role": "user", "content": row["prompt"]}}],
                                          temperature=0.0, max_tokens={MAX_TOKENS}).choices[0].message.content
started = time.perf_counter()
with ThreadPoolExecutor({concurrency}) as pool:
    n = sum(1 for _ in pool.map(call, rows))
print(json.dumps({{"work_s": time.perf_counter() - started, "n": n}}))
"""
    (tmp / "prompts.json").write_text(json.dumps(rows))
    before = server.stats()["count"]
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, str(tmp / "prompts.json")], capture_output=True, text=True,
                          timeout=3600)
    process_s = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"the bare client failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"tool": "bare openai client (floor)", "work_s": result["work_s"], "process_s": process_s,
            "requests": server.stats()["count"] - before, "stored": "nothing"}


# --------------------------------------------------------------------------
# Inspect AI

INSPECT_TASK = '''
import json
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import match
from inspect_ai.solver import generate


@task
def gen_bench():
    rows = json.loads((Path(__file__).parent / "prompts.json").read_text())
    return Task(
        dataset=MemoryDataset([Sample(id=r["id"], input=r["prompt"], target=r["target"]) for r in rows]),
        solver=generate(),
        scorer=match(location="end", numeric=True),
        config=GenerateConfig(temperature=0.0, max_tokens=MAX_TOKENS),
    )
'''.replace("MAX_TOKENS", str(MAX_TOKENS))


def inspect(server: FakeServer, rows: list[dict], concurrency: int, tmp: Path) -> dict:
    work = tmp / f"inspect-{concurrency}"
    work.mkdir()
    (work / "task.py").write_text(INSPECT_TASK)
    (work / "prompts.json").write_text(json.dumps(rows))
    env = {**os.environ, "FAKE_API_KEY": "not-a-secret", "INSPECT_LOG_DIR": str(work / "logs")}
    cmd = [sys.executable, "-m", "inspect_ai", "eval", "task.py", "--model", f"openai-api/fake/{MODEL}",
           "--model-base-url", server.url, "--max-connections", str(concurrency), "--display", "none",
           "--log-dir", str(work / "logs"), "--log-format", "eval"]
    before = server.stats()["count"]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=3600)
    process_s = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"inspect eval failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    from datetime import datetime

    from inspect_ai.log import read_eval_log

    log_file = next((work / "logs").glob("*.eval"))
    log = read_eval_log(str(log_file), header_only=True)
    assert log.status == "success", log.status
    work_s = (datetime.fromisoformat(log.stats.completed_at) - datetime.fromisoformat(log.stats.started_at)).total_seconds()
    return {"tool": "Inspect AI", "work_s": work_s, "process_s": process_s,
            "requests": server.stats()["count"] - before, "stored": f"{log.results.completed_samples} samples"}


# --------------------------------------------------------------------------
# lm-evaluation-harness

LM_EVAL_TASK = """\
task: gen_bench
dataset_path: json
dataset_kwargs:
  data_files:
    test: prompts.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{prompt}}"
doc_to_target: "{{target}}"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
generation_kwargs:
  until: []
  do_sample: false
  temperature: 0.0
  max_gen_toks: MAX_TOKENS
filter_list:
  - name: last-number
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "(-?[0-9]+)"
      - function: take_first
metadata:
  version: 1.0
""".replace("MAX_TOKENS", str(MAX_TOKENS))


def lm_eval(server: FakeServer, rows: list[dict], concurrency: int, tmp: Path) -> dict:
    work = tmp / f"lm-eval-{concurrency}"
    (work / "tasks").mkdir(parents=True)
    (work / "tasks" / "gen_bench.yaml").write_text(LM_EVAL_TASK)
    (work / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(work / "hf"),
           "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "lm_eval", "--model", "local-chat-completions",
           "--model_args", f"model={MODEL},base_url={server.url}/chat/completions,num_concurrent={concurrency},"
                           "max_retries=1,tokenized_requests=False",
           "--tasks", "gen_bench", "--include_path", "tasks", "--apply_chat_template", "--output_path", "results"]
    before = server.stats()["count"]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=3600)
    process_s = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"lm_eval failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    results = json.loads(next((work / "results").rglob("results_*.json")).read_text())
    work_s = float(results["total_evaluation_time_seconds"])
    return {"tool": "lm-evaluation-harness", "work_s": work_s, "process_s": process_s,
            "requests": server.stats()["count"] - before, "stored": f"{results['n-samples']['gen_bench']['effective']} samples"}


# --------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--cases", default="8:1,32:4", help="CONCURRENCY:WORKER_PROCESSES, comma separated")
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--only", choices=["floor", "reasonaudit", "inspect", "lm-eval"], action="append")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--broker", default=os.environ.get("CELERY_BROKER_URL", ""))
    args = parser.parse_args()
    if not args.database_url.startswith("postgres") or not args.broker.startswith("redis"):
        raise SystemExit("set DATABASE_URL (PostgreSQL) and CELERY_BROKER_URL (Redis), or pass --database-url/--broker")
    tools = args.only or (["floor", "reasonaudit"] if args.skip_peers else ["floor", "reasonaudit", "inspect", "lm-eval"])
    cases = [tuple(int(x) for x in case.split(":")) for case in args.cases.split(",")]
    out: dict = {"machine": machine(), "n": args.n, "latency_s": args.latency, "cases": []}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        setup_django(tmp_dir, args.database_url, args.broker)
        records = problems(args.n)
        rows = [{"id": r["problem_id"], "prompt": p, "target": r["gold_answer"]}
                for r, p in zip(records, prompts_of(records), strict=True)]
        server = FakeServer(args.latency)
        try:
            for concurrency, processes in cases:
                ideal = args.n * args.latency / concurrency
                results = []
                for tool in tools:
                    server.stats(reset=True)
                    if tool == "reasonaudit":
                        r = reasonaudit(server, records, concurrency, processes, tmp)
                        r["executor"] = f"{processes} celery worker process(es)"
                    elif tool == "floor":
                        r = bare_client(server, rows, concurrency, tmp)
                    elif tool == "inspect":
                        r = inspect(server, rows, concurrency, tmp)
                    else:
                        r = lm_eval(server, rows, concurrency, tmp)
                    r["ratio_to_ideal"] = round(r["work_s"] / ideal, 3)
                    r["work_s"] = round(r["work_s"], 2)
                    r["process_s"] = round(r["process_s"], 2) if r["process_s"] is not None else None
                    r["server_max_in_flight"] = server.stats()["max_in_flight"]
                    results.append(r)
                    print(json.dumps({"concurrency": concurrency, **r}), file=sys.stderr, flush=True)
                out["cases"].append({"concurrency": concurrency, "worker_processes": processes,
                                     "ideal_s": round(ideal, 2), "results": results})
        finally:
            server.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
