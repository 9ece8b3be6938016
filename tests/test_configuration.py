"""Configuration comes from the environment, and a bad value stops start-up
with a message naming the variable (docs/configuration.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def start(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in {
        "DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "DJANGO_DEBUG", "ALLOWED_HOSTS", "DJANGO_SETTINGS_MODULE",
        "CELERY_TASK_ALWAYS_EAGER"}}
    base["REASONAUDIT_DATA_DIR"] = str(tmp_path)
    code = "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='reasonaudit.settings'; django.setup(); " \
           "from django.conf import settings as s; print(s.DATABASES['default']['ENGINE'], s.CELERY_BROKER_URL, s.DEBUG)"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**base, **env}, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"DJANGO_DEBUG": "maybe", "SECRET_KEY": "x"}, "DJANGO_DEBUG"),
        ({"DATABASE_URL": "mysql://root@localhost/db", "SECRET_KEY": "x"}, "DATABASE_URL"),
        ({"DATABASE_URL": "not a url", "SECRET_KEY": "x"}, "DATABASE_URL"),
        ({"CELERY_BROKER_URL": "kafka://localhost", "SECRET_KEY": "x"}, "CELERY_BROKER_URL"),
        ({"CELERY_TASK_ALWAYS_EAGER": "sometimes", "SECRET_KEY": "x"}, "CELERY_TASK_ALWAYS_EAGER"),
        ({"ALLOWED_HOSTS": " , ", "SECRET_KEY": "x"}, "ALLOWED_HOSTS"),
        ({"JUDGE_TASK_SECONDS": "soon", "SECRET_KEY": "x"}, "JUDGE_TASK_SECONDS"),
        ({"REASONAUDIT_IMPORT_MAX_BYTES": "-5", "SECRET_KEY": "x"}, "REASONAUDIT_IMPORT_MAX_BYTES"),
        ({}, "SECRET_KEY"),  # required when not in debug mode
    ],
)
def test_it_refuses_to_start_with_a_bad_value_and_names_the_variable(env, named, tmp_path):
    result = start(env, tmp_path)
    assert result.returncode != 0
    assert named in result.stderr, result.stderr[-800:]


def test_the_embedded_defaults_need_no_server(tmp_path):
    result = start({"DJANGO_DEBUG": "true"}, tmp_path)
    assert result.returncode == 0, result.stderr[-800:]
    engine, broker, debug = result.stdout.split()
    assert engine == "django.db.backends.sqlite3"
    assert broker == "filesystem://localhost/"
    assert debug == "True"
    # Debug mode generates a secret key once and keeps it in the data folder.
    assert (tmp_path / "secret_key").read_text().strip()


def test_production_values_are_taken_from_the_environment(tmp_path):
    result = start({"SECRET_KEY": "s3cret", "DATABASE_URL": "postgres://u@127.0.0.1:5432/x",
                    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0"}, tmp_path)
    assert result.returncode == 0, result.stderr[-800:]
    assert result.stdout.split() == ["django.db.backends.postgresql", "redis://127.0.0.1:6379/0", "False"]


# --------------------------------------------------------------------------
# The local development settings file ./run writes (<data>/local.env)


def write_local_env(tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DJANGO_DEBUG", "DJANGO_SETTINGS_MODULE"}}
    return subprocess.run([sys.executable, "-m", "reasonaudit.local_env"], cwd=ROOT,
                          env={**env, "REASONAUDIT_DATA_DIR": str(tmp_path)}, capture_output=True, text=True, timeout=60)


def secret_key_of(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DJANGO_DEBUG", "DJANGO_SETTINGS_MODULE"}}
    code = "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='reasonaudit.settings'; django.setup(); " \
           "from django.conf import settings as s; print(s.SECRET_KEY, s.DEBUG)"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                          env={**base, **env, "REASONAUDIT_DATA_DIR": str(tmp_path)}, capture_output=True, text=True,
                          timeout=60)


def test_after_run_wrote_the_local_settings_manage_py_works_in_a_plain_shell(tmp_path):
    written = write_local_env(tmp_path)
    assert written.returncode == 0, written.stderr
    local = tmp_path / "local.env"
    assert local.stat().st_mode & 0o777 == 0o600  # it holds a secret
    # No DJANGO_DEBUG, no SECRET_KEY in the environment: what a new shell has.
    result = start({}, tmp_path)
    assert result.returncode == 0, result.stderr[-800:]
    assert result.stdout.split() == ["django.db.backends.sqlite3", "filesystem://localhost/", "True"]
    key = secret_key_of({}, tmp_path).stdout.split()[0]
    assert f"SECRET_KEY={key}\n" in local.read_text() and len(key) >= 50


def test_the_real_environment_wins_over_the_local_settings(tmp_path):
    write_local_env(tmp_path)
    result = secret_key_of({"SECRET_KEY": "from-the-environment", "DJANGO_DEBUG": "false"}, tmp_path)
    assert result.returncode == 0, result.stderr[-800:]
    assert result.stdout.split() == ["from-the-environment", "False"]


def test_the_local_settings_are_written_once_and_keep_an_earlier_debug_key(tmp_path):
    (tmp_path / "secret_key").write_text("the-key-sessions-were-signed-with\n")
    write_local_env(tmp_path)
    first = (tmp_path / "local.env").read_text()
    assert "SECRET_KEY=the-key-sessions-were-signed-with\n" in first and "DJANGO_DEBUG=true\n" in first
    (tmp_path / "secret_key").unlink()
    write_local_env(tmp_path)
    assert (tmp_path / "local.env").read_text() == first


def test_a_bad_line_in_the_local_settings_stops_start_up_naming_the_file(tmp_path):
    (tmp_path / "local.env").write_text("DJANGO_DEBUG=true\nthis is not a setting\n")
    result = start({}, tmp_path)
    assert result.returncode != 0
    assert "local.env, line 2: expected NAME=value" in result.stderr, result.stderr[-800:]


# --------------------------------------------------------------------------
# SQLite names: no database file in the folder a process starts from (issue 19 part 4: memorydb_default)


@pytest.mark.parametrize(("url_name", "options", "expected"), [
    ("file:memorydb_default", {"mode": "memory", "cache": "shared"}, "file:memorydb_default?mode=memory&cache=shared"),
    ("file:ra.db", {}, "file:{data}/ra.db"),
    ("ra.db", {}, "{data}/ra.db"),
    ("/abs/ra.db", {}, "/abs/ra.db"),
    (":memory:", {}, ":memory:"),
])
def test_an_sqlite_name_stays_in_memory_or_goes_to_the_data_folder(url_name, options, expected, tmp_path):
    from reasonaudit.env import sqlite_database_name

    assert sqlite_database_name(url_name, options, tmp_path) == expected.format(data=tmp_path)


def test_a_child_given_the_in_memory_test_database_writes_no_file_where_it_starts(tmp_path):
    """A child process handed the test database's name (as a worker is) once left a 4 KB file
    ``memorydb_default`` in its working folder: the URI's mode=memory was dropped with the OPTIONS."""
    cwd, data = tmp_path / "cwd", tmp_path / "data"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update({"DJANGO_DEBUG": "true", "REASONAUDIT_DATA_DIR": str(data), "PYTHONPATH": str(ROOT),
                "DATABASE_URL": "sqlite:///file:memorydb_default?mode=memory&cache=shared"})
    code = ("import django, os; os.environ['DJANGO_SETTINGS_MODULE']='reasonaudit.settings'; django.setup(); "
            "from django.db import connection; connection.cursor().execute('create table t (x int)'); "
            "print(connection.settings_dict['NAME'])")
    result = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-800:]
    assert result.stdout.strip() == "file:memorydb_default?mode=memory&cache=shared"
    assert list(cwd.iterdir()) == []
    assert not (ROOT / "memorydb_default").exists()


@pytest.mark.parametrize("module", ["reasonaudit.wsgi", "reasonaudit.asgi"])
def test_the_web_process_loads_its_urls_and_freezes_them_out_of_the_collector(module, tmp_path):
    """reasonaudit.serving.ready_to_serve: what gunicorn (and runserver) import has every URL module
    loaded and the loaded objects in the collector's permanent generation (a full collection walked
    them inside requests: docs/benchmarks.md, "Search"); objects made later are still collected."""
    base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}}
    code = "\n".join([
        f"import gc, sys, weakref; import {module}",
        "assert 'search.urls' in sys.modules and 'annotation.views' in sys.modules, 'urls not loaded'",
        "frozen = gc.get_freeze_count(); assert frozen > 10000, frozen",
        "class Late: pass",
        "a = Late(); a.me = a; ref = weakref.ref(a); del a; gc.collect()",
        "assert ref() is None, 'a cycle made after the freeze was not collected'; print('ok', frozen)",
    ])
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**base, "REASONAUDIT_DATA_DIR": str(tmp_path), "DJANGO_DEBUG": "true"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("ok ")
