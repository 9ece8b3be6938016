"""A scanner on the demo study (the bundled GSM8K solutions and the two annotators' labels of 40 traces)
answered by the fake OpenAI-compatible server of the tests, and its precision/recall/F1 against the
human labels (docs/search.md). The fake answers "yes" when a step holds the question's quoted text, so
the figures measure that keyword rule against people -- the loop, not a model.

    python benchmarks/scanner_demo.py [--word " - "]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import PY, ROOT, machine, run_usage  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--word", default="-", help="the text the fake server looks for (in the question's quotes)")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.in_process:
        with tempfile.TemporaryDirectory() as tmp:
            env = {"REASONAUDIT_DATA_DIR": tmp, "DJANGO_DEBUG": "true", "CELERY_BROKER_URL": "memory://",
                   "DATABASE_URL": f"sqlite:///{tmp}/demo.db"}
            run_usage([PY, "manage.py", "migrate", "-v0"], env)
            _w, _c, _p, out = run_usage([PY, __file__, "--in-process", "--word", args.word], env)
            print(out)
        return
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reasonaudit.settings")
    sys.path.insert(0, str(ROOT))
    django.setup()
    from django.contrib.auth import get_user_model

    from annotation import services
    from annotation.models import Membership, StepLabel, Trace
    from demo.management.commands.demo import DEMO_FILE, DEMO_LABELS
    from judges import services as judge_services
    from search import scanners
    from search import services as search_services
    from tests.search.fake_scanner import FakeScanner

    user = get_user_model().objects.create_user("demo-owner")
    study, _ = services.do_get_or_create_study("GSM8K demo", owner=user)
    for path, fmt in [(DEMO_FILE, "gsm8k-solutions"), *[(p, "reasonaudit") for p in DEMO_LABELS]]:
        job = services.do_create_import_job(study, fmt=fmt, skip_invalid=False, user=user, path=path)
        with path.open("rb") as fh:
            services.run_import_job(job.pk, fh)
    membership = Membership.objects.get(study=study, user=user)
    cohort = search_services.do_save_cohort(study, membership, name="labelled by people",
                                            data={"source": "human", "labelled": "true"})
    server = FakeScanner().start()
    try:
        judge_services.do_save_judge(study, {"name": "fake-llm", "model": "fake", "base_url": server.url,
                                             "concurrency": 4, "max_retries": 2, "timeout_seconds": 10.0})
        scanner = scanners.do_create_scanner(
            study, name="slip", judge_name="fake-llm",
            question=f'Does some step contain an error? (the fake server says yes when a step holds "{args.word}")')
        t0 = time.perf_counter()
        record = scanners.do_start_scan(scanner, cohort=cohort, queue=False)
        job = scanners.run_inline(record)
        seconds = time.perf_counter() - t0
        scanners.do_draw_sample(scanner, cohort.n_traces, seed=0, cohort=cohort)
        # People's answer: some step of the trace is labelled invalid by an annotator.
        for trace in Trace.objects.filter(scan_labels__scanner=scanner):
            bad = StepLabel.objects.filter(step__trace=trace, kind="human", verdict="invalid").exists()
            scanners.do_answer(scanner, trace, user, bad)
        report = scanners.validation_report(scanner)
    finally:
        server.stop()
    print(json.dumps({"machine": machine(), "load_average": os.getloadavg(), "cohort_traces": cohort.n_traces,
                      "run": {"status": job.status, "done": job.done, "seconds": round(seconds, 2),
                              "requests": len(server.requests)},
                      "counts": scanners.counts(scanner),
                      **{split: asdict(report[split]) for split in ("dev", "test")}}, indent=2))


if __name__ == "__main__":
    main()
