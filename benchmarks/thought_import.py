"""Import traces with long thoughts (default 10,000 traces, 200 thought paragraphs each: 2,000,000 thought
steps) with ``manage.py import_traces`` against a bare ``sqlite3`` ``executemany`` of the same rows, and
the importing process's peak RSS at 1x (a tenth of the traces) and 10x.

Each trace is raw output in R1's shape: ``<think>`` + paragraphs ("Wait, 12 + 7 = 19 ...") +
``</think>`` + a two-line answer. The import finds the thought with reasonlib.thinking, segments it
(paragraphs, the thought segmenter's default) and the answer (lines), hashes both channels, checks the
answer, and writes everything in one transaction. The bare baseline (``--bare``, run as its own
process) parses the same JSON, splits the same text with ``str`` operations and inserts the same
trace and step rows (channel and offsets included) with ``executemany``: no validation, no hashing,
no answer check, one index per table.

Both sides are whole processes, start-up included, into a fresh database (a migrated empty one is
copied in first: the schema is not timed). Wall and CPU time (user + system) are reported: CPU time
moves less when other work shares the cores.

    python benchmarks/thought_import.py [--traces 10000] [--paragraphs 200] [--runs 1]
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
from _util import PY, machine, median, run_usage  # noqa: E402

PER_PROBLEM = 10


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


def bare(path: str, db: str) -> None:
    """The floor: the same rows through sqlite3's executemany, split with str operations."""
    con = sqlite3.connect(db)
    con.executescript(
        """
        CREATE TABLE problem (id INTEGER PRIMARY KEY, problem_id TEXT UNIQUE, statement TEXT, gold TEXT);
        CREATE TABLE trace (id INTEGER PRIMARY KEY, problem INTEGER, model TEXT, trace_id TEXT UNIQUE, raw TEXT,
                            thought TEXT, answer TEXT, n_steps INTEGER, n_thought_steps INTEGER);
        CREATE TABLE step (id INTEGER PRIMARY KEY, trace INTEGER, idx INTEGER, channel TEXT, text TEXT,
                           start INTEGER, "end" INTEGER, UNIQUE (trace, idx));
        """
    )
    problems: dict[str, int] = {}
    n_traces = n_steps = 0
    with con, open(path, encoding="utf-8") as fh:
        batch_t: list[tuple] = []
        batch_s: list[tuple] = []

        def flush() -> None:
            con.executemany("INSERT INTO trace VALUES (?,?,?,?,?,?,?,?,?)", batch_t)
            con.executemany('INSERT INTO step (trace, idx, channel, text, start, "end") VALUES (?,?,?,?,?,?)', batch_s)
            batch_t.clear()
            batch_s.clear()

        for line in fh:
            obj = json.loads(line)
            if obj["kind"] == "problem":
                problems[obj["problem_id"]] = pid = len(problems) + 1
                con.execute("INSERT INTO problem VALUES (?,?,?,?)", (pid, obj["problem_id"], obj["statement"],
                                                                      obj["gold_answer"]))
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
            if len(batch_t) >= 2000:
                flush()
        flush()
    print(json.dumps({"traces": n_traces, "steps": n_steps}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--paragraphs", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--bare", nargs=2, metavar=("FILE", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        bare(*args.bare)
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {"REASONAUDIT_DATA_DIR": tmp, "DJANGO_DEBUG": "true", "CELERY_BROKER_URL": "filesystem://",
               "DATABASE_URL": f"sqlite:///{tmp}/ra.db"}
        run_usage([PY, "manage.py", "migrate", "-v0"], env)
        empty = Path(tmp) / "empty.db"
        shutil.copy(Path(tmp) / "ra.db", empty)
        for scale, n in (("1x", args.traces // 10), ("10x", args.traces)):
            data = Path(tmp) / f"thoughts-{scale}.jsonl"
            generate(data, n, args.paragraphs)
            walls, cpus, peaks, bwalls, bcpus, bpeaks = [], [], [], [], [], []
            report: dict = {}
            for _ in range(args.runs):
                shutil.copy(empty, Path(tmp) / "ra.db")
                for suffix in ("-wal", "-shm"):
                    (Path(tmp) / f"ra.db{suffix}").unlink(missing_ok=True)
                wall, cpu, peak, out = run_usage(
                    [PY, "manage.py", "import_traces", str(data), "--study", f"bench-{scale}", "--json"], env)
                report = json.loads(out)
                walls.append(wall)
                cpus.append(cpu)
                peaks.append(peak)
                bare_db = Path(tmp) / "bare.db"
                bare_db.unlink(missing_ok=True)
                bwall, bcpu, bpeak, _ = run_usage([PY, __file__, "--bare", str(data), str(bare_db)])
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
    print(json.dumps({"machine": machine(), "load_average": os.getloadavg(), "database": "sqlite",
                      "results": results}, indent=2))


if __name__ == "__main__":
    main()
