"""What a command process loads before it does anything (docs/benchmarks.md, "Import"): every app's ready()
runs in every process, so a heavy library imported there is paid by ``import_traces`` on each file. The
libraries below serve pages, score jobs and runs; a command's start-up and an import's queueing of its score
recompute must not load them (together they were about 1.5 s of CPU at 2 s of start-up). Nor the kinds of run,
whose parameters are DRF serializers (with DRF come requests and psycopg, which its ``compat`` imports), nor the
runs page: about 0.4 s more of a command's start-up (the kinds are loaded when they are first read, runs.kinds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HEAVY = ("pandas", "sklearn", "scipy")
#: What serves the runs page, the runs API and the CLI's ``run KIND``, loaded when the kinds are first read.
RUN_KINDS = ("rest_framework.serializers", "requests", "psycopg", "runs.kinds", "runs.views")


def _child(code: str, tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update({"DJANGO_DEBUG": "true", "REASONAUDIT_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "reasonaudit.settings",
                "DATABASE_URL": f"sqlite:///{tmp_path}/ra.db", "CELERY_BROKER_URL": "memory://",
                "CELERY_TASK_ALWAYS_EAGER": "false"})
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_command_starts_without_pandas_scikit_learn_or_scipy(tmp_path):
    code = "\n".join([
        "import json, sys, django; django.setup()",
        "from django.core.management import load_command_class",
        "load_command_class('annotation', 'import_traces')",
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))",
    ])
    assert _child(code, tmp_path) == []


def test_a_command_starts_without_the_kinds_of_run_drf_or_the_runs_page(tmp_path):
    code = "\n".join([
        "import json, sys, django; django.setup()",
        "from django.core.management import load_command_class",
        "load_command_class('annotation', 'import_traces')",
        "print(json.dumps([m for m in sys.modules if m in " + repr(RUN_KINDS) + " or m.endswith('.runkinds')]))",
    ])
    assert _child(code, tmp_path) == []


def test_the_kinds_of_run_are_all_there_when_first_read(tmp_path):
    """Loaded on first use, the registry still holds every kind (the kind menu's order names them all),
    each app's module named by its AppConfig (``run_kinds``)."""
    code = "\n".join([
        "import json, sys, django; django.setup()",
        "from runs import kinds",
        "print(json.dumps([[k.name for k in kinds.all_kinds()], list(kinds.ORDER),",
        "                  sorted(m for m in sys.modules if m.endswith('.runkinds'))]))",
    ])
    names, order, modules = _child(code, tmp_path)
    assert names == order
    assert modules == sorted(f"{p.parent.name}.runkinds" for p in ROOT.glob("*/runkinds.py"))


def test_queueing_the_score_recompute_imports_its_task_module_not_the_url_conf(tmp_path):
    """Celery's own discovery of tasks runs every system check first (its Django fixup), the URL conf and
    with it every view; annotation.jobs imports the task's module instead."""
    code = "\n".join([
        "import json, sys, django; django.setup()",
        "from django.core.management import call_command",
        "call_command('migrate', verbosity=0)",
        "from annotation import jobs",
        "jobs.queue_task('scoring.tasks.recompute_scores', 1, countdown=5)",
        "print(json.dumps(sorted({'scoring.tasks', 'reasonaudit.urls', *" + repr(HEAVY) + "} & set(sys.modules))))",
    ])
    assert _child(code, tmp_path) == ["scoring.tasks"]


def test_a_task_name_no_module_registers_still_fails_in_the_caller(tmp_path):
    code = "\n".join([
        "import json, django; django.setup()",
        "from annotation import jobs",
        "try:",
        "    jobs.queue_task('scoring.tasks.no_such_task', 1)",
        "except LookupError as exc:",
        "    print(json.dumps(str(exc)))",
    ])
    assert _child(code, tmp_path) == "no Celery task named 'scoring.tasks.no_such_task'"
