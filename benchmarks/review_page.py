"""Server time of the review workflow, measured in process with Django's test
client (the whole request: middleware, session, queries, rendering):

* the review page of a 200-step, ~50 kB trace (blind, and revealed with two
  other annotators' and a judge's labels on every step);
* a label save of that trace through the web form (htmx) and the labels API;
* the problem and trace lists (web and API) of a study with 100,000 traces:
  time and number of queries;
* ``--thought``: the review page of a trace that thinks for 5,000 steps
  against one that thinks for 50 (server time; the long one in blocks that
  htmx loads), one block's load, and in Chromium the time until the page is
  interactive (review.js has selected the first unlabelled step, whose block
  had to load first). ``--thought-only`` measures just that (SQLite works).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ra_bench_review .venv/bin/python benchmarks/review_page.py

The database is created if missing and reused: the 100k-trace study is
imported once (with annotation.importing.pipeline.import_stream). Prints one
JSON object; medians in milliseconds.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/ra_bench_review"


def _ensure_database(url: str) -> None:
    if not url.startswith("postgres"):
        return
    from urllib.parse import urlparse

    import psycopg

    u = urlparse(url)
    name = u.path.lstrip("/")
    admin = f"host={u.hostname or '127.0.0.1'} port={u.port or 5432} user={u.username or 'postgres'} dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _setup(url: str, data_dir: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("REASONAUDIT_DATA_DIR", data_dir)
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    os.environ["DJANGO_DEBUG"] = "false"  # no query log, cached templates: as in production
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")
    os.environ.setdefault("CELERY_BROKER_URL", "filesystem://")
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


def _time(fn, n: int, warmup: int = 3) -> dict:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return {"median_ms": round(statistics.median(samples), 1), "p90_ms": round(samples[int(0.9 * (n - 1))], 1),
            "n": n}


def _queries(fn) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        fn()
    return len(ctx.captured_queries)


def _users():
    from django.contrib.auth import get_user_model

    User = get_user_model()
    out = {}
    for name in ("bench-alice", "bench-bob", "bench-carol", "bench-owner"):
        user, _ = User.objects.get_or_create(username=name)
        out[name] = user
    return out


def _review_study(users):
    """A study with one 200-step (~50 kB) trace, a 10-step skeleton, and the
    labels of two other annotators and a judge on every step."""
    from annotation import services
    from annotation.importing.pipeline import import_stream
    from annotation.models import Membership, Step, StepLabel, Trace
    from annotation.review.labels import LabelIn, do_save_labels
    from judges.models import JudgeConfig

    study, _ = services.do_get_or_create_study("bench-review", owner=users["bench-owner"])
    for name in ("bench-alice", "bench-bob", "bench-carol"):
        services.do_add_member(study, name, Membership.Role.ANNOTATOR)
    trace = Trace.objects.filter(study=study, trace_id="long-200").first()
    if trace is None:
        steps = [f"Step {i}: we have {i} boxes with {i + 3} apples each, so {i} * {i + 3} = {i * (i + 3)} apples; "
                 f"adding the {2 * i} loose ones gives {i * (i + 3)} + {2 * i} = {i * (i + 3) + 2 * i} in all, "
                 f"which we carry into the next step of the argument before checking it once more, counting the boxes again and then the apples." for i in range(1, 201)]
        data = "\n".join(json.dumps(r) for r in [
            {"kind": "problem", "problem_id": "long-200", "statement": "How many apples are there in the end?",
             "gold_answer": "42", "skeleton": [{"text": f"Fact {k}: $x_{k} = {k}$", "check": f"{k}+0={k}"}
                                               for k in range(1, 11)]},
            {"kind": "trace", "problem_id": "long-200", "model": "m", "trace_id": "long-200", "steps": steps, "answer": "42"},
        ]).encode()
        report = import_stream(study, io.BytesIO(data), "reasonaudit")
        assert report.committed, report.rejected
        trace = Trace.objects.get(study=study, trace_id="long-200")
        for name, verdict in (("bench-bob", "valid"), ("bench-carol", "invalid")):
            do_save_labels(trace, users[name], version=0, via="api", labels=[
                LabelIn(i, verdict, [1 + i % 10], note="checked") for i in range(1, 201)])
        judge, _ = JudgeConfig.objects.get_or_create(study=study, name="bench-judge", defaults={"provider": "fake"})
        now = trace.created_at
        StepLabel.objects.bulk_create([
            StepLabel(step=s, kind="judge", judge=judge, verdict="valid", reason="the arithmetic holds",
                      created_at=now, updated_at=now) for s in Step.objects.filter(trace=trace)])
    return study, Trace.objects.select_related("problem", "study").get(pk=trace.pk)


def _vacuum() -> None:
    """What autovacuum does soon after a big import: statistics for the
    planner and the visibility map (index-only scans for COUNT)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("VACUUM ANALYZE")


