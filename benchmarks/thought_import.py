"""Import traces with long thoughts (default 10,000 traces, 200 thought paragraphs each: 2,000,000 thought
steps) with ``manage.py import_traces`` against a bare ``sqlite3`` ``executemany`` of the same rows, and
the importing process's peak RSS at 1x (a tenth of the traces) and 10x.

Each trace is raw output in R1's shape: ``<think>`` + paragraphs ("Wait, 12 + 7 = 19 ...") +
``</think>`` + a two-line answer. The import finds the thought with reasonlib.thinking, segments it
(paragraphs, as the runs recorded in docs/benchmarks.md did: ``--thought-segmenter paragraphs``; a new
study's default is now the reasoning moves) and the answer (lines), hashes both channels, checks the
answer, and writes everything in one transaction. The bare baseline (``--bare``, run as its own
process) parses the same JSON, splits the same text with ``str`` operations and inserts the same
trace and step rows (channel and offsets included) with ``executemany``: no validation, no hashing,
no answer check, one index per table.

Both sides are whole processes, start-up included, into a fresh database (a migrated empty one is
copied in first: the schema is not timed). Wall and CPU time (user + system) are reported: CPU time
moves less when other work shares the cores.

    python benchmarks/thought_import.py [--traces 10000] [--paragraphs 200] [--runs 1]
    python benchmarks/thought_import.py --database-url postgres://postgres@127.0.0.1:5432/ra_NAME

With --database-url both sides write to PostgreSQL: the import (which sends rows with COPY) into a
scratch migrated database, the floor (psycopg's executemany) into another; both are dropped after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import PY, machine, median, run_usage, scratch_postgres  # noqa: E402

PER_PROBLEM = 10


def drop_postgres(url: str, name: str) -> None:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    admin = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def generate(path: Path, n_traces: int, paragraphs: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with path.open("w") as fh:
        for p in range(max(1, n_traces // PER_PROBLEM)):
            a, b = rng.randint(2, 99), rng.randint(2, 99)
            fh.write(json.dumps({"kind": "problem", "problem_id": f"th-{p:06d}",
                                 "statement": f"Tom has {a} apples and buys {b} more. How many now?",
                                 "gold_answer": str(a + b)}) + "\n")
            for m in range(PER_PROBLEM):
                thought = "\n\n".join(
                    f"Wait, let me check step {k}: {a} + {k} = {a + k}, and {b} - {k % 7} = {b - k % 7}, so far so good."
                    for k in range(paragraphs)
                )
                raw = f"<think>\n{thought}\n</think>\n\n{a} + {b} = {a + b}\nThe answer is {a + b}."
                fh.write(json.dumps({"kind": "trace", "problem_id": f"th-{p:06d}", "model": f"r1-{m % 4}",
                                     "trace_id": f"th-{p:06d}/{m}", "raw": raw}) + "\n")


SCHEMA = """
CREATE TABLE problem (id INTEGER PRIMARY KEY, problem_id TEXT UNIQUE, statement TEXT, gold TEXT);
CREATE TABLE trace (id INTEGER PRIMARY KEY, problem INTEGER, model TEXT, trace_id TEXT UNIQUE, raw TEXT,
                    thought TEXT, answer TEXT, n_steps INTEGER, n_thought_steps INTEGER);
CREATE TABLE step (id {serial} PRIMARY KEY, trace INTEGER, idx INTEGER, channel TEXT, text TEXT,
                   start INTEGER, "end" INTEGER, UNIQUE (trace, idx));
