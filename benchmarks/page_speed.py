"""Server time and query count of every page a study member sees (issue 19, part 6).

Builds a study, or reuses it when it is already there, then GETs each page of it as the
study's owner through Django's test client (the whole request: middleware, session,
queries, rendering; DEBUG off, as in production) and prints one JSON object and a
markdown table: median and 90th percentile over ``--requests`` requests after a
warm-up request, the first request's time (a page cached per score-set version pays
its computation then), and the number of queries.

    # the bundled GSM8K demo (5,276 traces), on SQLite
    python benchmarks/page_speed.py --demo --database-url sqlite:////tmp/ra_pages_demo.sqlite3
    # 100,000 generated traces of 10 steps (1,000,000 steps), on PostgreSQL
    python benchmarks/page_speed.py --traces 100000 --steps-per-trace 10 \\
        --database-url postgres://postgres@127.0.0.1:5432/ra_pages_100k

The content of the study: human labels (two annotators on one trace in ten, one on
another), the mechanistic judge's labels (on the demo, every trace; generated, one
model's traces), scores by the score job, a skeleton per problem, a subject model, a
saved cohort. Targets: 300 ms per page at 5k traces, 600 ms at 100k; query counts
that do not grow with the data (tests/test_page_queries.py asserts that part).

``--data-changed`` measures the pages as they are between a change of the data and the end of the score
job it queues: ``annotation.signals.data_changed`` is sent as a new label sends it (the study's stored
summary, disagreement steps, reports and evidence marked stale, a score job queued), in a transaction rolled
back after the last request, so the study is left as it was.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine  # noqa: E402

GENERATED_STUDY = "pages-bench"
OWNER = "pages-owner"
ANNOTATORS = ("pages-ann-1", "pages-ann-2")
TARGET_MS = {"demo": 300, "generated": 600}


def _ensure_database(url: str) -> None:
    if not url.startswith("postgres"):
        return
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _setup(url: str, data_dir: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ["REASONAUDIT_DATA_DIR"] = data_dir
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    os.environ["DJANGO_DEBUG"] = "false"  # no query log, cached templates: as in production
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")
    os.environ.setdefault("REASONAUDIT_MODEL_NETWORKS", "127.0.0.0/8")  # the subject model's (never called) server
    # Jobs queued by the pages (none on GET) would go to a broker nobody reads; the script runs its
    # judge and score jobs in this process.
    os.environ["CELERY_BROKER_URL"] = "memory://"
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"
    os.environ["DJANGO_SETTINGS_MODULE"] = "reasonaudit.settings"
    import django

    django.setup()
    from django.conf import settings

    # No collected manifest in a benchmark; static URLs are plain.
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _vacuum() -> None:
    """What autovacuum does soon after a big load: planner statistics and the visibility map."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("VACUUM ANALYZE")
    else:
        with connection.cursor() as cur:
            cur.execute("ANALYZE")


