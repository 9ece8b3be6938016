"""Import at scale on PostgreSQL against a bare COPY of the same rows (issue 33, items 2 and 4).

The file is page_speed.py's generated study (10 traces per problem over 4 models, a one-step skeleton per
problem, two annotators' labels on one trace in ten and one annotator's on another: 4 labels per 10 steps of
those), written once as one canonical JSONL file. Each side runs in its own process into its own new
database (migrated first, not timed), and times only its own work, Django start-up excluded on both:

* ``import``: ``import_stream`` of the whole file in one transaction, as ``import_traces`` runs it (reading,
  validation, answer checks, the writes, the commit);
* ``bare COPY``: the floor -- read the same file, ``json.loads`` each line and COPY the rows the import
  writes (problems, skeletons and their steps, traces, steps, labels, reviews, label history: the same
  tables and columns, so the same indexes and the steps' search column) with keys counted in Python and no
  checks, in one transaction.

After the import, the rows each table was read by sequential scans and index scans (pg_stat_user_tables):
a count that grows faster than the data is a plan that re-reads what was imported before. Each side also
reports the CPU time of its PostgreSQL backend (from /proc: the server runs on this machine), which other
work on the cores moves much less than wall time.

    python benchmarks/import_scale.py --traces 100000 300000 --steps-per-trace 10 \\
        --database-url postgres://postgres@127.0.0.1:5432/ra_import_scale
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import PY, ROOT, machine, run_usage, scratch_postgres  # noqa: E402

STUDY = "import-scale"


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def _drop(url: str, name: str) -> None:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    admin = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def write_file(path: Path, n_traces: int, steps: int) -> None:
    from page_speed import _generated_lines

    with path.open("w", encoding="utf-8") as fh:
        for rec in _generated_lines(n_traces, steps):
            fh.write(json.dumps(rec) + "\n")


# --- children (one per side and run, in their own database) --------------------------------------------


def _child_setup(url: str, data_dir: str):
    os.environ.update({"DATABASE_URL": url, "REASONAUDIT_DATA_DIR": data_dir, "DJANGO_DEBUG": "false",
                       "SECRET_KEY": "benchmark-only-secret-key", "CELERY_BROKER_URL": "memory://",
                       "DJANGO_SETTINGS_MODULE": "reasonaudit.settings"})
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from annotation import services

    study, _ = services.do_get_or_create_study(STUDY)
    return study


def _server_cpu() -> float:
    """CPU seconds (user + system) of this connection's PostgreSQL backend so far, from /proc: the server is
    on this machine. Less moved by other work on the cores than wall time."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _table_reads() -> dict[str, dict[str, int]]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT relname, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch FROM pg_stat_user_tables "
                    "WHERE relname LIKE 'annotation_%%' AND (seq_tup_read > 0 OR idx_tup_fetch > 0)")
        return {r[0]: {"seq_scans": r[1], "seq_rows": r[2], "idx_scans": r[3] or 0, "idx_rows": r[4] or 0}
                for r in cur.fetchall()}


def child_import(url: str, data: str, data_dir: str) -> None:
    study = _child_setup(url, data_dir)
    from annotation.importing.pipeline import import_stream

    s0 = _server_cpu()
    t0, c0 = time.perf_counter(), time.process_time()
    with open(data, "rb") as fh:
        report = import_stream(study, fh, "reasonaudit")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    server = _server_cpu() - s0
    assert report.committed, report.rejected[:3]
    time.sleep(1)  # the statistics collector's report of this backend's reads
    print(json.dumps({"wall_s": wall, "client_cpu_s": cpu, "server_cpu_s": round(server, 1),
                      "traces": report.traces_created,
                      "steps": report.steps_created, "labels": report.labels_created, "reads": _table_reads()}))


