"""Django settings for Foundry.

Deployment values come from the environment (``FOUNDRY_*``, optionally from a
``.env`` file); pipeline knobs come from ``foundry.yaml`` (see ``config.py``).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured
from csp.constants import NONCE, NONE, SELF
from kombu import Queue

from core.config import load_config
from foundry_site.db.url import database_from_url

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env")

FOUNDRY_HOME = Path(env.str("FOUNDRY_HOME", default=str(BASE_DIR / "var"))).resolve()
FOUNDRY_HOME.mkdir(parents=True, exist_ok=True)
FOUNDRY_CONFIG_PATH = Path(env.str("FOUNDRY_CONFIG", default=str(BASE_DIR / "foundry.yaml")))
FOUNDRY = load_config(FOUNDRY_CONFIG_PATH)
FOUNDRY_KNOWLEDGE_BASE = Path(env.str("FOUNDRY_KNOWLEDGE_BASE", default=str(BASE_DIR / "knowledge_base")))
FOUNDRY_ARTIFACTS = FOUNDRY_HOME / "artifacts"
FOUNDRY_QUERY_RATE = env.int("FOUNDRY_QUERY_RATE", default=10)


def _secret_key() -> str:
    """Use FOUNDRY_SECRET_KEY, else a key generated once and kept in FOUNDRY_HOME."""
    if env.str("FOUNDRY_SECRET_KEY", default=""):
        return env.str("FOUNDRY_SECRET_KEY")
    key_file = FOUNDRY_HOME / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env.bool("FOUNDRY_DEBUG", default=False)
ALLOWED_HOSTS = env.list("FOUNDRY_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Listed so the API docs use the Swagger UI files shipped with django-ninja, not a CDN.
    "ninja",
    "csp",
    "foundry_site",
    "sources",
    "retrieval",
    "generation",
    "specs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # 413 with the limit for an oversized body, before anything reads it.
    "foundry_site.middleware.RequestSizeLimitMiddleware",
    # JSON for an API path or method that does not exist, as for every other API error.
    "foundry_site.middleware.ApiJsonErrorsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Serves the admin's and the API docs' static files under gunicorn too.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The interface language: the selector's cookie, else the browser's Accept-Language, else English
    # (docs/languages.md). After the session, before CommonMiddleware, as Django requires.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every page needs a signed-in user; views opt out with @login_not_required
    # (the login page, and the JSON API, which answers 401 itself).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# Content-Security-Policy: the second wall against stored XSS (the first is escaping and
# nh3). Scripts run only from our own static files or from <script nonce="{{ request.csp_nonce }}">
# blocks, so a document, note or answer that slipped through as live markup still cannot run.
# Inline style attributes stay allowed: our templates and the admin use them, and CSS cannot run script.
# The viewer's pdf.js parses PDFs in a worker from our static files (worker-src, never blob:), without eval.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "worker-src": [SELF],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    },
}

ROOT_URLCONF = "foundry_site.urls"
WSGI_APPLICATION = "foundry_site.wsgi.application"

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
                "foundry_site.context_processors.navigation",
            ],
        },
    },
]

# One SQLite file per knowledge base, through the pysqlite3 backend that loads
# sqlite-vec. IMMEDIATE transactions take the write lock up front, so two
# writers wait on busy_timeout instead of failing with "database is locked".
DATABASES = {
    "default": {
        "ENGINE": "foundry_site.db",
        "NAME": env.str("FOUNDRY_DB", default=str(FOUNDRY_HOME / "foundry.sqlite3")),
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA busy_timeout=30000; PRAGMA synchronous=NORMAL;",
        },
        "TEST": {"NAME": env.str("FOUNDRY_TEST_DB", default=str(FOUNDRY_HOME / "test.sqlite3"))},
    }
}
# FOUNDRY_DATABASE_URL moves the whole store (Django's tables, keyword index, vectors) to PostgreSQL with
# pgvector (docs/operations.md, "PostgreSQL"). FOUNDRY_DB_CONN_MAX_AGE keeps a connection open this many
# seconds (0: one per request), checked before reuse.
FOUNDRY_DATABASE_URL = env.str("FOUNDRY_DATABASE_URL", default="")
# The SQLite settings stay at hand for the files Foundry makes beside the store (the eval commands' own indexes,
# foundry_site/db/switch.py).
FOUNDRY_SQLITE_DATABASE = DATABASES["default"]
if FOUNDRY_DATABASE_URL:
    DATABASES = {
        "default": database_from_url(FOUNDRY_DATABASE_URL, conn_max_age=env.int("FOUNDRY_DB_CONN_MAX_AGE", default=0))
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en"
# The interface languages (docs/languages.md); an answer's refusal and low-confidence texts follow the
# question's language instead (generation/answers/language.py).
LANGUAGES = [("en", "English"), ("nl", "Nederlands"), ("de", "Deutsch")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = FOUNDRY_HOME / "static"
# Serve straight from the apps' static folders, so no collectstatic step is needed
# (WhiteNoise still warns when STATIC_ROOT is missing).
WHITENOISE_USE_FINDERS = True
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
MEDIA_ROOT = FOUNDRY_HOME / "uploads"
# API lists without an explicit paginator use this one, whose page number is bounded.
NINJA_PAGINATION_CLASS = "core.pagination.PageNumberPagination"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# The cache holds rate-limit counters, so every server process must share it:
# a file cache under FOUNDRY_HOME works for gunicorn workers on one machine;
# use e.g. redis://… when the web runs on several machines.
CACHES = {"default": env.cache_url("FOUNDRY_CACHE_URL", default=f"filecache://{FOUNDRY_HOME / 'cache'}")}

# Celery: no broker configured means every task runs in-process, eagerly (`make run`).
# With a broker, work is split over two queues (docs/operations.md): `compute` is
# pure CPU work any machine can serve, `db` writes the SQLite file and must be
# served only on the host that holds it.
CELERY_BROKER_URL = env.str("FOUNDRY_BROKER_URL", default="")
CELERY_RESULT_BACKEND = env.str("FOUNDRY_RESULT_BACKEND", default=CELERY_BROKER_URL or None)
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env.int("FOUNDRY_TASK_SOFT_TIME_LIMIT", default=1800)
CELERY_TASK_TIME_LIMIT = env.int("FOUNDRY_TASK_TIME_LIMIT", default=1900)
CELERY_WORKER_CONCURRENCY = env.int("FOUNDRY_WORKER_CONCURRENCY", default=1)
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_QUEUES = [Queue("compute"), Queue("db")]
# Anything not routed explicitly goes to `db`: that host can run every task.
CELERY_TASK_DEFAULT_QUEUE = "db"
CELERY_TASK_ROUTES = {
    "sources.tasks.prepare_source": {"queue": "compute"},
    "sources.tasks.*": {"queue": "db"},
    "generation.tasks.generate_compute": {"queue": "compute"},
    "generation.tasks.*": {"queue": "db"},
    "foundry_site.tasks.*": {"queue": "db"},
}
CELERY_RESULT_EXPIRES = env.int("FOUNDRY_RESULT_EXPIRES", default=86400)
CELERY_WORKER_SEND_TASK_EVENTS = False
# With acks_late, Redis re-delivers an unacknowledged message only after the
# visibility timeout, so it must exceed the longest task (hard limit) or a slow
# task would run twice. A killed worker's work is recovered long before that by
# the stale-run sweeper (FOUNDRY_JOB_STALE_SECONDS, below): this timeout only
# brings back a message nobody needs any more, which the tasks then drop.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env.int("FOUNDRY_BROKER_VISIBILITY_TIMEOUT", default=CELERY_TASK_TIME_LIMIT + 300),
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(FOUNDRY_HOME / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    "sweep-stale-runs": {
        "task": "foundry_site.tasks.sweep_stale_runs",
        "schedule": env.float("FOUNDRY_SWEEP_INTERVAL", default=15.0),
    },
}
# Folders bound to collections are synced every sync.interval of foundry.yaml (docs/operations.md).
if FOUNDRY.sync.interval_seconds is not None:
    CELERY_BEAT_SCHEDULE["sync-bound-folders"] = {
        "task": "sources.tasks.sync_bound_folders",
        "schedule": FOUNDRY.sync.interval_seconds,
    }
# Retries apply only to transient errors (core/jobs.py); everything else fails the run.
FOUNDRY_TASK_MAX_RETRIES = env.int("FOUNDRY_TASK_MAX_RETRIES", default=5)
FOUNDRY_TASK_RETRY_BACKOFF = env.int("FOUNDRY_TASK_RETRY_BACKOFF", default=5)
# A task whose worker process died this many times (segfault, OOM kill) is poison: it fails.
FOUNDRY_TASK_MAX_DELIVERIES = env.int("FOUNDRY_TASK_MAX_DELIVERIES", default=3)
# Every task working for a run (an ingest job, a generation run) reports a heartbeat every
# FOUNDRY_HEARTBEAT_SECONDS from a thread of its own, however long its current step (a model call,
# a large file) takes. A run silent for FOUNDRY_JOB_STALE_SECONDS has lost its worker: the sweeper
# (every FOUNDRY_SWEEP_INTERVAL, celery beat in the db worker) re-queues it, up to
# FOUNDRY_JOB_MAX_ATTEMPTS times, then fails it. An ingest file's prepare names its file in its beats:
# a file silent that long while its job goes on is sent again on its own, up to as many attempts, then
# failed alone. Lost work is found within stale + sweep interval (75 s by default) whatever the task
# time limit. Several beats must fit in the window, so that one late message is not a lost run.
FOUNDRY_JOB_STALE_SECONDS = env.int("FOUNDRY_JOB_STALE_SECONDS", default=60)
FOUNDRY_HEARTBEAT_SECONDS = env.float("FOUNDRY_HEARTBEAT_SECONDS", default=min(10.0, FOUNDRY_JOB_STALE_SECONDS / 6))
if not 0 < FOUNDRY_HEARTBEAT_SECONDS * 3 <= FOUNDRY_JOB_STALE_SECONDS:
    raise ImproperlyConfigured(
        f"FOUNDRY_HEARTBEAT_SECONDS ({FOUNDRY_HEARTBEAT_SECONDS:g}) must be above 0 and at most a third of "
        f"FOUNDRY_JOB_STALE_SECONDS ({FOUNDRY_JOB_STALE_SECONDS}): a run is taken for lost after that much silence"
    )
FOUNDRY_JOB_MAX_ATTEMPTS = env.int("FOUNDRY_JOB_MAX_ATTEMPTS", default=3)
# Without a broker, generation runs started from the web or the API execute on this many
# threads of each web process (generation/background.py); more runs wait, pending.
FOUNDRY_RUN_THREADS = env.int("FOUNDRY_RUN_THREADS", default=1)

# A compute-only worker (another machine, or `foundry worker --queues compute`)
# must never open the SQLite file: give it a database that refuses every query,
# and skip Celery's start-up system checks, which would query it.
FOUNDRY_COMPUTE_ONLY = env.bool("FOUNDRY_COMPUTE_ONLY", default=False)
if FOUNDRY_COMPUTE_ONLY:
    DATABASES = {"default": {"ENGINE": "django.db.backends.dummy"}}
    os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {
        "file": {
            "class": "logging.FileHandler",
            "filename": str(FOUNDRY_HOME / "foundry.log"),
            "formatter": "plain",
        },
    },
    "root": {"handlers": ["file"], "level": env.str("FOUNDRY_LOG_LEVEL", default="INFO")},
}

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
