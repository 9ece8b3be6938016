"""Every management command's ``--help`` and every ``export --what`` kind, each
in a fresh Python process, as a user runs them.

In-process tests share one interpreter whose modules other tests have
already imported, which hid a real failure: ``export --what hazard --source
human`` died in a fresh process because a module used a submodule it never
imported (issue 9). Here each command starts from nothing. The database is a
temporary SQLite file, migrated once for the module by ``manage.py migrate``
and filled by ``manage.py import_traces`` (which scores it: Celery is eager
under the test settings). Commands run a few at a time in threads; each test
then checks one command's result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings

PROJECT_APPS = {"annotation", "runs", "subjects", "judges", "scoring", "agreement", "abstraction", "fidelity",
                "faithfulness", "demo"}
STUDY = "fresh-process study"
#: (what, extra options) of every export run; ``hazard --source human`` is the issue's failing command.
EXPORTS = [
    ("scores", []),
    ("scores", ["--source", "human"]),
    ("labels", []),
    ("labels", ["--source", "human"]),
    ("hazard", []),
    ("hazard", ["--source", "human"]),
    ("relative-hazard", []),
    ("recovery", []),
    ("leaderboard", []),
    ("lucky-guesses", []),
    ("agreement", ["--reference", "human", "--candidate", "annotator:ann2"]),
    ("agreement-steps", ["--candidate", "annotator:ann2"]),
    ("agreement-traces", []),
    ("prm-training", []),
    ("tag-agreement", []),  # no step-function tag in this study: no rows
    ("tag-confusion", []),
    ("step-importance", []),  # no step-importance run or imported analysis here: no rows
    ("step-importance-by-tag", []),
    ("traces", []),
    ("abstraction", []),
    ("abstraction-items", []),
    # faithfulness (no run in this study: empty tables; the evidence rows come from the traces)
    ("interventions", []),
    ("ifr", []),
    ("anytime", []),
    ("anytime-curve", []),
    ("early-answering", []),
    ("evidence", []),
    ("fidelity", []),  # no fidelity run in this study: the metrics of the imported traces alone
    ("fidelity-table1", []),
    ("fidelity-table2", []),
    ("abstraction-long", []),
    ("gsm-symbolic", []),  # no GSM-Symbolic problem in this study: no rows
    ("search", ["--query", "q=\"t2 step\" or t3&answer_correct=true"]),
    ("cohorts", []),
    ("scanners", []),
    ("cohort-compare", ["--cohort", "1", "--versus", "2"]),
    ("scanner-validation", ["--scanner", "waits"]),
    ("scanner-answers", ["--scanner", "waits"]),
]
#: Kinds with no rows in this study (it has no intervention or anytime run): they must still run and write a manifest.
EMPTY_HERE = {"interventions", "ifr", "anytime", "anytime-curve", "early-answering", "fidelity-table1",
              "fidelity-table2", "abstraction-long", "gsm-symbolic", "cohorts", "scanners", "tag-agreement",
              "tag-confusion", "step-importance", "step-importance-by-tag"}
#: Kinds of objects this study does not have (no cohort, no scanner): refused by name, without a traceback.
REFUSED_HERE = {"cohort-compare": "cohort: no cohort 1 in this study",
                "scanner-validation": "scanner: no scanner 'waits' in this study",
                "scanner-answers": "scanner: no scanner 'waits' in this study"}
#: Parallel processes: enough to overlap start-up, few enough for a small machine.
WORKERS = 3


def _records() -> list[dict]:
    """Six traces of two models; two annotators label every step (so the
    human source, annotator sources and agreement all have data)."""
    records: list[dict] = [{"kind": "problem", "problem_id": "p1", "statement": "What is 1?", "gold_answer": "1",
                            "domain": "arith"}]
    words = {"t1": ("VVV", "VVV"), "t2": ("VEN", "VEV"), "t3": ("EEV", "EEE"),
             "t4": ("VVE", "VVE"), "t5": ("NVV", "VVV"), "t6": ("VVV", "VEV")}
    word = {"V": "valid", "E": "invalid", "N": "neutral"}
    for i, (tid, (a, b)) in enumerate(words.items()):
        labels = [{"step": k + 1, "verdict": word[c], "annotator": ann} for ann, w in (("ann1", a), ("ann2", b))
                  for k, c in enumerate(w)]
        records.append({"kind": "trace", "problem_id": "p1", "model": f"m{i % 2}", "trace_id": tid,
                        "steps": [f"{tid} step {k + 1}: x = {k}" for k in range(3)], "answer": "1",
                        "answer_correct": i % 3 != 0, "labels": labels, "rating": [9, 4, 1, 6, 8, 5][i]})
    return records


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=settings.BASE_DIR, env=env, capture_output=True,
                          text=True, timeout=300)


def _project_commands() -> list[str]:
    from django.core.management import get_commands

    return sorted(name for name, app in get_commands().items() if app.split(".")[-1] in PROJECT_APPS)


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("fresh")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update({"DJANGO_SETTINGS_MODULE": "reasonaudit.test_settings", "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
                "REASONAUDIT_DATA_DIR": str(tmp), "CELERY_TASK_ALWAYS_EAGER": "true", "PYTHONDONTWRITEBYTECODE": "1"})
    done = _run(env, "migrate", "--verbosity", "0")
    assert done.returncode == 0, done.stderr
    data = tmp / "study.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _records()), encoding="utf-8")
    done = _run(env, "import_traces", "--study", STUDY, "--json", str(data))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["traces_created"] == 6
    # The abstraction exports need its outputs: the published sample, in its own format.
    from tests.data_paths import ABSTRACTION_SAMPLE

    done = _run(env, "import_traces", str(ABSTRACTION_SAMPLE), "--format", "abstraction-outputs", "--study", STUDY,
                "--model", "gpt-4o-mini", "--json")
    assert done.returncode == 0, done.stderr
    return env


@pytest.fixture(scope="module")
def export_runs(env) -> dict[tuple[str, ...], tuple[subprocess.CompletedProcess, Path]]:
    out_dir = Path(env["REASONAUDIT_DATA_DIR"]) / "exports"
    out_dir.mkdir()

    def one(i: int, what: str, extra: list[str]):
        out = out_dir / f"{i}-{what}.jsonl"
        return _run(env, "export", "--study", STUDY, "--what", what, *extra, "--out", str(out)), out

    with ThreadPoolExecutor(WORKERS) as pool:
        futures = {(what, *extra): pool.submit(one, i, what, extra) for i, (what, extra) in enumerate(EXPORTS)}
        return {key: f.result() for key, f in futures.items()}


@pytest.fixture(scope="module")
def help_runs(env) -> dict[str, subprocess.CompletedProcess]:
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = {name: pool.submit(_run, env, name, "--help") for name in _project_commands()}
        return {name: f.result() for name, f in futures.items()}


def test_every_registered_kind_is_exported_here():
    from scoring import exports

    assert {what for what, _ in EXPORTS} == set(exports.kinds())


@pytest.mark.parametrize(("what", "extra"), EXPORTS, ids=[" ".join([w, *e]) for w, e in EXPORTS])
def test_export_kind_runs_in_a_fresh_process(export_runs, what, extra):
    done, out = export_runs[(what, *extra)]
    assert "Traceback" not in done.stderr
    if what in REFUSED_HERE:
        assert done.returncode == 1 and REFUSED_HERE[what] in done.stderr, done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert f"{what} row(s) to {out}" in done.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert (lines or what in EMPTY_HERE) and all(json.loads(line) for line in lines)
    manifest = json.loads(Path(f"{out}.manifest.json").read_text(encoding="utf-8"))
    assert manifest["export"]["what"] == what and manifest["counts"]["rows"] == len(lines)


def test_project_commands_are_discovered():
    assert {"export", "score", "import_traces", "demo", "judge", "add_judge", "add_member"} <= set(_project_commands())


@pytest.mark.parametrize("name", _project_commands())
def test_command_help_runs_in_a_fresh_process(help_runs, name):
    done = help_runs[name]
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.startswith(f"usage: manage.py {name}")