def child_bare(url: str, data: str, data_dir: str) -> None:
    """COPY of the rows the import writes, keys counted here, values as the file gives them."""
    study = _child_setup(url, data_dir)
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from annotation.importing.pipeline import _LABEL_FIELDS, _REVIEW_FIELDS, _TRACE_FIELDS
    from annotation.models import LabelHistory, Problem, Skeleton, SkeletonStep, Step, StepLabel, Trace, TraceReview

    users = {}
    for name in ("pages-ann-1", "pages-ann-2"):
        users[name] = get_user_model().objects.get_or_create(username=name)[0].pk

    def cols(model, fields):
        return ", ".join(f'"{model._meta.get_field(f).column}"' for f in fields)

    s0 = _server_cpu()
    t0, c0 = time.perf_counter(), time.process_time()
    now = timezone.now()
    counts = dict.fromkeys(("problems", "traces", "steps", "labels"), 0)
    with transaction.atomic(), connection.cursor() as wrapper:
        cur = wrapper.cursor
        # One COPY at a time per connection: each table's rows are gathered per 50,000 lines and sent.
        problem_pk = trace_pk = step_pk = label_pk = 0
        buf: dict[str, list[tuple]] = {k: [] for k in ("problem", "skeleton", "sstep", "trace", "step", "label",
                                                       "review", "history")}
        statements = {
            "problem": (Problem, ["id", "study", "problem_id", "statement", "gold_answer", "domain", "tags", "meta",
                                  "l_gold", "created_at", "approved_skeleton"]),
            "skeleton": (Skeleton, ["id", "problem", "version", "status", "created_at", "approved_at", "note"]),
            "sstep": (SkeletonStep, ["skeleton", "position", "text", "check_expr"]),
            "trace": (Trace, ["id", *_TRACE_FIELDS]),
            "step": (Step, ["id", "trace", "index", "channel", "text", "start", "end"]),
            "label": (StepLabel, ["id", *_LABEL_FIELDS]),
            "review": (TraceReview, _REVIEW_FIELDS),
            "history": (LabelHistory, ["step", "label", "kind", "source_name", "actor", "at", "before", "after",
                                       "via"]),
        }

        def send() -> None:
            for key, rows in buf.items():
                model, fields = statements[key]
                with cur.copy(f'COPY "{model._meta.db_table}" ({cols(model, fields)}) FROM STDIN') as copy:
                    for row in rows:
                        copy.write_row(row)
                rows.clear()

        problems: dict[str, int] = {}
        with open(data, encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                rec = json.loads(line)
                if rec["kind"] == "problem":
                    problem_pk += 1
                    problems[rec["problem_id"]] = problem_pk
                    buf["problem"].append((problem_pk, study.pk, rec["problem_id"], rec["statement"],
                                           rec["gold_answer"], rec["domain"], json.dumps(rec["tags"]), "{}",
                                           len(rec["skeleton"]), now, problem_pk))
                    buf["skeleton"].append((problem_pk, problem_pk, 1, "approved", now, now, "imported"))
                    for k, s in enumerate(rec["skeleton"], start=1):
                        buf["sstep"].append((problem_pk, k, s["text"], s["check"]))
                    counts["problems"] += 1
                else:
                    trace_pk += 1
                    body = rec["steps"]
                    buf["trace"].append((trace_pk, study.pk, problems[rec["problem_id"]], rec["model"],
                                         rec["trace_id"], "\n".join(body), "", rec["answer"], None, "none", None,
                                         len(body), 0, False, False, "", False, "{}", now, json.dumps(rec["regime"])))
                    first = step_pk + 1
                    for k, text in enumerate(body, start=1):
                        step_pk += 1
                        buf["step"].append((step_pk, trace_pk, k, "answer", text, None, None))
                    for lab in rec["labels"]:
                        label_pk += 1
                        after = json.dumps({"verdict": lab["verdict"], "skeleton_refs": [], "confidence": None,
                                            "reason": lab["note"]})
                        step = first + lab["step"] - 1
                        buf["label"].append((label_pk, step, "human", users[lab["annotator"]], None, lab["verdict"],
                                             "[]", None, lab["note"], 1, now, now))
                        buf["history"].append((step, label_pk, "human", lab["annotator"], None, now, None, after,
                                               "import"))
                    for name in dict.fromkeys(lab["annotator"] for lab in rec["labels"]):
                        buf["review"].append((trace_pk, users[name], 1, True, None, "", False, now, ""))
                    counts["traces"] += 1
                    counts["steps"] += len(body)
                    counts["labels"] += len(rec["labels"])
                if n % 50_000 == 0:
                    send()
        send()
        for model, last in ((Problem, problem_pk), (Skeleton, problem_pk), (Trace, trace_pk), (Step, step_pk),
                            (StepLabel, label_pk)):
            cur.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", [model._meta.db_table, max(last, 1)])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"wall_s": wall, "client_cpu_s": cpu, "server_cpu_s": round(_server_cpu() - s0, 1), **counts}))


# --- parent -----------------------------------------------------------------------------------------------


def run_side(side: str, data: Path, pg_url: str, tmp: str) -> dict[str, Any]:
    url, name = scratch_postgres(pg_url, f"{pg_url.rsplit('/', 1)[1]}_{side}")
    try:
        load_before = _uptime()
        wall, cpu, rss, out = run_usage([PY, __file__, "--child", side, url, str(data), tmp])
        result = json.loads(out.strip().splitlines()[-1])
        result.update(process_wall_s=round(wall, 1), process_cpu_s=round(cpu, 1), peak_rss_mib=rss,
                      uptime_before=load_before, uptime_after=_uptime())
        result["wall_s"], result["client_cpu_s"] = round(result["wall_s"], 1), round(result["client_cpu_s"], 1)
        return result
    finally:
        _drop(pg_url, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, nargs="+", default=[100_000])
    parser.add_argument("--steps-per-trace", type=int, default=10)
    parser.add_argument("--sides", nargs="+", default=["import", "bare"], choices=["import", "bare"])
    parser.add_argument("--database-url", help="postgres://...; new databases are made beside it")
    parser.add_argument("--child", nargs=4, metavar=("SIDE", "URL", "FILE", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side, url, data, data_dir = args.child
        (child_import if side == "import" else child_bare)(url, data, data_dir)
        return
    if not (args.database_url or "").startswith("postgres"):
        parser.error("--database-url postgres://... is required")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.traces:
            data = Path(tmp) / f"gen_{n}.jsonl"
            write_file(data, n, args.steps_per_trace)
            row: dict[str, Any] = {"traces": n, "steps_per_trace": args.steps_per_trace,
                                   "file_mib": round(data.stat().st_size / 2**20, 1)}
            for side in args.sides:
                row[side] = run_side(side, data, args.database_url, tmp)
                print(json.dumps({n: {side: row[side]}}), file=sys.stderr, flush=True)
            if "import" in row and "bare" in row:
                row["ratio_import_to_bare"] = round(row["import"]["wall_s"] / row["bare"]["wall_s"], 2)
                row["cpu_ratio_import_to_bare (client + server)"] = round(
                    sum(row["import"][k] for k in ("client_cpu_s", "server_cpu_s"))
                    / sum(row["bare"][k] for k in ("client_cpu_s", "server_cpu_s")), 2)
            data.unlink()
            results.append(row)
    print(json.dumps({"machine": machine(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