# ---------------------------------------------------------------------------
# Building the study
# ---------------------------------------------------------------------------
def _demo_study():
    """The bundled GSM8K demo as ``./run`` makes it (import, two label passes, mechanistic judge, scores)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from annotation.models import Study

    if not Study.objects.filter(name="GSM8K demo", traces__isnull=False).exists():
        call_command("demo", password="page-speed-benchmark", stdout=io.StringIO())
    return Study.objects.get(name="GSM8K demo"), get_user_model().objects.get(username="demo")


def _generated_lines(n_traces: int, steps: int, seed: int = 0):
    """Canonical JSONL: 10 traces per problem over 4 models, a one-step skeleton per problem, about
    a third of the answers wrong (one wrong calculation), two annotators on trace 0 of each problem,
    one on trace 5."""
    rng = random.Random(seed)
    filler = ["Let me read the problem again.", "Hmm, wait, let me check that.", "So far so good.",
              "Now I combine the two amounts.", "I will verify the addition.", "That gives the running total."]
    for p in range(n_traces // 10):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        yield {"kind": "problem", "problem_id": f"g{p:06d}", "domain": ("arithmetic", "algebra")[p % 2],
               "statement": f"Tom has {a} apples and buys {b} more. How many apples does he have now?",
               "gold_answer": str(a + b), "tags": ["generated", f"t{p % 7}"],
               "skeleton": [{"text": f"{a} + {b} = {a + b}", "check": f"{a}+{b}={a + b}"}]}
        for m in range(10):
            wrong = m % 3 == 0
            total = a + b + wrong
            body = [f"Tom starts with {a} apples.", f"He buys {b} more."]
            body += [filler[(p + m + k) % len(filler)] for k in range(max(0, steps - 4))]
            body += [f"{a} + {b} = {total}", f"The answer is {total}."]
            body = body[:steps]
            rec: dict[str, Any] = {"kind": "trace", "problem_id": f"g{p:06d}", "model": f"model-{m % 4}",
                                   "trace_id": f"g{p:06d}/{m}", "steps": body, "answer": str(total),
                                   "regime": {"temperature": 0.7 if m % 2 else 0.0}}
            bad = len(body) - 1 if wrong else None
            annotators = ANNOTATORS if m == 0 else ANNOTATORS[:1] if m == 5 else ()
            rec["labels"] = [
                {"step": k, "verdict": "invalid" if k == bad and (who == ANNOTATORS[0] or p % 4) else "valid",
                 "annotator": who, "note": "adds one too many" if k == bad else ""}
                for who in annotators for k in range(1, len(body) + 1)]
            yield rec


def _generated_study(n_traces: int, steps: int):
    from django.contrib.auth import get_user_model

    from annotation import services
    from annotation.importing.pipeline import import_stream
    from annotation.models import Membership, Trace

    owner, _ = get_user_model().objects.get_or_create(username=OWNER)
    study, _ = services.do_get_or_create_study(GENERATED_STUDY, owner=owner)
    Membership.objects.filter(study=study, user=owner).update(role=Membership.Role.OWNER)
    for name in ANNOTATORS:
        services.do_add_member(study, name, Membership.Role.ANNOTATOR)
    have = Trace.objects.filter(study=study).count()
    if have >= n_traces:
        return study, owner, False
    t0 = time.perf_counter()
    batch: list[str] = []

    def flush() -> None:
        report = import_stream(study, io.BytesIO("\n".join(batch).encode()), "reasonaudit")
        assert report.committed, report.rejected[:3]
        batch.clear()

    for rec in _generated_lines(n_traces, steps):
        if rec["kind"] == "problem" and len(batch) >= 22_000:
            flush()
        batch.append(json.dumps(rec))
    if batch:
        flush()
    print(f"imported {n_traces} traces in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return study, owner, True


def _complete(study, *, judge_filters: dict, built: bool) -> dict:
    """Judge (mechanistic), score, a subject model, a cohort: what a study in use has."""
    from annotation.models import Membership, StudySummary
    from faithfulness.models import EvidenceSummary
    from judges import services as judge_services
    from judges.models import JudgeRun
    from scoring import score_jobs
    from scoring.models import ScoreSet
    from search import services as search_services
    from search.models import Cohort
    from subjects import services as subject_services
    from subjects.models import SubjectModel

    timings: dict[str, float] = {}
    judge = judge_services.ensure_mechanistic(study)
    if not JudgeRun.objects.filter(judge=judge).exists():
        t0 = time.perf_counter()
        run = judge_services.do_start_run(judge, scope=JudgeRun.Scope.ALL, filters=judge_filters, queue=False)
        judge_services.run_inline(run)
        timings["judge_s"] = round(time.perf_counter() - t0, 1)
        built = True
    # The score job also stores the per-model evidence (faithfulness.stored_evidence) and the review
    # progress (annotation.study_summary); both are dropped when the data changes.
    if built or not ScoreSet.objects.filter(study=study).exists() \
            or not EvidenceSummary.objects.filter(study=study).exists() \
            or not StudySummary.objects.filter(study=study).exists():
        t0 = time.perf_counter()
        score_jobs.recompute(study)
        timings["score_s"] = round(time.perf_counter() - t0, 1)
    else:
        # The study was scored by another process (an earlier run, scale.py's score stage), whose cache this
        # run's new data folder does not share. In production the web and the workers share it (Redis, or
        # the data folder's), and the score job's last step fills it: do that step here, as the job would.
        from scoring import analytics
        from scoring.services import default_profile

        t0 = time.perf_counter()
        analytics.warm(study, default_profile(study))
        timings["cache_warm_s"] = round(time.perf_counter() - t0, 1)
    if not SubjectModel.objects.filter(study=study).exists():
        subject_services.ensure_builtin_templates(study)
        subject_services.do_save_subject(study, {"name": "local-model", "base_url": "http://127.0.0.1:8080/v1",
                                                 "model": "local-model", "temperature": 0.0, "seed": 0})
    owner_membership = Membership.objects.filter(study=study, role=Membership.Role.OWNER).first()
    if not Cohort.objects.filter(study=study).exists():
        search_services.do_save_cohort(study, owner_membership, name="wrong answers",
                                       data={"answer_correct": "false"})
    return timings


# ---------------------------------------------------------------------------
# The pages
# ---------------------------------------------------------------------------
def _pages(study, owner) -> list[tuple[str, str]]:
    """(URL name, path) of every GET page of the study that has the object it needs."""
    from django.urls import reverse

    from annotation.models import Job, Trace
    from judges.models import JudgeConfig, JudgeRun
    from search.models import Cohort
    from subjects.models import SubjectModel

    sid = {"study_id": study.pk}
    trace = (Trace.objects.filter(study=study, steps__labels__annotator__isnull=False).order_by("pk").first()
             or Trace.objects.filter(study=study).order_by("pk").first())
    problem = trace.problem
    judge = JudgeConfig.objects.filter(study=study).order_by("pk").first()
    judge_run = JudgeRun.objects.filter(judge__study=study).order_by("-pk").first()
    subject = SubjectModel.objects.filter(study=study).order_by("pk").first()
    cohort = Cohort.objects.filter(study=study).order_by("pk").first()
    job = Job.objects.filter(study=study).order_by("pk").first()
    pages = [
        ("studies", reverse("studies")),
        ("study", reverse("study", kwargs=sid)),
        ("problem-list", reverse("problem-list", kwargs=sid)),
        ("trace-list", reverse("trace-list", kwargs=sid)),
        ("problem", reverse("problem", args=[problem.pk])),
        ("trace", reverse("trace", args=[trace.pk])),
        ("queue", reverse("queue", kwargs=sid)),
        ("adjudication", reverse("adjudication", kwargs=sid)),
        ("scoring-leaderboard", reverse("scoring-leaderboard", kwargs=sid)),
        ("scoring-hazard", reverse("scoring-hazard", kwargs=sid)),
        ("scoring-distributions", reverse("scoring-distributions", kwargs=sid)),
        ("scoring-lucky", reverse("scoring-lucky", kwargs=sid)),
        ("scoring-ablations", reverse("scoring-ablations", kwargs=sid)),
        ("scoring-profiles", reverse("scoring-profiles", kwargs=sid)),
        ("scoring-agreement", reverse("scoring-agreement", kwargs=sid)),
        ("scoring-annotators", reverse("scoring-annotators", kwargs=sid)),
        ("scoring-calibrations", reverse("scoring-calibrations", kwargs=sid)),
        ("faithfulness", reverse("faithfulness", kwargs=sid)),
        ("fidelity-list", reverse("fidelity-list", kwargs=sid)),
        ("abstraction-table", reverse("abstraction-table", kwargs=sid)),
        ("judge-list", reverse("judge-list", kwargs=sid)),
        ("subject-model-list", reverse("subject-model-list", kwargs=sid)),
        ("prompt-template-list", reverse("prompt-template-list", kwargs=sid)),
        ("study-runs", reverse("study-runs", kwargs=sid)),
        ("search", reverse("search", kwargs=sid)),
        ("search?q=wait", reverse("search", kwargs=sid) + "?q=wait"),
        ("search-cohorts", reverse("search-cohorts", kwargs=sid)),
        ("search-scanners", reverse("search-scanners", kwargs=sid)),
        ("study-members", reverse("study-members", kwargs=sid)),
        ("profile", reverse("profile")),
    ]
    if judge is not None:
        pages += [("judge", reverse("judge", args=[judge.pk])),
                  ("judge-disagreements", reverse("judge-disagreements", args=[judge.pk]))]
    if judge_run is not None:
        pages.append(("judge-run", reverse("judge-run", args=[judge_run.pk])))
    if subject is not None:
        pages.append(("subject-model", reverse("subject-model", args=[subject.pk])))
    if cohort is not None:
        pages.append(("search-cohort", reverse("search-cohort", args=[cohort.pk])))
    if job is not None:
        pages.append(("job", reverse("job", args=[job.pk])))
    return pages


def _not_measured(measured: set[str]) -> list[str]:
    """Named non-API URL patterns that no row of the table covers (forms' POST targets, downloads,
    and pages of objects the study does not have)."""
    from django.urls import URLPattern, URLResolver, get_resolver

    names: list[str] = []

    def walk(patterns, prefix: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern) and p.name:
                route = prefix + str(p.pattern)
                if not route.startswith(("api/", "admin/")):
                    names.append(p.name)

    walk(get_resolver().url_patterns, "")
    return sorted(set(names) - {m.split("?")[0] for m in measured})


def _server_cpu() -> Callable[[], float]:
    """CPU seconds so far of this connection's PostgreSQL backend (same machine: /proc), or of
    nothing on SQLite, whose queries run in this process and count in its own CPU time."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return lambda: 0.0
    connection.ensure_connection()
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
    tick = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # another host, or no access: server time unknown
            return 0.0
        return (int(fields[11]) + int(fields[12])) / tick  # utime, stime

    return read