"""


def bare(path: str, db: str) -> None:
    """The floor: the same rows through the driver's executemany (sqlite3, or psycopg for a postgres://
    ``db``), split with str operations."""
    if db.startswith("postgres"):
        import psycopg

        con = psycopg.connect(db)
        with con.cursor() as cur:
            cur.execute(SCHEMA.format(serial="BIGSERIAL"))
        mark = "%s"
    else:
        con = sqlite3.connect(db)
        con.executescript(SCHEMA.format(serial="INTEGER"))
        mark = "?"

    def many(sql: str, rows: list[tuple]) -> None:
        cur = con.cursor()
        cur.executemany(sql.replace("?", mark), rows)
        cur.close()
    problems: dict[str, int] = {}
    n_traces = n_steps = 0
    with con, open(path, encoding="utf-8") as fh:
        batch_t: list[tuple] = []
        batch_s: list[tuple] = []

        def flush() -> None:
            many("INSERT INTO trace VALUES (?,?,?,?,?,?,?,?,?)", batch_t)
            many('INSERT INTO step (trace, idx, channel, text, start, "end") VALUES (?,?,?,?,?,?)', batch_s)
            batch_t.clear()
            batch_s.clear()

        for line in fh:
            obj = json.loads(line)
            if obj["kind"] == "problem":
                problems[obj["problem_id"]] = pid = len(problems) + 1
                many("INSERT INTO problem VALUES (?,?,?,?)", [(pid, obj["problem_id"], obj["statement"],
                                                                obj["gold_answer"])])
                continue
            raw = obj["raw"]
            head, _, answer = raw.partition("</think>")
            thought = head.removeprefix("<think>").strip()
            n_traces += 1
            k, pos = 0, 0
            for para in thought.split("\n\n"):
                k += 1
                batch_s.append((n_traces, k, "thought", para, pos, pos + len(para)))
                pos += len(para) + 2
            t = k
            offset = len(head) + len("</think>")
            for text in answer.strip().split("\n")[:-1]:
                k += 1
                at = raw.index(text, offset)
                batch_s.append((n_traces, k, "answer", text, at, at + len(text)))
            n_steps += k
            batch_t.append((n_traces, problems[obj["problem_id"]], obj["model"], obj["trace_id"], raw, thought,
                            answer.strip().rsplit(" ", 1)[-1].rstrip("."), k, t))
            if len(batch_s) >= 50_000:  # the import's batch bound too
                flush()
        flush()
    con.close()
    print(json.dumps({"traces": n_traces, "steps": n_steps}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--paragraphs", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--database-url", help="postgres://.../NAME: import and floor into scratch NAME_<pid>_* databases")
    parser.add_argument("--bare", nargs=2, metavar=("FILE", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        bare(*args.bare)
        return
    pg = args.database_url
    if pg and not pg.startswith("postgres"):
        raise SystemExit("--database-url takes a postgres:// URL (SQLite is the default)")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {"REASONAUDIT_DATA_DIR": tmp, "DJANGO_DEBUG": "true", "CELERY_BROKER_URL": "filesystem://",
               "DATABASE_URL": f"sqlite:///{tmp}/ra.db"}
        empty = Path(tmp) / "empty.db"
        if not pg:
            run_usage([PY, "manage.py", "migrate", "-v0"], env)
            shutil.copy(Path(tmp) / "ra.db", empty)
        for scale, n in (("1x", args.traces // 10), ("10x", args.traces)):
            data = Path(tmp) / f"thoughts-{scale}.jsonl"
            generate(data, n, args.paragraphs)
            walls, cpus, peaks, bwalls, bcpus, bpeaks = [], [], [], [], [], []
            report: dict = {}
            for i in range(args.runs):
                scratch: list[str] = []
                if pg:
                    # A migrated empty database for the import, an empty one for the floor; dropped after.
                    base = pg.rsplit("/", 1)[1]
                    env["DATABASE_URL"], name = scratch_postgres(pg, f"{base}_{scale}_{i}")
                    bare_db, bare_name = scratch_postgres(pg, f"{base}_{scale}_{i}_bare")
                    scratch += [name, bare_name]
                    run_usage([PY, "manage.py", "migrate", "-v0"], env)
                else:
                    shutil.copy(empty, Path(tmp) / "ra.db")
                    for suffix in ("-wal", "-shm"):
                        (Path(tmp) / f"ra.db{suffix}").unlink(missing_ok=True)
                    bare_path = Path(tmp) / "bare.db"
                    bare_path.unlink(missing_ok=True)
                    bare_db = str(bare_path)
                wall, cpu, peak, out = run_usage(
                    [PY, "manage.py", "import_traces", str(data), "--study", f"bench-{scale}", "--json",
                     "--thought-segmenter", "paragraphs"], env)
                report = json.loads(out)
                walls.append(wall)
                cpus.append(cpu)
                peaks.append(peak)
                bwall, bcpu, bpeak, _ = run_usage([PY, __file__, "--bare", str(data), bare_db])
                for name in scratch:
                    drop_postgres(pg, name)
                bwalls.append(bwall)
                bcpus.append(bcpu)
                bpeaks.append(bpeak)
            results.append({
                "scale": scale, "traces": report["traces_created"], "steps": report["steps_created"],
                "file_mib": round(data.stat().st_size / 2**20, 1),
                "import_s": round(median(walls), 1), "import_cpu_s": round(median(cpus), 1),
                "bare_s": round(median(bwalls), 1), "bare_cpu_s": round(median(bcpus), 1),
                "ratio": round(median(walls) / median(bwalls), 2), "cpu_ratio": round(median(cpus) / median(bcpus), 2),
                "import_peak_rss_mib": max(peaks), "bare_peak_rss_mib": max(bpeaks),
            })
            data.unlink()
    print(json.dumps({"machine": machine(), "load_average": os.getloadavg(),
                      "database": "postgresql" if pg else "sqlite",
                      "results": results}, indent=2))


if __name__ == "__main__":
    main()
