"""Rescore a large generated study under a new profile and time the
analytics pages.

Generates (straight into the database, not through the import) a study of
``--traces`` traces (default 100,000) with about ``--steps`` steps each
(default 10, so about 1M steps), one complete human review per trace (one
label per step: about 1M labels), then:

1. creates a new scoring profile and rescores the study under it (both
   label sources that exist: ``final`` and ``human``), reporting the time
   spent reading labels (SQL and pandas), computing and writing;
2. times the leaderboard and hazard pages (and their API endpoints) cold
   (empty cache) and warm (cached per score-set version), as a signed-in
   member through Django's test client.

    python benchmarks/score_large.py                       # SQLite in a temporary folder
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ python benchmarks/score_large.py

With PostgreSQL the script creates a scratch database next to the one in
DATABASE_URL (``ra_score_bench_<pid>``) and drops it at the end unless
``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import machine, scratch_postgres  # noqa: E402


def _scratch_postgres(url: str) -> tuple[str, str]:
    return scratch_postgres(url, "ra_score_bench")


def _drop_postgres(url: str, name: str) -> None:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    admin = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(tmp: str) -> tuple[str, str | None]:
    db = os.environ.get("DATABASE_URL", "")
    scratch = None
    if db.startswith("postgres"):
        url, scratch = _scratch_postgres(db)
        os.environ["DATABASE_URL"] = url
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{tmp}/bench.sqlite3"
    os.environ.setdefault("SECRET_KEY", "benchmark-only")
    os.environ["REASONAUDIT_DATA_DIR"] = tmp
    # Queued jobs go to an in-memory broker nobody reads: the script times
    # the recomputes itself, in this process.
    os.environ["CELERY_BROKER_URL"] = "memory://"
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"
    os.environ["DJANGO_SETTINGS_MODULE"] = "reasonaudit.settings"
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return ("postgresql" if scratch else "sqlite"), scratch


# ---------------------------------------------------------------------------
# Data generation: raw bulk inserts with every NOT NULL column filled from the
# model's defaults, so the script follows schema changes of the models.
# ---------------------------------------------------------------------------
def bulk_insert(model, columns: list[str], rows) -> None:
    import json as _json

    from django.db import connection, models
    from django.utils import timezone

    qn = connection.ops.quote_name
    given = set(columns)
    extra_cols, extra_vals = [], []
    for f in model._meta.concrete_fields:
        if f.primary_key or f.attname in given or f.name in given:
            continue
        if f.has_default():
            value = f.get_default()
        elif f.null:
            continue
        elif isinstance(f, models.DateTimeField):
            value = timezone.now()
        else:
            value = "" if isinstance(f, (models.CharField, models.TextField)) else 0
        if isinstance(f, models.JSONField):
            value = _json.dumps(value)
        extra_cols.append(f.column)
        extra_vals.append(value)
    names = [model._meta.get_field(c).column for c in columns] + extra_cols
    table = qn(model._meta.db_table)
    cols = ", ".join(qn(n) for n in names)
    extra = tuple(extra_vals)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(tuple(row) + extra)
        else:
            marks = ", ".join(["%s"] * len(names))
            batch = []
            for row in rows:
                batch.append(tuple(row) + extra)
                if len(batch) >= 50_000:
                    cursor.executemany(f"INSERT INTO {table} ({cols}) VALUES ({marks})", batch)
                    batch = []
            if batch:
                cursor.executemany(f"INSERT INTO {table} ({cols}) VALUES ({marks})", batch)


def generate(n_traces: int, mean_steps: int, seed: int = 0, thought: bool = False):
    """The study. With ``thought`` every trace thinks: all but its last two steps are thought steps
    in R1's manner (a calculation every third paragraph, a false one where the label is invalid,
    re-derived right two paragraphs later half of the time), so recoveries have real text to match."""
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from annotation import services as annotation_services
    from annotation.models import Membership, Problem, Step, StepLabel, Trace, TraceReview

    rng = random.Random(seed)
    User = get_user_model()
    study, _ = annotation_services.do_get_or_create_study(f"score-bench-{n_traces}")
    annotator = User.objects.create_user("bench-annotator")
    viewer = User.objects.create_user("bench-viewer")
    Membership.objects.create(study=study, user=viewer, role=Membership.Role.OWNER)
    n_problems = max(1, n_traces // 10)
    domains = ["arithmetic", "algebra", "geometry"]
    with transaction.atomic():
        l_gold = [0 if rng.random() < 0.2 else rng.randint(2, 6) for _ in range(n_problems)]
        bulk_insert(Problem, ["study", "problem_id", "statement", "gold_answer", "domain", "l_gold"],
                    ((study.pk, f"p{p:06d}", f"problem {p}", "1", domains[p % 3], l_gold[p]) for p in range(n_problems)))
        problem_pk = dict(Problem.objects.filter(study=study).values_list("problem_id", "pk"))
        # Mean ``mean_steps``; one trace in 200 is empty.
        lengths = [0 if rng.random() < 0.005 else rng.randint(mean_steps - 5, mean_steps + 5) for _ in range(n_traces)]
        n_thought = [max(0, n - 2) if thought else 0 for n in lengths]
        bulk_insert(Trace, ["study", "problem", "model", "trace_id", "answer_correct", "n_steps", "empty", "steps_hash",
                            "n_thought_steps"],
                    ((study.pk, problem_pk[f"p{t // 10:06d}"], f"model-{t % 4}", f"t{t:07d}", rng.random() < 0.7,
                      lengths[t], lengths[t] == 0, "x", n_thought[t]) for t in range(n_traces)))
        traces = list(Trace.objects.filter(study=study).order_by("pk").values_list("pk", "n_steps", "problem_id",
                                                                                  "n_thought_steps"))
        verdicts = []
        for _pk, n, _p, _t in traces:
            row = []
            for _ in range(n):
                r = rng.random()
                row.append("invalid" if r < 0.04 else ("neutral" if r < 0.12 else "valid"))
            verdicts.append(row)

        def steps():
            for (pk, n, _p, t), vs in zip(traces, verdicts, strict=True):
                redo = {}
                for i in range(1, n + 1):
                    channel = "thought" if i <= t else "answer"
                    a, b = 10 + (pk + i) % 90, 1 + i % 9
                    if not thought:
                        text = "step"
                    elif vs[i - 1] == "invalid":
                        text = f"So {a} - {b} = {a - b + 1}, I think."
                        if rng.random() < 0.5:
                            redo[i + 2] = (a, b)
                    elif i in redo and vs[i - 1] != "invalid":
                        a, b = redo[i]
                        text = f"Wait, let me recompute: {a} - {b} = {a - b}."
                    elif i % 3 == 0:
                        text = f"Then {a} - {b} = {a - b}."
                    else:
                        text = "Hmm, let me think about what the question asks before going on."
                    yield (pk, i, text, channel)

        bulk_insert(Step, ["trace", "index", "text", "channel"], steps())
        # A list, not a server-side cursor: the connection is busy with COPY while labels are written.
        step_pk = list(Step.objects.filter(trace__study=study).order_by("trace_id", "index").values_list("pk", flat=True))
        lg = dict(Problem.objects.filter(study=study).values_list("pk", "l_gold"))

        def labels():
            it = iter(step_pk)
            for (_tpk, n, ppk, _t), vs in zip(traces, verdicts, strict=True):
                L = lg[ppk]
                for i in range(n):
                    verdict = vs[i]
                    refs = f"[{rng.randint(1, L)}]" if verdict == "valid" and L else "[]"
                    yield (next(it), "human", annotator.pk, verdict, refs)

        bulk_insert(StepLabel, ["step", "kind", "annotator", "verdict", "skeleton_refs"], labels())
        bulk_insert(TraceReview, ["trace", "annotator", "complete", "version"],
                    ((pk, annotator.pk, True, 1) for pk, _, _, _ in traces))
    n_steps = sum(n for _, n, _, _ in traces)
    return study, viewer, n_steps


def timed(fn, repeat: int = 1):
    best, value = None, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None else min(best, elapsed)
    return best, value


def thought_timings(study) -> dict:
    """Scoring and hazard of the thought channel over the whole study: the recompute of one
    profile that reads the thought (database read, recoveries, scores, write), and the pure
    arithmetic alone on the tables it read (scoring.core)."""
    from scoring import score_jobs, services, sources
    from scoring.core.scores import estimate_hazard, score_traces
    from scoring.core.thought import channel_traces, relative_hazard_profile

    services.do_create_profile(study, "bench-thought", {"channels": "thought"})
    t = time.perf_counter()
    result = score_jobs.recompute(study, profiles=["bench-thought"], warm=False)
    recompute_seconds = time.perf_counter() - t
    inputs = sources.read_inputs(study)
    steps = sources.source_steps(inputs, "human")
    t = time.perf_counter()
    tr, st = channel_traces(inputs.traces, steps, "thought")
    hazard = estimate_hazard(tr, st)
    scored = score_traces(tr, st, hazard=hazard)
    relative = relative_hazard_profile(scored["n_steps"], scored["first_error"])
    core_seconds = time.perf_counter() - t
    t = time.perf_counter()
    claims = sources.read_claims(score_jobs.thought_error_steps(inputs))
    claims_seconds = time.perf_counter() - t
    t = time.perf_counter()
    rec_by_trace, recovered = score_jobs.recovery_of(inputs.traces, steps, claims)
    recovery_seconds = time.perf_counter() - t
    return {
        "thought_steps": int(inputs.traces["n_thought_steps"].sum()),
        "recompute_thought_profile_seconds": round(recompute_seconds, 2),
        "recompute_parts": result["seconds"],
        "scores_and_hazards_pure_seconds": round(core_seconds, 2),
        "relative_hazard_bins": len(relative),
        "read_and_parse_claims_seconds": round(claims_seconds, 2),
        "claims_parsed_steps": len(claims),
        "recoveries_pure_seconds": round(recovery_seconds, 2),
        "thought_errors": int(rec_by_trace["thought_errors"].sum()),
        "recovered": len(recovered),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=10, help="mean steps per trace")
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL scratch database")
    parser.add_argument("--thought", action="store_true",
                        help="traces think (all but the last two steps are thought steps): also times the scores "
                             "of the thought channel, the hazard by relative position and the recoveries")
    parser.add_argument("--thought-only", action="store_true",
                        help="with --thought: only the thought channel's timings (no other profile, no pages)")
    args = parser.parse_args()
    original_db = os.environ.get("DATABASE_URL", "")
    with tempfile.TemporaryDirectory() as tmp:
        database, scratch = setup_django(tmp)
        try:
            report = run(args, database)
        finally:
            from django.db import connections

            connections.close_all()
            if scratch and not args.keep:
                _drop_postgres(original_db, scratch)
    print(json.dumps(report, indent=2))


def run(args, database: str) -> dict:
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client

    from scoring import score_jobs, services, sources, storage
    from scoring.models import ScoreSet

    t0 = time.perf_counter()
    study, viewer, n_steps = generate(args.traces, args.steps, thought=args.thought or args.thought_only)
    gen_seconds = time.perf_counter() - t0
    if args.thought_only:
        return {"machine": machine(), "database": database, "traces": args.traces, "steps": n_steps,
                "generate_seconds": round(gen_seconds, 1), "thought": thought_timings(study)}
    if connection.vendor == "postgresql":
        with connection.cursor() as c:
            c.execute("ANALYZE")

    # The default profiles first (what an import would trigger), then the timed rescoring under a new profile.
    t = time.perf_counter()
    everything = score_jobs.recompute(study, warm=False)
    all_profiles_seconds = time.perf_counter() - t
    services.do_create_profile(study, "bench-new", {"w": 0.6, "tau": 2.5})  # queued job never runs: no worker
    read_labels_seconds, _ = timed(lambda: sources.read_labels(study.pk))
    t = time.perf_counter()
    result = score_jobs.recompute(study, profiles=["bench-new"], warm=False)
    rescoring = time.perf_counter() - t

    # Split the read of the labels into the query (rows fetched) and building the table.
    fetch_seconds, rows = timed(lambda: sources._fetch(*sources.labels_query(study.pk)))
    n_labels = len(rows)
    del rows

    # Pages, as a signed-in owner (sees everything).
    client = Client()
    client.force_login(viewer)
    base = f"/studies/{study.pk}/analytics/"
    pages = {"leaderboard page": base, "hazard page": f"{base}hazard/",
             "leaderboard API": f"/api/v1/studies/{study.pk}/leaderboard/",
             "hazard API": f"/api/v1/studies/{study.pk}/hazard/"}
    page_times = {}
    client.get(f"/studies/{study.pk}/profiles/")  # first request of the process: imports, URL conf, templates
    cache.clear()
    for name, url in pages.items():
        cold, response = timed(lambda url=url: client.get(url))
        assert response.status_code == 200, (url, response.status_code)
        warm, _ = timed(lambda url=url: client.get(url), repeat=5)
        page_times[name] = {"cold_ms": round(1000 * cold, 1), "warm_ms": round(1000 * warm, 1)}
    # What a recompute leaves behind: score_jobs.recompute warms the default view.
    cache.clear()
    profile = services.default_profile(study)
    warm_seconds, _ = timed(lambda: __import__("scoring.analytics").analytics.warm(study, profile))
    after_recompute, _ = timed(lambda: client.get(base), repeat=3)
    score_set = ScoreSet.objects.get(study=study, source="final", profile=profile)
    read_scores_seconds, frame = timed(lambda: storage.read_scores(score_set), repeat=3)

    thought_report = thought_timings(study) if args.thought else None
    return {
        "thought": thought_report,
        "machine": machine(),
        "database": database,
        "traces": args.traces,
        "steps": n_steps,
        "labels": n_labels,
        "generate_seconds": round(gen_seconds, 1),
        "rescore_new_profile": {
            "seconds_total": round(rescoring, 2),
            "sources": result["sources"],
            "rows_written": result["rows"],
            "parts": result["seconds"],
            "read_labels_into_pandas_seconds": round(read_labels_seconds, 2),
            "of_which_query_and_fetch_seconds": round(fetch_seconds, 2),
        },
        "recompute_after_import": {
            "what": "every source x the 4 built-in profiles (what an import triggers)",
            "seconds_total": round(all_profiles_seconds, 2),
            "rows_written": everything["rows"],
            "parts": everything["seconds"],
        },
        "pages": page_times,
        "warm_cache_after_recompute_seconds": round(warm_seconds, 2),
        "leaderboard_page_after_recompute_ms": round(1000 * after_recompute, 1),
        "read_stored_scores_ms": round(1000 * read_scores_seconds, 1),
        "stored_rows_per_set": len(frame),
    }


if __name__ == "__main__":
    main()