def _measure(client, path: str, n: int) -> dict:
    from django.db import connection

    t0 = time.perf_counter()
    response = client.get(path)
    first = (time.perf_counter() - t0) * 1000
    if response.status_code != 200:
        print(f"{path}: status {response.status_code}", file=sys.stderr)
        return {"status": response.status_code, "median_ms": 0.0, "p90_ms": 0.0, "cpu_median_ms": 0.0,
                "db_cpu_mean_ms": 0.0, "first_ms": round(first, 1), "queries": 0, "bytes": len(response.content)}
    # Counted by an execute wrapper: the query log (CaptureQueriesContext) is emptied by each
    # request's request_started signal, which loses the count when the log was not empty before.
    queries: list[str] = []

    def count(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        client.get(path)
    samples, cpu = [], []
    server = _server_cpu()
    s0 = server()
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.process_time()
        response = client.get(path)
        samples.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    server_ms = (server() - s0) * 1000 / n  # a mean: the kernel counts in clock ticks (10 ms)
    samples.sort()
    return {"median_ms": round(statistics.median(samples), 1), "p90_ms": round(samples[int(0.9 * (n - 1))], 1),
            "cpu_median_ms": round(statistics.median(cpu), 1),
            "db_cpu_mean_ms": round(server_ms, 1), "first_ms": round(first, 1),
            "queries": len(queries), "bytes": len(response.content)}


def _table(results: dict[str, dict], target: int) -> str:
    lines = ["| page | median ms | p90 ms | CPU ms (app + database) | first ms | queries |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, r in results.items():
        flag = " **over**" if r["median_ms"] > target else ""
        cpu = f"{r['cpu_median_ms']} + {r['db_cpu_mean_ms']}" if r.get("db_cpu_mean_ms") else f"{r['cpu_median_ms']}"
        lines.append(f"| {name} | {r['median_ms']}{flag} | {r['p90_ms']} | {cpu} | {r['first_ms']} | {r['queries']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo", action="store_true", help="the bundled GSM8K demo study (5,276 traces)")
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--steps-per-trace", type=int, default=10)
    parser.add_argument("--database-url", default="", help="default: a SQLite file in a temporary folder")
    parser.add_argument("--requests", type=int, default=10, help="timed requests per page")
    parser.add_argument("--only", default="", help="comma-separated URL names: measure just these")
    parser.add_argument("--data-changed", action="store_true",
                        help="measure while a score job is pending after a change of the data (rolled back)")
    args = parser.parse_args()
    out: dict[str, Any] = {"machine": machine(), "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{tmp}/pages.sqlite3"
        _ensure_database(url)
        _setup(url, tmp)
        from django.db import connection, transaction
        from django.test import Client

        from annotation.models import Step, Study, Trace

        t0 = time.perf_counter()
        if args.demo:
            study, owner = _demo_study()
            timings = _complete(study, judge_filters={}, built=False)
        else:
            study, owner, built = _generated_study(args.traces, args.steps_per_trace)
            # The mechanistic judge over one model's traces (a quarter): a whole run over 1M steps would
            # take ten minutes and make no page different in kind.
            timings = _complete(study, judge_filters={"model": "model-0"}, built=built)
        _vacuum()
        out["setup_s"] = round(time.perf_counter() - t0, 1)
        out.update(timings)
        out.update({"database": connection.vendor, "study": study.name,
                    "traces": Trace.objects.filter(study=study).count(),
                    "steps": Step.objects.filter(trace__study=study).count()})
        client = Client()
        client.force_login(owner)
        client.get("/")  # the first reverse() imports every URL module, once per process
        pages = _pages(study, owner)
        if args.only:
            wanted = set(args.only.split(","))
            pages = [(n, p) for n, p in pages if n in wanted]
        results: dict[str, dict] = {}
        # --data-changed: the change and the pages in one transaction, rolled back after the last request;
        # otherwise the pages run as a server runs them (their own commits).
        with transaction.atomic() if args.data_changed else contextlib.nullcontext():
            if args.data_changed:
                from annotation.signals import data_changed

                data_changed.send(sender=Study, study=study, reason="labels")  # as send_data_changed does
                out["data_changed"] = "sent (reason 'labels'); rolled back after the last request"
            for name, path in pages:
                results[name] = {"path": path, **_measure(client, path, args.requests)}
                print(f"{name}: {results[name]['median_ms']} ms, {results[name]['queries']} queries", file=sys.stderr)
            if args.data_changed:
                transaction.set_rollback(True)  # nothing the pages wrote, nor the change, stays
        out["pages"] = results
        out["not_measured"] = _not_measured({n for n, _ in pages})
        target = TARGET_MS["demo" if args.demo else "generated"]
        out["target_ms"] = target
        out["over_target"] = [n for n, r in results.items() if r["median_ms"] > target]
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))
    print()
    print(_table(results, target))


if __name__ == "__main__":
    main()
