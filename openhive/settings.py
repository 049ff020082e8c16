"""Deployment settings, read from the environment (django-environ; a `.env` file works too).

No DATABASE_URL → embedded SQLite (WAL) under OPENHIVE_DATA_DIR; DATABASE_URL=postgres://… →
PostgreSQL with pgvector. REDIS_URL → Redis channel layer, else the in-memory layer.
"""

import os
import secrets
from pathlib import Path

import environ

from openhive.core.dburl import database_config

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").is_file():  # optional: no notice when there is none
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DATA_DIR = Path(env("OPENHIVE_DATA_DIR", default=str(BASE_DIR / "data"))).resolve()
RUN_DIR = Path(env("OPENHIVE_RUN_DIR", default=str(DATA_DIR / "run"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """An explicit SECRET_KEY wins; otherwise one is generated once and kept in the data dir,
    so a fresh machine works without a hard-coded (and therefore public) key."""
    explicit = env("SECRET_KEY", default="")
    if explicit:
        return explicit
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# No "daphne" app: it only swaps in daphne for `runserver`, and importing it (twisted's
# reactor) cost every manage.py verb ~0.4 s; `serve` runs daphne itself.
INSTALLED_APPS = [
    "openhive.admin_app.AdminConfig",  # django.contrib.admin, discovered by the URLconf
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_q",
    "openhive.apps.NinjaAssetsConfig",  # django-ninja's templates and static files
    "openhive.apps.OpenHiveConfig",
    "openhive.engine",
    "openhive.chat",
    "openhive.org",
    "teams",
    "tasks",
    "triggers",
    "memory",
    "vault",
    "trust",
    "evolution",
    "openhive.tools",
    "openhive.started",  # last: start-up is over once its ready() runs (openhive.core.heap)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "openhive.urls"
ASGI_APPLICATION = "openhive.asgi.application"

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
    },
]

DATABASE_URL = env("DATABASE_URL", default="")
if DATABASE_URL:
    # A URL that cannot be used stops here with a few lines (manage.py prints them).
    DATABASES = {"default": database_config(DATABASE_URL)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DATA_DIR / "openhive.sqlite3",
            "OPTIONS": {
                # WAL lets readers run beside the single writer; IMMEDIATE takes the write lock
                # at BEGIN so two processes never deadlock upgrading a read lock.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "openhive.chat.layers.InMemoryChannelLayer"}}

# django-q2's cluster heartbeat (which clusters and worker processes are alive: the admin's
# dashboard shows them) lives in a cache every process can read: Redis when there is one,
# otherwise files under the run dir (one machine). Nothing else is cached there.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "cluster-stats": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(RUN_DIR / "cache" / "cluster-stats"),
        }
    ),
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
LOGIN_URL = "/admin/login/"

TASK_TIMEOUT_SECONDS = env.int("OPENHIVE_TASK_TIMEOUT", default=1800)

Q_CLUSTER = {
    "name": "openhive",
    "workers": env.int("OPENHIVE_WORKERS", default=2),
    "timeout": TASK_TIMEOUT_SECONDS,
    # Our own queue retries; django-q2 must never re-run a task by itself (retry > timeout).
    "retry": TASK_TIMEOUT_SECONDS + 600,
    "max_attempts": 1,
    "orm": "default",
    "poll": 0.2,
    "catch_up": False,
    "save_limit": 200,
    "ack_failures": True,
    "sync": env.bool("OPENHIVE_Q_SYNC", default=False),
    "cache": "cluster-stats",
    "log_level": "WARNING",
}

OPENHIVE = {
    "TZ": env("TZ", default="UTC"),
    "DEFAULT_MAX_TURNS": env.int("OPENHIVE_MAX_TURNS", default=50),
    "LEASE_SECONDS": env.int("OPENHIVE_LEASE_SECONDS", default=60),
    "TASK_MAX_ATTEMPTS": env.int("OPENHIVE_TASK_MAX_ATTEMPTS", default=3),
    # PostgreSQL: a task's end is committed without waiting for the WAL flush (see README).
    "QUEUE_SYNC_FINISH": env.bool("OPENHIVE_QUEUE_SYNC_FINISH", default=True),
    # PostgreSQL: session records commit without waiting for the WAL flush (README).
    "SESSION_SYNC_COMMIT": env.bool("OPENHIVE_SESSION_SYNC_COMMIT", default=False),
    # PostgreSQL: the statements of every enqueue, named task's claim, session start, step and
    # task end are prepared once per connection (openhive.core.prepared); off behind a pooler
    # in transaction mode.
    "PG_PREPARED": env.bool("OPENHIVE_PG_PREPARED", default=True),
    # Quick steps of one session are written together, at most this many ms apart (README).
    "STEP_WRITE_WINDOW_MS": env.float("OPENHIVE_STEP_WRITE_WINDOW_MS", default=100.0),
    "ENGINE_TICK_SECONDS": env.float("OPENHIVE_ENGINE_TICK", default=0.25),
    # A dispatched task that no worker claimed within this time is handed out again.
    "REDISPATCH_SECONDS": env.int("OPENHIVE_REDISPATCH_SECONDS", default=120),
    # Tasks handed to workers at once; 0 = the worker count of one cluster. With several
    # clusters, set it to the sum of their workers.
    "DISPATCH_SLOTS": env.int("OPENHIVE_DISPATCH_SLOTS", default=0),
    "CHAT_HISTORY_MESSAGES": env.int("OPENHIVE_CHAT_HISTORY", default=40),
    "OUTBOX_POLL_SECONDS": env.float("OPENHIVE_OUTBOX_POLL", default=0.3),
    # Orchestration (teams/, tasks/): org-op mutex, cancellation, stall detection, handoffs.
    "ORG_OP_DRAIN_SECONDS": env.float("OPENHIVE_ORG_OP_DRAIN_SECONDS", default=600),
    "ORG_OP_POLL_SECONDS": env.float("OPENHIVE_ORG_OP_POLL_SECONDS", default=0.1),
    "CANCEL_POLL_SECONDS": env.float("OPENHIVE_CANCEL_POLL_SECONDS", default=0.25),
    # Before a model call the cancel flag is read again unless read within this time (well
    # under the poll: a quick tool loop reads it a few times a second, not at every step).
    "CANCEL_FRESH_SECONDS": env.float("OPENHIVE_CANCEL_FRESH_SECONDS", default=0.1),
    # A query fan-out's thread waits this long for the next child, its connection kept open.
    "QUERY_THREAD_IDLE_SECONDS": env.float("OPENHIVE_QUERY_THREAD_IDLE_SECONDS", default=30),
    "STALL_CHECK_SECONDS": env.float("OPENHIVE_STALL_CHECK_SECONDS", default=600),
    "STALL_WARN_SECONDS": env.float("OPENHIVE_STALL_WARN_SECONDS", default=3600),
    "STALL_ERROR_SECONDS": env.float("OPENHIVE_STALL_ERROR_SECONDS", default=86400),
    "BOOTSTRAP_MAX_RETRIES": env.int("OPENHIVE_BOOTSTRAP_MAX_RETRIES", default=2),
    "HANDOFF_RATE_PER_MINUTE": env.int("OPENHIVE_HANDOFF_RATE_PER_MINUTE", default=10),
    "HANDOFF_DEDUP_SECONDS": env.float("OPENHIVE_HANDOFF_DEDUP_SECONDS", default=60),
    "QUERY_TIMEOUT_MS": env.int("OPENHIVE_QUERY_TIMEOUT_MS", default=120_000),
    # A chat topic with no message for this long goes idle (at most 5 stay active).
    "TOPIC_IDLE_MINUTES": env.float("OPENHIVE_TOPIC_IDLE_MINUTES", default=60),
    # Chat turns running at once per web process (each waits on its model most of the time).
    "CHAT_TURN_THREADS": env.int("OPENHIVE_CHAT_TURN_THREADS", default=16),
    # Where those turns run: "process" (a turn host process beside each web process, so a
    # turn never holds the GIL an ack needs) or "threads" (in the web process; tests).
    "CHAT_TURNS": env("OPENHIVE_CHAT_TURNS", default="process"),
    # Messages one socket may have waiting for their answer; the next gets a `busy` error.
    "CHAT_PENDING_PER_SOCKET": env.int("OPENHIVE_CHAT_PENDING_PER_SOCKET", default=100),
    # Reach (openhive/tools). Exact `host:port` destinations exempt from the SSRF address rule
    # (internal services an operator chooses to expose to teams); logged at start.
    "SSRF_ALLOW": env.list("OPENHIVE_SSRF_ALLOW", default=[]),
    # Where bubblewrap is missing, run `bash` and scripts without isolation instead of refusing.
    "ALLOW_UNSANDBOXED": env.bool("OPENHIVE_ALLOW_UNSANDBOXED", default=False),
    "SANDBOX_MEMORY_MB": env.int("OPENHIVE_SANDBOX_MEMORY_MB", default=2048),
    "SANDBOX_PROCESSES": env.int("OPENHIVE_SANDBOX_PROCESSES", default=128),
    # Plugin tools (openhive/tools/plugins): per-call timeout, the cap on a result, and the
    # interpreter run in the sandbox (default /usr/bin/python3; standard library only).
    "PLUGIN_TIMEOUT_SECONDS": env.float("OPENHIVE_PLUGIN_TIMEOUT_SECONDS", default=30),
    "PLUGIN_OUTPUT_BYTES": env.int("OPENHIVE_PLUGIN_OUTPUT_BYTES", default=200_000),
    "PLUGIN_PYTHON": env.str("OPENHIVE_PLUGIN_PYTHON", default=""),
    # The browser tools: Chromium's path (empty: `chromium` on PATH), live team contexts per
    # worker process, and how long an unused context (then Chromium itself) stays open.
    "BROWSER_EXECUTABLE": env("OPENHIVE_BROWSER_EXECUTABLE", default=""),
    "BROWSER_MAX_CONTEXTS": env.int("OPENHIVE_BROWSER_MAX_CONTEXTS", default=4),
    "BROWSER_IDLE_SECONDS": env.float("OPENHIVE_BROWSER_IDLE_SECONDS", default=300),
    # Model calls: retries per profile (rate limits, timeouts, server errors) with exponential
    # backoff and jitter; a Retry-After longer than the cap goes to the fallbacks instead.
    "LLM_RETRIES": env.int("OPENHIVE_LLM_RETRIES", default=3),
    "LLM_BACKOFF_SECONDS": env.float("OPENHIVE_LLM_BACKOFF_SECONDS", default=1.0),
    "LLM_BACKOFF_MAX_SECONDS": env.float("OPENHIVE_LLM_BACKOFF_MAX_SECONDS", default=30),
    "LLM_RETRY_AFTER_MAX_SECONDS": env.float("OPENHIVE_LLM_RETRY_AFTER_MAX_SECONDS", default=120),
    # A task whose provider (and fallbacks) stay down goes back to the queue with a growing
    # delay, at most this many times, before it fails.
    "PROVIDER_REQUEUE_MAX": env.int("OPENHIVE_PROVIDER_REQUEUE_MAX", default=3),
    "PROVIDER_REQUEUE_SECONDS": env.float("OPENHIVE_PROVIDER_REQUEUE_SECONDS", default=60),
    "PROVIDER_REQUEUE_MAX_SECONDS": env.float(
        "OPENHIVE_PROVIDER_REQUEUE_MAX_SECONDS", default=1800
    ),
    # Budgets: other sessions' spend is re-read this often (this session's own is exact).
    "BUDGET_REFRESH_SECONDS": env.float("OPENHIVE_BUDGET_REFRESH_SECONDS", default=2.0),
    # Context compaction: at this share of the profile's context_window, tool results older
    # than the latest turns are cut to the cap, then older turns are summarised.
    "COMPACT_THRESHOLD": env.float("OPENHIVE_COMPACT_THRESHOLD", default=0.8),
    "COMPACT_KEEP_MESSAGES": env.int("OPENHIVE_COMPACT_KEEP_MESSAGES", default=6),
    "COMPACT_TOOL_RESULT_CHARS": env.int("OPENHIVE_COMPACT_TOOL_RESULT_CHARS", default=2000),
}

LOG_LEVEL = env("OPENHIVE_LOG_LEVEL", default="INFO")
# `plain` (the ids of the team, task and session appended) or `json` (one object a line).
LOG_FORMAT = env("OPENHIVE_LOG_FORMAT", default="plain")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "scrub_secrets": {"()": "openhive.core.scrubbing.ScrubSecretsFilter"},
        "log_context": {"()": "openhive.core.logcontext.ContextFilter"},
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s%(ids)s"},
        "json": {"()": "openhive.core.logcontext.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "plain",
            "filters": ["log_context", "scrub_secrets"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django_q": {"level": "WARNING"},
        # Start-up chatter (the cluster's processes, the web server's address and its start
        # and stop steps): serve prints one banner once the port answers and the workers are
        # ready.
        "django-q": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
        "uvicorn": {"level": "WARNING"},
        "LiteLLM": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
    },
}

# Fernet keys for vault secrets, newest first (comma-separated); empty → derived from SECRET_KEY.
VAULT_KEYS = env.list("OPENHIVE_VAULT_KEY", default=[])

# Memory embeddings run numpy matrix products on small matrices; OpenBLAS threads then only
# fight each other and every other process for the cores (5x slower on 2 busy cores).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
