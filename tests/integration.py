"""Real services for integration tests: PostgreSQL, Redis and a Celery worker
process. Outside CI a missing service skips the test; with CI=true it fails."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() == "true"


def require(condition: bool, why: str) -> None:
    if condition:
        return
    if IN_CI:
        pytest.fail(f"CI=true and {why}", pytrace=False)
    pytest.skip(why)


def services_configured() -> tuple[bool, str]:
    if connection.vendor != "postgresql":
        return False, "DATABASE_URL does not point at PostgreSQL"
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        return False, "CELERY_BROKER_URL does not point at Redis"
    return True, ""


def redis_reachable() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=2).ping())
    except redis.RedisError:
        return False


class Worker:
    """A `celery worker` subprocess on a queue of its own, pointed at the test database."""

    def __init__(self, queue: str, log: Path, env: dict[str, str] | None = None) -> None:
        self.queue = queue
        self.log = log
        self.env = env or {}  # extra settings, e.g. a short RUN_CHUNK_LEASE_SECONDS
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        db = connection.settings_dict
        url = f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "reasonaudit.test_settings",
            "DATABASE_URL": url,
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "REASONAUDIT_QUEUE": self.queue,
            "REASONAUDIT_DATA_DIR": str(settings.DATA_DIR),
            "SECRET_KEY": settings.SECRET_KEY,
            **self.env,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "reasonaudit", "worker", "--pool=prefork", "--concurrency=2",
             "--loglevel=info", "-Q", self.queue, "-n", f"test-{self.queue}@%h", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=self.log.open("wb"), stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited: {self.log.read_text()[-2000:]}")
            if "ready." in self.log.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise RuntimeError(f"celery worker did not become ready: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def new_queue() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"
