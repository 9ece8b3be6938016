"""Settings for the test suite: the real settings with test-only defaults.

Environment variables still win, so CI runs the same suite against
PostgreSQL and Redis by setting DATABASE_URL and CELERY_BROKER_URL.
"""

import os
import tempfile

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
# PYTEST_XDIST_WORKER, so it shares its worker's). Redis (pass 2, one process) is left as it is.
if CACHES["default"]["BACKEND"].endswith("FileBasedCache"):  # noqa: F405
    CACHES["default"]["LOCATION"] = str(DATA_DIR / f"cache-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}")  # noqa: F405