def _big_study(users, n_traces: int):
    """A study with ``n_traces`` traces (5 steps each, 10 per problem, 4 models)."""
    from annotation import services
    from annotation.importing.pipeline import import_stream
    from annotation.models import Membership, Trace

    study, _ = services.do_get_or_create_study(f"bench-{n_traces}", owner=users["bench-owner"])
    services.do_add_member(study, "bench-alice", Membership.Role.ANNOTATOR)
    have = Trace.objects.filter(study=study).count()
    if have >= n_traces:
        _vacuum()
        return study, have
    t0 = time.perf_counter()
    per = 10
    batch: list[str] = []

    def flush():
        report = import_stream(study, io.BytesIO("\n".join(batch).encode()), "reasonaudit")
        assert report.committed, report.rejected[:3]
        batch.clear()

    for p in range(have // per, n_traces // per):
        a, b = 2 + p % 97, 3 + p % 89
        batch.append(json.dumps({"kind": "problem", "problem_id": f"gen-{p:06d}",
                                 "statement": f"Tom has {a} apples and buys {b} more. How many now?",
                                 "gold_answer": str(a + b), "domain": ("arithmetic", "algebra")[p % 2],
                                 "tags": ["gen", f"t{p % 7}"],
                                 "skeleton": [{"text": f"{a} + {b} = {a + b}", "check": f"{a}+{b}={a + b}"}]}))
        for m in range(per):
            wrong = m == 3
            batch.append(json.dumps({
                "kind": "trace", "problem_id": f"gen-{p:06d}", "model": f"model-{m % 4}", "trace_id": f"gen-{p:06d}/{m}",
                "steps": [f"Tom starts with {a} apples.", f"He buys {b} more.", f"{a} + {b} = {a + b + wrong}",
                          "So that is the total.", f"The count is {a + b + wrong}."],
                "answer": str(a + b + wrong), "answer_correct": not wrong}))
        if len(batch) >= 22_000:
            flush()
    if batch:
        flush()
    print(f"imported {n_traces - have} traces in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    _vacuum()
    return study, Trace.objects.filter(study=study).count()


def _thought_traces(users):
    """A study with a 50-step and a 5,000-step thought (each then a 2-step answer), R1-style."""
    from annotation import services
    from annotation.models import Membership, Problem, Step, Trace

    study, _ = services.do_get_or_create_study("bench-thought", owner=users["bench-owner"])
    services.do_add_member(study, "bench-alice", Membership.Role.ANNOTATOR)
    problem, _ = Problem.objects.get_or_create(study=study, problem_id="eggs", defaults={
        "statement": "Janet's ducks lay 16 eggs per day ...", "gold_answer": "18"})
    lines = ["Let me think about how many eggs Janet sells each day at the market.",
             "She has 16 eggs and eats 3 for breakfast, so 16 - 3 = 13 are left for now.",
             "Wait, she also bakes muffins for her friends with 4 of them: 13 - 4 = 9.",
             "Hmm, so 9 eggs are sold at 2 dollars each at the farmers' market.",
             "That gives 9 * 2 = 18 dollars a day, if I have read the problem right."]
    out = {}
    for n in (50, 5000):
        trace = Trace.objects.filter(study=study, trace_id=f"think-{n}").first()
        if trace is None:
            thought = [f"{lines[i % 5]} (paragraph {i + 1})" for i in range(n)]
            answer = ["Janet sells 9 eggs at $2: 9 * 2 = 18", "The answer is 18."]
            trace = Trace.objects.create(study=study, problem=problem, model="r1", trace_id=f"think-{n}",
                                         thought="\n\n".join(thought), raw="\n".join(answer), answer="18",
                                         n_steps=n + 2, n_thought_steps=n, steps_hash=f"think-{n}")
            Step.objects.bulk_create(
                [Step(trace=trace, index=i, text=t, channel="thought") for i, t in enumerate(thought, start=1)]
                + [Step(trace=trace, index=n + i, text=t, channel="answer") for i, t in enumerate(answer, start=1)],
                batch_size=2000)
        out[n] = trace
    return study, out


_READY_OBSERVER = """
new MutationObserver(function (changes, observer) {
  if (document.querySelector("li.step.current")) {
    window.__stepSelectedAt = performance.now();
    observer.disconnect();
  }
}).observe(document, {subtree: true, childList: true, attributes: true, attributeFilter: ["class"]});
"""


def _chromium_interactive(url: str, session_cookie: str, runs: int = 5) -> dict:
    """Median ms from navigation start until review.js has selected a step (the first
    unlabelled one, after its block loaded), over ``runs`` cold page loads in Debian's chromium."""
    from playwright.sync_api import sync_playwright

    samples, dom = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        try:
            for _ in range(runs):
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                host = url.split("/")[2].split(":")[0]
                context.add_cookies([{"name": "sessionid", "value": session_cookie, "domain": host, "path": "/"}])
                page = context.new_page()
                # The moment review.js marks a step current, taken inside the page (a polling
                # wait_for_selector would add its own polling delay to the figure).
                page.add_init_script(_READY_OBSERVER)
                page.goto(url)
                page.wait_for_selector("li.step.current", timeout=30_000)
                t = page.evaluate("window.__stepSelectedAt")
                nav = page.evaluate("JSON.parse(JSON.stringify(performance.getEntriesByType('navigation')[0]))")
                samples.append(t)
                dom.append(nav["domInteractive"])
                context.close()
        finally:
            browser.close()
    return {"interactive_ms": round(statistics.median(samples)), "dom_interactive_ms": round(statistics.median(dom)),
            "runs": runs}


def thought_benchmark(users, n: int) -> dict:
    import threading
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.wsgi import get_wsgi_application
    from django.test import Client
    from django.urls import reverse

    _study, traces = _thought_traces(users)
    web = Client()
    web.force_login(users["bench-alice"])
    out: dict = {}
    for steps, trace in traces.items():
        page = reverse("trace", args=[trace.pk])

        def get(page=page):
            response = web.get(page)
            assert response.status_code == 200
            return response

        out[f"page_{steps}_thought_steps"] = {**_time(get, n), "queries": _queries(get),
                                               "html_kb": round(len(get().content) / 1024)}
    block = reverse("trace-thought", args=[traces[5000].pk]) + "?block=25"

    def get_block():
        assert web.get(block).status_code == 200

    out["one_block_of_100_steps"] = {**_time(get_block, n), "queries": _queries(get_block)}
    out["ratio_5000_to_50"] = round(out["page_5000_thought_steps"]["median_ms"]
                                    / out["page_50_thought_steps"]["median_ms"], 2)

    class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    from django.test.utils import override_settings

    with override_settings(ALLOWED_HOSTS=["*"], DEBUG=False):
        # Threaded, as runserver and gunicorn's workers are: a browser fetches the page's scripts
        # and styles over several connections at once.
        server = make_server("127.0.0.1", 0, StaticFilesHandler(get_wsgi_application()),
                             server_class=ThreadingWSGIServer, handler_class=Quiet)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            base = f"http://127.0.0.1:{server.server_port}"
            cookie = web.cookies["sessionid"].value
            for steps, trace in traces.items():
                out[f"chromium_{steps}_thought_steps"] = _chromium_interactive(
                    f"{base}{reverse('trace', args=[trace.pk])}", cookie)
        finally:
            server.shutdown()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--thought", action="store_true", help="also the review page of a 5,000-step thought")
    parser.add_argument("--thought-only", action="store_true", help="only the thought measurements")
    parser.add_argument("--traces", type=int, default=100_000, help="traces in the big study")
    parser.add_argument("--n", type=int, default=50, help="timed requests per measurement")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", DEFAULT_DB)
    _ensure_database(url)
    tmp = tempfile.mkdtemp(prefix="ra-bench-review-")
    _setup(url, tmp)

    from _util import machine
    from django.db import connection
    from django.test import Client
    from django.urls import reverse
    from rest_framework.test import APIClient

    from annotation.models import Step, TraceReview

    users = _users()
    if args.thought or args.thought_only:
        thought = thought_benchmark(users, max(10, args.n // 2))
        if args.thought_only:
            print(json.dumps({"machine": machine(), "database": connection.vendor, "thought": thought}, indent=2))
            return
    study, trace = _review_study(users)
    out: dict = {"machine": machine(), "database": connection.vendor,
                 "trace": {"steps": trace.n_steps, "bytes": sum(len(t) for t in Step.objects.filter(trace=trace)
                                                                 .values_list("text", flat=True))}}

    web = Client()
    web.force_login(users["bench-alice"])
    page = reverse("trace", args=[trace.pk])

    def get_page():
        response = web.get(page)
        assert response.status_code == 200
        return response

    # Blind: alice has not finished, so only her own labels are read.
    TraceReview.objects.filter(trace=trace, annotator=users["bench-alice"]).delete()
    from annotation.models import StepLabel

    StepLabel.objects.filter(step__trace=trace, annotator=users["bench-alice"]).delete()
    out["review_page_blind"] = {**_time(get_page, args.n), "queries": _queries(get_page),
                                "html_kb": round(len(get_page().content) / 1024)}

    # A save through the web form (htmx): all 200 labels sent, one changed each time.
    version = {"v": 0}
    state = {i: "valid" for i in range(1, 201)}
    flip = {"i": 0}

    def save_web():
        flip["i"] = flip["i"] % 200 + 1
        state[flip["i"]] = "invalid" if state[flip["i"]] == "valid" else "valid"
        data = {"version": version["v"], "action": "save"}
        for i, v in state.items():
            data[f"v{i}"] = v
            data[f"r{i}"] = [str(1 + i % 10)]
            data[f"n{i}"] = ""
        # Encoded as htmx sends a form (urlencoded), not as the test client's default multipart.
        response = web.post(reverse("trace-review", args=[trace.pk]), urlencode(data, doseq=True),
                            content_type="application/x-www-form-urlencoded", HTTP_HX_REQUEST="true")
        assert response.status_code == 200, response.content[:300]
        version["v"] += 1

    # The first save creates 200 labels (and completes the trace); later ones change one.
    t0 = time.perf_counter()
    save_web()
    out["first_save_200_labels_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    out["label_save_web"] = {**_time(save_web, args.n), "queries": _queries(save_web)}

    api = APIClient()
    api.force_authenticate(users["bench-alice"])

    def save_api():
        flip["i"] = flip["i"] % 200 + 1
        state[flip["i"]] = "invalid" if state[flip["i"]] == "valid" else "valid"
        body = {"version": version["v"], "complete": True, "rating": None,
                "labels": [{"step": i, "verdict": v, "skeleton_refs": [1 + i % 10], "note": ""} for i, v in state.items()]}
        response = api.put(f"/api/v1/traces/{trace.pk}/labels/", body, format="json")
        assert response.status_code == 200, response.content[:300]
        version["v"] += 1

    out["label_save_api"] = {**_time(save_api, args.n), "queries": _queries(save_api)}
    # Revealed: alice finished, so bob's, carol's and the judge's labels show too (800 labels).
    out["review_page_revealed"] = {**_time(get_page, args.n), "queries": _queries(get_page),
                                   "html_kb": round(len(get_page().content) / 1024)}

    big, n = _big_study(users, args.traces)
    out["big_study_traces"] = n
    owner_web = Client()  # an annotator's view of the lists
    owner_web.force_login(users["bench-alice"])
    owner_api = APIClient()
    owner_api.force_authenticate(users["bench-alice"])
    boss = Client()
    boss.force_login(users["bench-owner"])
    lists = {
        "problem_list": (owner_web, reverse("problem-list", args=[big.pk])),
        "problem_list_filtered": (owner_web, reverse("problem-list", args=[big.pk]) + "?domain=algebra&tag=t3&skeleton=yes"),
        "problem_list_page_100": (owner_web, reverse("problem-list", args=[big.pk]) + "?page=100"),
        "trace_list": (owner_web, reverse("trace-list", args=[big.pk])),
        "trace_list_filtered": (owner_web, reverse("trace-list", args=[big.pk]) + "?model=model-2&answer_correct=true"),
        "trace_list_page_1000": (owner_web, reverse("trace-list", args=[big.pk]) + "?page=1000"),
        "api_problems": (owner_api, f"/api/v1/studies/{big.pk}/problems/"),
        "api_traces": (owner_api, f"/api/v1/studies/{big.pk}/traces/"),
        "api_traces_filtered": (owner_api, f"/api/v1/studies/{big.pk}/traces/?model=model-1&domain=algebra&answer_correct=false"),
        "api_traces_needs_review": (owner_api, f"/api/v1/studies/{big.pk}/traces/?needs_review=true"),
        # For information: pages that aggregate over the whole study.
        "studies_page": (owner_web, reverse("studies")),
        "adjudication_page": (boss, reverse("adjudication", args=[big.pk])),
        "queue_page_owner": (boss, reverse("queue", args=[big.pk])),
    }
    for name, (client, path) in lists.items():
        def get(client=client, path=path):
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)

        out[name] = {**_time(get, max(10, args.n // 2)), "queries": _queries(get)}
    if args.thought:
        out["thought"] = thought
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
