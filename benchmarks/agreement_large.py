"""Agreement end to end from the database, and streamed label exports.

1. **Agreement.** Generates (straight into the database) a study of
   ``--traces`` traces (default 10,000) with ``--steps`` steps each (default
   10, so 100,000 steps): one complete human review per trace, a second
   annotator on every fifth trace, holistic ratings on a third of them, and
   a judge with a verdict and a confidence on every step. After the scores
   are stored, it times ``agreement.services.agreement`` (every
   metric of the human consensus against the judge with 1,000 bootstrap
   resamples: step, first-error, score and rating correlations, calibration,
   the annotator block and the trace-bootstrap intervals) from a cold read
   of the database, split into the read and the arithmetic; then the API
   endpoint uncached and cached.

2. **Label export.** For each ``--export-steps`` size (default 200,000 and
   1,000,000 labels, one per step), generates a study and runs
   ``manage.py export --what labels`` in a child process per format
   (jsonl, csv, parquet), reporting the wall time and the child's own peak
   RSS next to that of a child that only starts Django, so flat memory
   shows as the same peak at both sizes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ra_agreement python benchmarks/agreement_large.py

With PostgreSQL the script creates a scratch database next to the one in
DATABASE_URL (``ra_agreement_bench_<pid>``) and drops it at the end unless
``--keep``; without DATABASE_URL it uses SQLite in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score_large  # noqa: E402
from _util import machine, scratch_postgres  # noqa: E402
from score_large import _drop_postgres, bulk_insert, setup_django  # noqa: E402


def _scratch_postgres(url: str) -> tuple[str, str]:
    return scratch_postgres(url, "ra_agreement_bench")


score_large._scratch_postgres = _scratch_postgres  # setup_django creates ours

# Peak RSS from VmHWM: exec starts a new address space, so it counts this
# process only (ru_maxrss would include the parent's size at fork time).
CHILD = """
import sys, time
import django
django.setup()
from django.core.management import call_command
t0 = time.perf_counter()
if sys.argv[1] != "startup":
    call_command("export", study=sys.argv[1], what="labels", format=sys.argv[2], out=sys.argv[3])
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(time.perf_counter() - t0, hwm // 1024)
"""


def generate(name: str, n_traces: int, n_steps: int, *, second_every: int = 5, rated_every: int = 3,
             judge: bool = True, seed: int = 0):
    """A study of n_traces x n_steps steps with human (and judge) labels; returns (study, owner)."""
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from annotation import services as annotation_services
    from annotation.models import Membership, Problem, Step, StepLabel, Trace, TraceReview
    from judges.models import JudgeConfig

    rng = random.Random(seed)
    User = get_user_model()
    study, _ = annotation_services.do_get_or_create_study(name)
    owner = User.objects.create_user(f"{name}-owner")
    ann1 = User.objects.create_user(f"{name}-ann1")
    ann2 = User.objects.create_user(f"{name}-ann2")
    Membership.objects.create(study=study, user=owner, role=Membership.Role.OWNER)
    gpt = JudgeConfig.objects.create(study=study, name="gpt", provider="fake") if judge else None
    n_problems = max(1, n_traces // 10)
    with transaction.atomic():
        bulk_insert(Problem, ["study", "problem_id", "statement", "gold_answer", "domain", "l_gold"],
                    ((study.pk, f"p{p:06d}", f"problem {p}", "1", ["arithmetic", "algebra"][p % 2], 0)
                     for p in range(n_problems)))
        problem_pk = dict(Problem.objects.filter(study=study).values_list("problem_id", "pk"))
        bulk_insert(Trace, ["study", "problem", "model", "trace_id", "answer_correct", "n_steps", "empty", "steps_hash"],
                    ((study.pk, problem_pk[f"p{t // 10:06d}"], f"model-{t % 4}", f"t{t:07d}", rng.random() < 0.7,
                      n_steps, False, "x") for t in range(n_traces)))
        traces = list(Trace.objects.filter(study=study).order_by("pk").values_list("pk", flat=True))
        bulk_insert(Step, ["trace", "index", "text"], ((pk, i, f"step {i}") for pk in traces
                                                      for i in range(1, n_steps + 1)))
        steps = list(Step.objects.filter(trace__study=study).order_by("trace_id", "index").values_list("pk", flat=True))

        def verdict(r: float) -> str:
            return "invalid" if r < 0.06 else ("neutral" if r < 0.12 else "valid")

        truth = [verdict(rng.random()) for _ in steps]

        def noisy(v: str, p: float) -> str:
            return v if rng.random() > p else rng.choice(["valid", "invalid", "neutral"])

        rows = [(s, "human", ann1.pk, truth[i], "[]") for i, s in enumerate(steps)]
        bulk_insert(StepLabel, ["step", "kind", "annotator", "verdict", "skeleton_refs"], rows)
        del rows
        if second_every:
            second = {t for j, t in enumerate(traces) if j % second_every == 0}
            bulk_insert(StepLabel, ["step", "kind", "annotator", "verdict", "skeleton_refs"],
                        ((s, "human", ann2.pk, noisy(truth[i], 0.2), "[]") for i, s in enumerate(steps)
                         if traces[i // n_steps] in second))
        if judge:
            def judged():
                for i, s in enumerate(steps):
                    v = noisy(truth[i], 0.25)
                    conf = min(1.0, max(0.0, rng.gauss(0.85 if v == truth[i] else 0.6, 0.15)))
                    yield (s, "judge", gpt.pk, v, "[]", round(conf, 3))
            bulk_insert(StepLabel, ["step", "kind", "judge", "verdict", "skeleton_refs", "confidence"], judged())
        bulk_insert(TraceReview, ["trace", "annotator", "complete", "version", "rating"],
                    ((pk, ann1.pk, True, 1, round(rng.uniform(0, 10), 1) if j % rated_every == 0 else None)
                     for j, pk in enumerate(traces)))
        if second_every:
            bulk_insert(TraceReview, ["trace", "annotator", "complete", "version"],
                        ((pk, ann2.pk, True, 1) for j, pk in enumerate(traces) if j % second_every == 0))
    return study, owner, len(steps)


def timed(fn, repeat: int = 1):
    best, value = None, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None else min(best, elapsed)
    return best, value


def bench_agreement(args) -> dict:
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client

    from agreement import data as agreement_data
    from agreement import services as svc
    from agreement.core.metrics import agreement_metrics
    from scoring import score_jobs, services

    t0 = time.perf_counter()
    study, owner, n_steps = generate("agreement-bench", args.traces, args.steps)
    gen = time.perf_counter() - t0
    if connection.vendor == "postgresql":
        with connection.cursor() as c:
            c.execute("ANALYZE")
    t = time.perf_counter()
    score_jobs.recompute(study, profiles=["default"], warm=False)
    recompute = time.perf_counter() - t
    profile = services.default_profile(study)

    runs = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        data = agreement_data.AgreementData.read(study)
        ref_steps, cand_steps = data.steps("human"), data.steps("judge:gpt", confidence=True)
        ref_scores, _ = data.scores("human", profile)
        cand_scores, _ = data.scores("judge:gpt", profile)
        data.annotator_labels(), data.scoped_ratings()
        read = time.perf_counter() - t
        m = svc.agreement(study, "human", "judge:gpt", profile, data=data)
        total = time.perf_counter() - t
        runs.append({"read_s": round(read, 3), "arithmetic_s": round(total - read, 3), "total_s": round(total, 3)})
    t = time.perf_counter()
    agreement_metrics(ref_steps, cand_steps, ref_scores, cand_scores, ratings=data.scoped_ratings(),
                           annotator_labels=data.annotator_labels())
    core_only = time.perf_counter() - t

    client = Client()
    client.force_login(owner)
    url = f"/api/v1/studies/{study.pk}/agreement/?reference=human&candidate=judge:gpt"
    client.get(f"/api/v1/studies/{study.pk}/")  # first request of the process: imports, URL conf
    api = []
    for _ in range(args.repeat):
        cache.clear()
        cold, response = timed(lambda: client.get(url))
        assert response.status_code == 200, response.content[:500]
        api.append(round(cold, 3))
    warm, _ = timed(lambda: client.get(url), repeat=5)
    cache.clear()
    page, response = timed(lambda: client.get(f"/studies/{study.pk}/agreement/?candidate=judge:gpt"))
    assert response.status_code == 200
    annot, _ = timed(lambda: svc.annotator_report(study))
    return {
        "traces": args.traces, "steps": n_steps, "labels": m["steps_compared"] * 2 + n_steps // 5,
        "generate_s": round(gen, 1), "recompute_default_profile_s": round(recompute, 2),
        "service_agreement_from_database": runs,
        "of_which_core_agreement_metrics_s": round(core_only, 3),
        "api_uncached_s": api, "api_cached_ms": round(1000 * warm, 1),
        "agreement_page_uncached_s": round(page, 3), "annotator_report_s": round(annot, 3),
        "figures": {k: m[k] for k in ("steps_compared", "percent_agreement", "kappa", "traces_compared",
                                      "pearson_r", "ece", "steps_calibrated")},
    }


def bench_export(args, tmp: str) -> dict:
    from django.db import connection

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "reasonaudit.settings"}

    def child(*argv: str) -> tuple[float, int]:
        done = subprocess.run([sys.executable, "-c", CHILD, *argv], cwd=ROOT, env=env, capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise SystemExit(done.stderr[-3000:])
        seconds, rss = done.stdout.split()[-2:]
        return float(seconds), int(rss)

    _, startup_rss = child("startup")
    out = {"django_startup_peak_rss_mib": startup_rss, "sizes": []}
    for size in args.export_steps:
        name = f"export-bench-{size}"
        t = time.perf_counter()
        generate(name, size // 10, 10, second_every=0, judge=False)
        gen = time.perf_counter() - t
        if connection.vendor == "postgresql":
            with connection.cursor() as c:
                c.execute("ANALYZE")
        row = {"labels": size, "generate_s": round(gen, 1)}
        for fmt in ("jsonl", "csv", "parquet"):
            path = Path(tmp) / f"{name}.{fmt}"
            seconds, rss = child(name, fmt, str(path))
            manifest = json.loads(Path(str(path) + ".manifest.json").read_text())
            assert manifest["counts"]["rows"] == size, manifest["counts"]
            row[fmt] = {"seconds": round(seconds, 1), "peak_rss_mib": rss,
                        "file_mib": round(path.stat().st_size / 2**20, 1)}
            path.unlink()
        out["sizes"].append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--export-steps", type=int, nargs="*", default=[200_000, 1_000_000])
    parser.add_argument("--skip-agreement", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL scratch database")
    args = parser.parse_args()
    original_db = os.environ.get("DATABASE_URL", "")
    with tempfile.TemporaryDirectory() as tmp:
        database, scratch = setup_django(tmp)
        report = {"machine": machine(), "database": database}
        try:
            if not args.skip_agreement:
                report["agreement"] = bench_agreement(args)
            if args.export_steps:
                report["label_export"] = bench_export(args, tmp)
        finally:
            from django.db import connections

            connections.close_all()
            if scratch and not args.keep:
                _drop_postgres(original_db, scratch)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
