"""Cost of a step-importance run per trace (docs/benchmarks.md, "Step importance"): requests, tokens and
seconds for N = 20 samples per prefix over a 100-step thought, against the test suite's fake thinking server
(behaviour "plan", tests/runs/fake_thinking.py; one word = one token) on a fresh SQLite database; at stride 1
(every step) and stride 10. The measures' computation from the stored rollouts (anchors.results.store,
bootstrap intervals included) is timed on its own.

    .venv/bin/python benchmarks/step_importance.py [--samples 20] [--numbers 98] [--strides 1,10]

98 numbers in the question make a 100-step thought (the first number, the plan, 97 additions, the check).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

_tmp = tempfile.mkdtemp(prefix="ra-step-importance-")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{_tmp}/bench.sqlite3")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reasonaudit.settings")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")
os.environ.setdefault("SECRET_KEY", "benchmark")
os.environ.setdefault("DJANGO_DEBUG", "true")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from anchors import results  # noqa: E402
from anchors.running import do_start_importance, run_inline  # noqa: E402
from annotation import services as annotation_services  # noqa: E402
from annotation.importing.pipeline import import_stream  # noqa: E402
from annotation.models import Trace  # noqa: E402
from subjects import services as subject_services  # noqa: E402
from tests.runs.fake_thinking import PLAN, FakeThinking  # noqa: E402

SMOLLM2 = (ROOT / "tests" / "runs" / "data" / "smollm2_chat_template.jinja").read_text()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--numbers", type=int, default=98)
    ap.add_argument("--strides", default="1,10")
    args = ap.parse_args()
    call_command("migrate", verbosity=0)
    study, _ = annotation_services.do_get_or_create_study("step importance bench")
    numbers = [(7 * i) % 9 + 1 for i in range(args.numbers)]
    record = {"kind": "problem", "problem_id": "long", "gold_answer": str(sum(numbers)),
              "statement": "Add up these numbers: " + ", ".join(map(str, numbers)) + "."}
    import io

    assert import_stream(study, io.BytesIO(json.dumps(record).encode() + b"\n"), "reasonaudit").committed
    server = FakeThinking(form="field", behaviour=PLAN).start()
    try:
        subject, _ = subject_services.do_save_subject(study, {
            "name": "plan", "model": "r1-fake", "base_url": server.url, "concurrency": 4, "max_retries": 1,
            "timeout_seconds": 30.0, "seed": 0, "chat_template": SMOLLM2, "thinking": "on", "max_tokens": 4096})
        subject_services.do_probe_subject_model(subject)
        gen = subject_services.do_start_generation(subject, queue=False)
        subject_services.run_inline(gen)
        trace = Trace.objects.get(study=study)
        print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f} at start")
        print(f"trace: {trace.n_thought_steps} thought steps, {len(trace.thought.split())} thought words")
        for stride in [int(s) for s in args.strides.split(",")]:
            irun = do_start_importance(subject, samples=args.samples, stride=stride, queue=False, force=True)
            t0 = time.perf_counter()
            job = run_inline(irun)
            wall = time.perf_counter() - t0
            irun.refresh_from_db()
            run = irun.run
            run.refresh_from_db()
            t1 = time.perf_counter()
            rows = results.store(irun)
            measures = time.perf_counter() - t1
            plan_step = max(irun.importance.all(), key=lambda r: r.resampling_importance_accuracy or 0).step.index
            print(json.dumps({"stride": stride, "samples": args.samples, "status": job.status,
                              "rollouts": irun.rollouts.count(), "requests": run.requests,
                              "prompt_tokens": run.prompt_tokens, "completion_tokens": run.completion_tokens,
                              "seconds_run": round(wall, 1), "seconds_measures": round(measures, 2),
                              "steps_measured": rows, "peak_step": plan_step,
                              "load_average": round(os.getloadavg()[0], 2)}))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
