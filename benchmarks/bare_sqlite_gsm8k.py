"""Baseline for the import benchmark: a bare ``sqlite3`` ``executemany`` of the
same rows (problems, skeleton steps, traces, steps) read from the same JSON.

Run as its own process so the timing includes start-up, like the real command:
    python benchmarks/bare_sqlite_gsm8k.py FILE DB
"""

import json
import re
import sqlite3
import sys

CALC = re.compile(r"<<([^<>]*)>>")


def main(path: str, db: str) -> None:
    con = sqlite3.connect(db)
    con.executescript(
        """
        CREATE TABLE problem (id INTEGER PRIMARY KEY, problem_id TEXT UNIQUE, statement TEXT, gold TEXT);
        CREATE TABLE skeleton_step (id INTEGER PRIMARY KEY, problem INTEGER, position INTEGER, text TEXT, check_expr TEXT);
        CREATE TABLE trace (id INTEGER PRIMARY KEY, problem INTEGER, model TEXT, trace_id TEXT UNIQUE, raw TEXT,
                            answer TEXT, correct INTEGER);
        CREATE TABLE step (id INTEGER PRIMARY KEY, trace INTEGER, idx INTEGER, text TEXT, UNIQUE (trace, idx));
        """
    )
    problems, skel, traces, steps = [], [], [], []
    trace_pk = 0
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            obj = json.loads(line)
            lines = [x for x in obj["ground_truth"].split("\n") if x.strip()]
            pid = n + 1
            problems.append((pid, f"gsm8k-test-{n:04d}", obj["question"], lines[-1][2:].strip()))
            for k, text in enumerate(lines[:-1], start=1):
                calcs = CALC.findall(text)
                skel.append((pid, k, CALC.sub("", text), calcs[-1] if calcs else ""))
            for model, sol in obj.items():
                if not isinstance(sol, dict):
                    continue
                trace_pk += 1
                sl = [x for x in sol["solution"].split("\n") if x.strip()]
                answer = sl[-1][2:].strip() if sl and sl[-1].startswith("A:") else None
                body = sl[:-1] if answer is not None else sl
                traces.append((trace_pk, pid, model, f"gsm8k-test-{n:04d}/{model}", sol["solution"], answer,
                               int(sol["is_correct"])))
                steps.extend((trace_pk, k, t.strip()) for k, t in enumerate(body, start=1))
    with con:
        con.executemany("INSERT INTO problem VALUES (?,?,?,?)", problems)
        con.executemany("INSERT INTO skeleton_step (problem, position, text, check_expr) VALUES (?,?,?,?)", skel)
        con.executemany("INSERT INTO trace VALUES (?,?,?,?,?,?,?)", traces)
        con.executemany("INSERT INTO step (trace, idx, text) VALUES (?,?,?)", steps)
    print(json.dumps({"problems": len(problems), "traces": len(traces), "steps": len(steps)}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
