"""Settings for ReasonAudit.

Everything that differs between a laptop and production comes from the
environment (see docs/configuration.md). The embedded defaults -- SQLite and a
filesystem message broker inside ``DATA_DIR`` -- need no server at all.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from reasonaudit.env import (
    LOCAL_ENV,
    data_dir,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_model_keys,
    env_networks,
    env_url,
    load_env_file,
    sqlite_database_name,
)

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = data_dir(BASE_DIR)
DATA_DIR.mkdir(parents=True, exist_ok=True)
# A development checkout: ./run writes DJANGO_DEBUG=true and a generated
# SECRET_KEY into <data>/local.env once, so `python manage.py ...` works in any
# shell afterwards. Real environment variables win; production has no such
# file and still refuses to start without a SECRET_KEY.
load_env_file(DATA_DIR / LOCAL_ENV)

DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1")


def _secret_key() -> str:
    key = os.environ.get("SECRET_KEY", "").strip()
    if key:
        return key
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is required when DJANGO_DEBUG is false")
    # Debug only: generate once and keep it in the data folder so sessions
    # survive restarts of the development server.
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "django_filters",
    "annotation",
    "runs",
    "scoring",
    "judges",
    "agreement",
    "subjects",
    "abstraction",
    "fidelity",
    "faithfulness",
    "anchors",
    "search",
    "demo",
]

MIDDLEWARE = [
    "reasonaudit.limits.RequestBodyLimitMiddleware",  # refuses an oversize body before anything reads it
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "annotation.one_time.ChoosePasswordMiddleware",  # a spent one-time password: choose your own first
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "annotation.middleware.RefusalMiddleware",  # one rendering of every refusal on the web
    "reasonaudit.url_ids.UrlIdRangeMiddleware",  # an id past 64 bits in a URL is a 404, not a driver's overflow
    # Innermost, so it sees every 4xx on its way out (CSRF refusals and 405s included): annotation/errors.py.
    "annotation.errors.ErrorPageMiddleware",
]
CSRF_FAILURE_VIEW = "annotation.errors.csrf_failure"

ROOT_URLCONF = "reasonaudit.urls"
WSGI_APPLICATION = "reasonaudit.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

_default_db = f"sqlite:///{DATA_DIR / 'reasonaudit.sqlite3'}"
DATABASE_URL = env_url("DATABASE_URL", _default_db, schemes={"sqlite", "postgres", "postgresql", "pgsql"})
try:
    _db = dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
except (ValueError, dj_database_url.UnknownSchemeError) as exc:  # pragma: no cover - env_url filters first
    raise ImproperlyConfigured(f"DATABASE_URL is not usable: {exc}") from None
if _db["ENGINE"] == "django.db.backends.sqlite3":
    _db["NAME"] = sqlite_database_name(_db["NAME"], _db.get("OPTIONS") or {}, DATA_DIR)
    # The web server and the Celery worker write the same file: WAL lets
    # readers go on during a write, IMMEDIATE transactions avoid the
    # upgrade deadlock that produces "database is locked".
    _db["CONN_MAX_AGE"] = 0
    _db["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
if _db["ENGINE"] == "django.db.backends.postgresql":
    # Planner settings of every connection (the URL's own ``?options=`` come after, and win). Measured at 1M traces
    # x 10 steps (docs/benchmarks.md, "At scale"; docs/configuration.md):
    # * random_page_cost 1.1: the shipped 4.0 prices an index probe as a read from a spinning disk, so reads of one
    #   chunk of 20,000 traces (the score job's, its summaries') scanned all 13M labels and hashed them against the
    #   chunk's steps instead of probing the labels of its 200,000 steps: a judge's confidences 1.9 s a chunk
    #   against 0.29 s, the evidence's labels 16 s a chunk. A serving database holds its tables in memory (or on
    #   SSDs): 1.1 is the usual value for that.
    # * jit off: those reads cost over the JIT's threshold, and compiling each took 1.4 s, longer than the read.
    _db.setdefault("OPTIONS", {})
    _db["OPTIONS"]["options"] = " ".join(
        ["-c random_page_cost=1.1 -c jit=off", _db["OPTIONS"].get("options", "")]).strip()
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"

def _plotly_js_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("plotly")
    return Path(spec.origin).parent / "package_data" if spec and spec.origin else BASE_DIR / "static"


# Front-end packages are installed by npm (package.json) and plotly's bundled
# JS comes with the Python package; both are served as our own static files.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/htmx", BASE_DIR / "node_modules" / "htmx.org" / "dist"),
    ("vendor/katex", BASE_DIR / "node_modules" / "katex" / "dist"),
    ("vendor/plotly", _plotly_js_dir()),
]
STATIC_ROOT = BASE_DIR / "staticfiles"
MEDIA_ROOT = DATA_DIR / "media"
MEDIA_URL = "media/"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "studies"
LOGOUT_REDIRECT_URL = "login"

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

# --- HTTPS (docs/configuration.md, "Serving over HTTPS") ----------------------
# Off by default: ./run and the test suite serve plain http on 127.0.0.1, where
# secure-only cookies would never come back. A deployment sets REASONAUDIT_HTTPS.
HTTPS = env_bool("REASONAUDIT_HTTPS", False)
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0, minimum=0)
# The app runs on a host of its own: its subdomains (if any) are its own too.
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
if env_bool("REASONAUDIT_BEHIND_TLS_PROXY", False):
    # TLS ends at the proxy: trust its X-Forwarded-Proto, or SECURE_SSL_REDIRECT loops.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Preload-list submission is a decision about a whole registered domain, made
# once by its owner and hard to undo; not the application's (docs/configuration.md).
SILENCED_SYSTEM_CHECKS = ["security.W021"]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "annotation.api.schema.RefusalsSchema",  # every operation documents its errors
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "annotation.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ReasonAudit API",
    "DESCRIPTION": "Audit the reasoning of language models step by step.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from our own static files, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # One name per choice set (output_mode and output_mode_resolved share one).
    "ENUM_NAME_OVERRIDES": {
        "OutputModeEnum": "judges.models.JudgeConfig.OutputMode",
        "JudgeRunScopeEnum": "judges.models.JudgeRun.Scope",
        "GenerationRunScopeEnum": "subjects.models.GenerationRun.Scope",
        "JudgeModeEnum": "judges.models.JudgeConfig.Mode",
        # One enum for both channels' segmenters (Study.segmenter and Study.thought_segmenter).
        "SegmenterEnum": "annotation.models.Study.Segmenter",
        # The run kinds' request bodies (runs.api: one component per kind) hold two "mode" choice sets.
        "ContinuationModeEnum": ["completions", "prefill", "instructed"],
        "AbstractionModeEnum": "abstraction.runkinds.MODE_CHOICES",
        # The eight step functions name both a tag (`tag`) and the items of a step's `tags`.
        "StepFunctionEnum": "reasonlib.step_functions.FUNCTION_NAMES",
    },
}

# --- Celery -----------------------------------------------------------------
_broker_dir = DATA_DIR / "broker"
CELERY_BROKER_URL = env_url(
    "CELERY_BROKER_URL",
    # The host part means nothing to this transport; naming one keeps kombu
    # from warning "No hostname was supplied" on every connection.
    "filesystem://localhost/",
    schemes={"filesystem", "redis", "rediss", "amqp", "pyamqp", "memory"},
)
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("out", "processed", "control"):
        (_broker_dir / sub).mkdir(parents=True, exist_ok=True)
    # One folder for both directions: producer and consumer are the same queue.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        # Broadcast (control) messages; kombu's default is a folder in the cwd.
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # A task that outlives this is re-delivered; judge runs must finish first.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
# Tests give each session its own queue so a shared Redis never hands one
# session another's tasks.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("REASONAUDIT_QUEUE", "reasonaudit")
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
# Progress and results live in the Job table; Celery's result store is not used.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- ReasonAudit ---------------------------------------------------------------
IMPORT_MAX_BYTES = env_int("REASONAUDIT_IMPORT_MAX_BYTES", 512 * 1024 * 1024, minimum=1)
# An Inspect .eval log is a zip: checked from its directory before anything is decompressed.
IMPORT_MAX_UNCOMPRESSED_BYTES = env_int("REASONAUDIT_IMPORT_MAX_UNCOMPRESSED_BYTES", 2 * 1024**3, minimum=1)
IMPORT_MAX_MEMBER_BYTES = env_int("REASONAUDIT_IMPORT_MAX_MEMBER_BYTES", 256 * 1024**2, minimum=1)
IMPORT_MAX_ZIP_RATIO = env_int("REASONAUDIT_IMPORT_MAX_ZIP_RATIO", 200, minimum=1)
# What one imported record may hold, in characters (annotation/importing/records.py, issue 29): a
# problem's statement, a trace's output (raw and steps), its thought (every thought field), and the
# prompt messages an eval log's sample hashes into its regime (attachments resolved).
IMPORT_MAX_STATEMENT_CHARS = env_int("REASONAUDIT_IMPORT_MAX_STATEMENT_CHARS", 4_000_000, minimum=1)
IMPORT_MAX_OUTPUT_CHARS = env_int("REASONAUDIT_IMPORT_MAX_OUTPUT_CHARS", 4_000_000, minimum=1)
IMPORT_MAX_THOUGHT_CHARS = env_int("REASONAUDIT_IMPORT_MAX_THOUGHT_CHARS", 4_000_000, minimum=1)
IMPORT_MAX_PROMPT_CHARS = env_int("REASONAUDIT_IMPORT_MAX_PROMPT_CHARS", 16_000_000, minimum=1)
# Every request body: the largest import plus room for the form's other fields (reasonaudit/limits.py).
REQUEST_MAX_BYTES = env_int("REASONAUDIT_REQUEST_MAX_BYTES", IMPORT_MAX_BYTES + 1024 * 1024, minimum=1)
FILE_UPLOAD_HANDLERS = [
    "reasonaudit.limits.UploadLimitHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
ANSWER_CHECK_TIMEOUT = 5.0

# Model servers (docs/configuration.md, "Model servers: keys and addresses"; runs/outbound.py).
# The API keys a judge or subject model may name, each with the hosts it may go to; nothing else is sent.
MODEL_KEYS = env_model_keys("REASONAUDIT_MODEL_KEYS")
# Non-public networks model servers may be in (public addresses are always allowed). A development
# checkout (DJANGO_DEBUG=true, as ./run sets) allows loopback, where the documented local llama
# server listens; production allows none unless listed.
MODEL_NETWORKS = env_networks("REASONAUDIT_MODEL_NETWORKS", "127.0.0.0/8,::1/128" if DEBUG else "")
# The largest response body read from a model server (runs.deadline); a longer one is cut and its item fails.
# How much a prompt or chat template's render may grow its child process (runs.sandbox), in MB.
TEMPLATE_MEMORY_MB = env_int("REASONAUDIT_TEMPLATE_MEMORY_MB", 256, minimum=32)
MODEL_RESPONSE_MAX_BYTES = env_int("REASONAUDIT_MODEL_RESPONSE_MAX_BYTES", 16 * 1024 * 1024, minimum=1024)

# A burst of label saves becomes one score recompute this many seconds later.
SCORING_DEBOUNCE_SECONDS = env_int("SCORING_DEBOUNCE_SECONDS", 5, minimum=0)
# Traces a score recompute reads at a time (scoring.score_jobs): its memory follows this, not the study.
SCORING_CHUNK_TRACES = env_int("SCORING_CHUNK_TRACES", 20000, minimum=1)

# Runs of model calls (judge runs now; docs/runs.md, docs/configuration.md); seconds.
# The RUN_* variables win; the older JUDGE_* names are still read.
RUN_RETRY_BASE_SECONDS = env_float("RUN_RETRY_BASE_SECONDS", env_float("JUDGE_RETRY_BASE_SECONDS", 1.0))
RUN_RETRY_MAX_SECONDS = env_float("RUN_RETRY_MAX_SECONDS", env_float("JUDGE_RETRY_MAX_SECONDS", 30.0))
RUN_RETRY_AFTER_MAX_SECONDS = env_float("RUN_RETRY_AFTER_MAX_SECONDS", env_float("JUDGE_RETRY_AFTER_MAX_SECONDS", 120.0))
RUN_CHUNK_LEASE_SECONDS = env_float("RUN_CHUNK_LEASE_SECONDS", env_float("JUDGE_CHUNK_LEASE_SECONDS", 300.0, minimum=1.0),
                                    minimum=1.0)
RUN_CANCEL_CHECK_SECONDS = env_float("RUN_CANCEL_CHECK_SECONDS", env_float("JUDGE_CANCEL_CHECK_SECONDS", 0.5, minimum=0.01),
                                     minimum=0.01)
RUN_TASK_SECONDS = env_float("RUN_TASK_SECONDS", env_float("JUDGE_TASK_SECONDS", 60.0, minimum=1.0), minimum=1.0)
# Chunks of one generation run worked on at once, each by its own task with its share of the concurrency (runs.md).
RUN_PARALLEL_CHUNKS = env_int("RUN_PARALLEL_CHUNKS", 1, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # An expected refusal (a 4xx) is one line, not a traceback (reasonaudit/logs.py).
    "filters": {"expected_refusals": {"()": "reasonaudit.logs.ExpectedRefusals"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["expected_refusals"]}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "reasonaudit": {"level": "INFO"}, "annotation": {"level": "INFO"},
        # Django's own console handler (DEBUG) printed every record a second time beside the root's.
        "django": {"handlers": [], "level": "INFO"},
    },
}

# Live progress of long jobs goes through the cache, not the Job row: an import
# runs inside one transaction, and a row updated there is invisible to other
# connections until commit.
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CELERY_BROKER_URL}}
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(DATA_DIR / "cache"),
        }
    }
