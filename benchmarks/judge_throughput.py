"""Judge throughput.

1. An LLM judge against the fake OpenAI-compatible server (tests/runs/fake_openai.py)
   with --latency seconds per answer and --concurrency requests in flight, over
   --traces synthetic traces of 3 steps: wall time against the ideal
   traces * latency / concurrency, then the same run again (all from the cache).
2. The mechanistic judge over all 5,276 GSM8K model solutions
   (annotation/demo_data/gsm8k): wall time, labels, invalid steps, examples.

Both run the same chunk code a Celery worker runs, in this process (one
worker); --worker runs the LLM part through a real `celery worker` process
instead (filesystem broker, or --broker). A fresh database each time:
SQLite in a temporary folder unless --database-url.

    python benchmarks/judge_throughput.py [--traces 1000] [--latency 0.2] [--concurrency 8] [--worker]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _util import machine  # noqa: E402

GSM8K = ROOT / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"


def setup_django(data_dir: str, database_url: str | None, broker: str) -> None:
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "reasonaudit.settings", "DJANGO_DEBUG": "true", "REASONAUDIT_DATA_DIR": data_dir,
        "DATABASE_URL": database_url or f"sqlite:///{data_dir}/bench.sqlite3", "CELERY_BROKER_URL": broker,
        "CELERY_TASK_ALWAYS_EAGER": "false", "REASONAUDIT_QUEUE": "judge-bench",
    })
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class FakeServerProcess:
    def __init__(self, latency: float) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.runs.fake_openai", str(latency)], cwd=ROOT,
                                     stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()
        self.stopped: dict | None = None

    def stats(self) -> dict:
        if self.stopped is not None:
            return self.stopped
        import urllib.request

        with urllib.request.urlopen(self.url.removesuffix("/v1") + "/stats") as response:
            return json.loads(response.read())

    @property
    def count(self) -> int:
        return self.stats()["count"]

    def stop(self) -> None:
        self.stopped = self.stats()
        self.proc.terminate()
        self.proc.wait(10)


def llm_benchmark(args, data_dir: str) -> dict:
    from annotation import services as study_services
    from annotation.importing.pipeline import import_stream
    from annotation.models import Job
    from judges import services
    from tests.judges.conftest import trace_records

    study, _ = study_services.do_get_or_create_study("judge-bench")
    report = import_stream(study, io.BytesIO(trace_records(args.traces)), "reasonaudit")
    assert report.committed, report.rejected[:3]
    # The server runs in a process of its own, as a real model server does:
    # in this one it would compete with the judge for the interpreter.
    server = FakeServerProcess(args.latency)
    judge, _ = services.do_save_judge(study, {"name": "fake-llm", "model": "fake", "base_url": server.url,
                                              "concurrency": args.concurrency})
    worker = None
    if args.worker:
        log = open(Path(data_dir) / "worker.log", "wb")  # noqa: SIM115 - lives as long as the worker
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "reasonaudit", "worker", "--pool=prefork", "--concurrency=1",
             "-Q", "judge-bench", "--loglevel=warning", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=os.environ.copy(), stdout=log, stderr=subprocess.STDOUT,
        )
        time.sleep(6)  # start-up is not part of the run
    try:
        timings = []
        for _ in range(2):  # the second run is answered from the cache
            before = server.count
            started = time.perf_counter()
            run = services.do_start_run(judge, queue=bool(worker))
            if worker:
                while not Job.objects.get(pk=run.job_id).finished:
                    time.sleep(0.05)
                job = Job.objects.get(pk=run.job_id)
            else:
                job = services.run_inline(run)
            elapsed = time.perf_counter() - started
            run.refresh_from_db()
            assert job.status == Job.Status.SUCCEEDED and job.done == args.traces, (job.status, job.error)
            timings.append((elapsed, server.count - before, run.cache_hits))
    finally:
        if worker:
            worker.terminate()
            worker.wait(20)
        server.stop()
    max_in_flight = server.stats()["max_in_flight"]
    ideal = args.traces * args.latency / args.concurrency
    (first, requests, _), (second, requests2, hits2) = timings
    return {
        "traces": args.traces, "latency_s": args.latency, "concurrency": args.concurrency,
        "executor": "celery worker process" if worker else "in process (the worker's chunk code)",
        "ideal_s": round(ideal, 2), "run_s": round(first, 2), "ratio_to_ideal": round(first / ideal, 3),
        "requests": requests, "max_in_flight_seen_by_server": max_in_flight,
        "cached_rerun_s": round(second, 2), "cached_rerun_requests": requests2, "cached_rerun_cache_hits": hits2,
    }


def mechanistic_benchmark() -> dict:
    from annotation import services as study_services
    from annotation.importing.pipeline import import_stream
    from annotation.models import StepLabel
    from judges import services
    from judges.models import MECHANISTIC, JudgeConfig

    study, _ = study_services.do_get_or_create_study("gsm8k-bench")
    with GSM8K.open("rb") as fh:
        report = import_stream(study, fh, "gsm8k-solutions")
    assert report.committed
    judge = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    started = time.perf_counter()
    job = services.run_inline(services.do_start_run(judge, queue=False))
    elapsed = time.perf_counter() - started
    labels = StepLabel.objects.filter(kind="judge", judge=judge)
    invalid = labels.filter(verdict="invalid")
    examples = [
        {"trace": tid, "step": index, "text": text, "reason": reason}
        for tid, index, text, reason in invalid.order_by("step__trace__trace_id", "step__index").values_list(
            "step__trace__trace_id", "step__index", "step__text", "reason")[:5]
    ]
    by_verdict = {v: labels.filter(verdict=v).count() for v in ("valid", "invalid", "neutral")}
    traces_with_error = invalid.values("step__trace").distinct().count()
    return {
        "traces": job.done, "labels": labels.count(), "by_verdict": by_verdict,
        "traces_with_an_invalid_step": traces_with_error, "run_s": round(elapsed, 2),
        "with_skeleton_refs": labels.exclude(skeleton_refs=[]).count(), "examples": examples,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--worker", action="store_true", help="run the LLM judge in a celery worker process")
    parser.add_argument("--broker", default="filesystem://")
    parser.add_argument("--database-url", help="default: a fresh SQLite file")
    parser.add_argument("--skip-gsm8k", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(tmp, args.database_url, args.broker)
        out = {"machine": machine(), "llm": llm_benchmark(args, tmp)}
        if not args.skip_gsm8k:
            out["mechanistic_gsm8k"] = mechanistic_benchmark()
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
