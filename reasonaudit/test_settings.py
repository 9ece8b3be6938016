"""Settings for the test suite: the real settings with test-only defaults.

Environment variables still win, so CI runs the same suite against
PostgreSQL and Redis by setting DATABASE_URL and CELERY_BROKER_URL.
"""

import os
import tempfile
from urllib.parse import urlsplit, urlunsplit

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")
# The fake model servers of the tests listen on loopback (a development checkout allows it too); the
# key names the tests give judges and subject models, for the hosts they use (docs/configuration.md).
os.environ.setdefault("REASONAUDIT_MODEL_NETWORKS", "127.0.0.0/8,::1/128")
os.environ.setdefault("REASONAUDIT_MODEL_KEYS", "; ".join(
    f"{name}=127.0.0.1,localhost,gpu-box" for name in ("TINY_KEY", "QWEN_KEY", "KEY", "JUDGE_TEST_KEY")))
# A data folder per test session, shared with the Celery worker the
# integration tests start (they pass it on in the environment).
os.environ.setdefault("REASONAUDIT_DATA_DIR", tempfile.mkdtemp(prefix="reasonaudit-test-"))

from reasonaudit.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # No manifest in tests: collectstatic is not run for them.
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# WhiteNoise warns when STATIC_ROOT does not exist; tests never collect static.
STATIC_ROOT = DATA_DIR / "staticfiles"  # noqa: F405
STATIC_ROOT.mkdir(exist_ok=True)

# The xdist workers inherit the controller's data folder (the setdefault above runs first there), so a file
# cache there would be one cache for every worker: a job of one worker's database showed its live progress
# to another worker's job of the same id. Each worker keeps its own (a process a test starts inherits
# PYTEST_XDIST_WORKER, so it shares its worker's). Redis: below.
if CACHES["default"]["BACKEND"].endswith("FileBasedCache"):  # noqa: F405
    CACHES["default"]["LOCATION"] = str(DATA_DIR / f"cache-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}")  # noqa: F405
# Redis (pass 2) under pytest-xdist: each worker its own database for the cache, 11 + the worker's number. One
# shared cache would show a job's live progress to the other worker's job of the same id (the two test databases
# hand out the same ids), and a test's cache.clear() is Redis's FLUSHDB, which would empty the other's mid-test.
# The broker's database is left as it is: these workers run tasks eagerly, and the integration tests (the only
# ones that start a Celery worker) run in one process (.ci/run).
elif os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw"):
    _cache_url = urlsplit(CACHES["default"]["LOCATION"])  # noqa: F405
    _cache_db = 11 + int(os.environ["PYTEST_XDIST_WORKER"][2:])
    CACHES["default"]["LOCATION"] = urlunsplit(_cache_url._replace(path=f"/{_cache_db}"))  # noqa: F405

# The same for uploads: a test that checks its upload is deleted lists the media folder, and saw another
# worker's upload of the moment there (a failure one run in two with two workers).
MEDIA_ROOT = DATA_DIR / f"media-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"  # noqa: F405
