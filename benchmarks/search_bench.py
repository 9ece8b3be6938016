"""Search at scale (issue 22): a generated study of 100,000 traces and 1,000,000 steps.

1. Import it twice into fresh databases, with the full-text index and with it dropped, both timed as
   whole ``import_traces`` processes: the indexing overhead.
2. Twenty fixed queries (text, phrases, or, exclusions, label notes, and combined structured filters)
   through the one filter set, as the API answers them: count, the first page of 50 and its hits.
   Five rounds; the 95th percentile of the 100 timings, and each query's median.
3. Save a cohort of about 50,000 traces (one INSERT ... SELECT).

    python benchmarks/search_bench.py                       # SQLite (a temporary file)
    python benchmarks/search_bench.py --database-url postgres://postgres@127.0.0.1:5432/ra_search_bench
    python benchmarks/search_bench.py --traces 10000        # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import PY, ROOT, machine, run_usage  # noqa: E402

STEPS_PER_TRACE = 10
QUERIES: list[dict[str, str]] = [
    {"q": "wait"},
    {"q": '"let me check"'},
    {"q": "wait or hmm"},
    {"q": "verify -wait"},
    {"q": "apples"},
    {"q": "42"},
    {"q": "wait", "model": "model-1"},
    {"q": "wait", "answer_correct": "false"},
    {"q": '"the answer is"', "n_steps_min": "10"},
    {"model": "model-2", "answer_correct": "true"},
    {"verdict": "invalid", "source": "human"},
    {"first_error_max": "3"},
    {"q": "check", "verdict": "invalid"},
    {"q": "hmm", "first_error_rel_min": "0.5"},
    {"q": "carries"},
    {"q": "recount or recheck"},
    {"q": '"so the total" -wait'},
    {"q": "wait", "regime": "temperature=0.7"},
    {"q": "zebra"},
    {"q": "wait hmm verify"},
]


def words(rng: random.Random, n: int) -> str:
    return " ".join(f"w{rng.randint(0, 1999)}" for _ in range(n))


def generate(path: Path, n_traces: int, seed: int = 0) -> None:
    """10 traces per problem over 4 models; steps of about 15 words with markers at fixed rates."""
    rng = random.Random(seed)
    markers = [("Wait,", 0.05), ("let me check", 0.03), ("hmm", 0.02), ("verify", 0.02), ("recount", 0.005),
               ("recheck", 0.005), ("so the total", 0.02), ("zebra", 0.0001)]
    with path.open("w") as fh:
        for p in range(n_traces // 10):
            a, b = rng.randint(2, 99), rng.randint(2, 99)
            fh.write(json.dumps({"kind": "problem", "problem_id": f"g{p:06d}", "domain": "arithmetic",
                                 "statement": f"{'Tom has' if p % 2 else 'Ann counts'} {a} apples and buys {b} more. "
                                              f"{words(rng, 8)}. How many?",
                                 "gold_answer": str(a + b)}) + "\n")
            for m in range(10):
                steps = []
                for _k in range(STEPS_PER_TRACE - 1):
                    extra = [w for w, rate in markers if rng.random() < rate]
                    steps.append(f"{' '.join(extra)} {words(rng, 12)} {rng.randint(0, 99)}".strip())
                wrong = m % 3 == 0
                steps.append(f"The answer is {a + b + wrong}.")
                rec = {"kind": "trace", "problem_id": f"g{p:06d}", "model": f"model-{m % 4}",
                       "trace_id": f"g{p:06d}/{m}", "steps": steps, "answer": str(a + b + wrong),
                       "answer_correct": not wrong, "regime": {"temperature": 0.7 if m % 2 else 0.0}}
                if m in (0, 5):
                    bad = rng.randint(1, STEPS_PER_TRACE)
                    rec["labels"] = [{"step": k, "verdict": "invalid" if k == bad and wrong else "valid",
                                      "annotator": "bench-annotator",
                                      "note": "carries wrongly" if k == bad and wrong else ""}
                                     for k in range(1, STEPS_PER_TRACE + 1)]
                fh.write(json.dumps(rec) + "\n")


def reset_postgres(url: str) -> None:
    import psycopg

    with psycopg.connect(url.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")


def fresh_env(tmp: Path, url: str, tag: str) -> dict[str, str]:
    env = {"REASONAUDIT_DATA_DIR": str(tmp), "DJANGO_DEBUG": "true", "CELERY_BROKER_URL": "memory://",
           "DATABASE_URL": url or f"sqlite:///{tmp}/{tag}.db"}
    if url:
        reset_postgres(url)
    run_usage([PY, "manage.py", "migrate", "-v0"], env)
    return env


def import_once(data: Path, env: dict[str, str], *, index: bool) -> tuple[float, float]:
    if not index:
        run_usage([PY, "manage.py", "shell", "-c", "from search.backends import drop_index; drop_index()"], env)
    wall, cpu, _peak, out = run_usage([PY, "manage.py", "import_traces", str(data), "--study", "bench", "--json"], env)
    report = json.loads(out)
    assert report["steps_created"] >= 1, report
    return wall, cpu


def _p95(sorted_values: list[float]) -> float:
    return sorted_values[max(0, int(round(0.95 * len(sorted_values))) - 1)]


def _server_cpu(pid: int | None) -> float:
    """CPU time (s) of the PostgreSQL backend serving this connection, when it runs on this machine
    (/proc/PID/stat, user + system, in clock ticks): on a shared machine its change is the query's
    own work, which wall time is not. Parallel workers, if a plan starts any, are not counted."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_speed_ms() -> float:
    """Best of three timings of a fixed CPU-bound loop (about 20 ms): how fast this machine is now."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        sum(i * i for i in range(400_000))
        best = min(best, time.perf_counter() - t0)
    return round(best * 1000, 1)


def queries_phase(rounds: int) -> dict:
    """Runs inside a process with Django set up on the benchmark's database."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reasonaudit.settings")
    sys.path.insert(0, str(ROOT))
    from django.contrib.auth import get_user_model
    from django.core.paginator import Paginator
    from django.db import connection

    # The process as the web server loads it (gunicorn and runserver import this module): Django set
    # up, every URL module imported, and the loaded objects frozen out of the garbage collector
    # (reasonaudit/serving.py) -- without that, a full collection landed inside a query now and then.
    import reasonaudit.wsgi  # noqa: F401
    from annotation.models import Membership, Study
    from search import paging, services

    study = Study.objects.get(name="bench")
    user, _ = get_user_model().objects.get_or_create(username="bench-owner")
    membership, _ = Membership.objects.get_or_create(study=study, user=user, defaults={"role": "owner"})
    backend: int | None = None
    server: dict[str, str] = {}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            # What autovacuum does after an import (it is off on the shared test server): statistics,
            # and the visibility map an index-only scan needs (search.0006's indexes of traces and labels).
            cursor.execute("VACUUM ANALYZE")
            # The server's memory settings decide whether a broad query reads the steps from its own
            # buffers or from the OS (docs/configuration.md, "Production"): reported with the figures.
            names = ["shared_buffers", "effective_cache_size", "work_mem", "server_version"]
            cursor.execute("SELECT " + ", ".join("current_setting(%s)" for _ in names), names)
            server = dict(zip(names, cursor.fetchone(), strict=True))  # as SHOW prints them, e.g. 4GB
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
            if not Path(f"/proc/{backend}/stat").exists():
                backend = None  # the server runs elsewhere
    # One query first, untimed: the first use of each code path (the web server's first request).
    s = services.search(study, membership, {"q": "answer"})
    services.hits(s, list(Paginator(s.traces, 50).get_page(1)))
    timings: dict[int, list[float]] = {i: [] for i in range(len(QUERIES))}
    cpu: list[float] = []
    server_cpu: list[float] = []
    work: dict[int, list[float]] = {i: [] for i in range(len(QUERIES))}  # client + server CPU per query
    counts: dict[int, int] = {}
    machine_ms: list[float] = []
    for _round in range(rounds):
        machine_ms.append(_machine_speed_ms())
        for i, params in enumerate(QUERIES):
            t0, c0, s0 = time.perf_counter(), time.process_time(), _server_cpu(backend)
            s = services.search(study, membership, params)
            page = paging.SearchPaginator(s.traces, 50).get_page(1)
            rows = list(page)
            services.hits(s, rows)
            counts[i] = page.paginator.count
            timings[i].append(time.perf_counter() - t0)
            # CPU time of this process: on SQLite (in-process) all the query's work, without the waits
            # for a core that a loaded machine adds to wall time; on PostgreSQL only the client's part.
            cpu.append(time.process_time() - c0)
            server_cpu.append(_server_cpu(backend) - s0)
            work[i].append(cpu[-1] + server_cpu[-1])
    flat = sorted(t for ts in timings.values() for t in ts)
    p95 = _p95(flat)
    t0, c0, s0 = time.perf_counter(), time.process_time(), _server_cpu(backend)
    cohort = services.do_save_cohort(study, membership, name=f"half-{time.time()}",
                                     data={"regime": "temperature=0.7"})
    cohort_s = time.perf_counter() - t0
    cohort_cpu = time.process_time() - c0 + _server_cpu(backend) - s0
    return {
        "database": connection.vendor,
        "server_settings": server or None,
        "p95_ms": round(p95 * 1000, 1), "median_ms": round(statistics.median(flat) * 1000, 1),
        "cpu_p95_ms": round(_p95(sorted(cpu)) * 1000, 1),
        # Client + server CPU of each query (PostgreSQL on this machine; 10 ms ticks): its work
        # without the waits for a core.
        "cpu_with_server_p95_ms": (round(_p95(sorted(c + sc for c, sc in zip(cpu, server_cpu, strict=True))) * 1000, 1)
                                   if backend else None),
        "max_ms": round(flat[-1] * 1000, 1),
        # The same fixed Python loop timed before each round: this machine's speed drifts by a third
        # within a minute (a shared host), which moves every query of a round together.
        "machine_speed_ms_per_round": machine_ms,
        "queries": [{"params": QUERIES[i], "count": counts[i], "median_ms": round(statistics.median(ts) * 1000, 1),
                     "cpu_median_ms": round(statistics.median(work[i]) * 1000, 1),
                     "rounds_ms": [round(t * 1000) for t in ts]}
                    for i, ts in timings.items()],
        "cohort": {"traces": cohort.n_traces, "seconds": round(cohort_s, 2), "cpu_seconds": round(cohort_cpu, 2)},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--database-url", default="", help="PostgreSQL (its public schema is dropped!); else SQLite")
    parser.add_argument("--skip-overhead", action="store_true", help="import once, with the index")
    parser.add_argument("--queries-only", action="store_true",
                        help="only the query phase, on the database of DATABASE_URL (a study named bench)")
    args = parser.parse_args()
    if args.queries_only:
        print(json.dumps(queries_phase(args.rounds)))
        return
    url = args.database_url
    out: dict = {"machine": machine(), "load_average_before": os.getloadavg(), "traces": args.traces,
                 "steps": args.traces * STEPS_PER_TRACE}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "bench.jsonl"
        generate(data, args.traces)
        out["file_mib"] = round(data.stat().st_size / 2**20, 1)
        if not args.skip_overhead:
            env = fresh_env(Path(tmp), url, "plain")
            wall, cpu = import_once(data, env, index=False)
            out["import_without_index"] = {"seconds": round(wall, 1), "cpu_seconds": round(cpu, 1)}
        env = fresh_env(Path(tmp), url, "indexed")
        wall, cpu = import_once(data, env, index=True)
        out["import_with_index"] = {"seconds": round(wall, 1), "cpu_seconds": round(cpu, 1)}
        if not args.skip_overhead:
            base = out["import_without_index"]
            out["indexing_overhead_pct"] = round(100 * (wall / base["seconds"] - 1), 1)
            out["indexing_overhead_cpu_pct"] = round(100 * (cpu / base["cpu_seconds"] - 1), 1)
        _w, _c, _p, stdout = run_usage([PY, str(Path(__file__).resolve()), "--queries-only", "--rounds",
                                        str(args.rounds)], env)
        out.update(json.loads(stdout))
    out["load_average_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
