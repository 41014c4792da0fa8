"""Settings: every value comes from the environment (see .env.example).

TRAINYARD_ENV=development (the default) allows insecure local defaults: a dev secret key,
SQLite, an embedded Celery broker. TRAINYARD_ENV=production requires every secret to be set.
"""

import base64
import hashlib
import json
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from portal.env import (
    env_bool,
    env_file,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_secret,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("TRAINYARD_VAR_DIR", str(BASE_DIR / "var")))

ENVIRONMENT = env_str("TRAINYARD_ENV", "development")
if ENVIRONMENT not in {"development", "production"}:
    raise ImproperlyConfigured(f"TRAINYARD_ENV={ENVIRONMENT!r}: use development or production")
PRODUCTION = ENVIRONMENT == "production"
# Development keeps SQLite and the embedded broker in VAR_DIR; the core app creates LOCAL_DIRS
# when Django starts (importing settings creates nothing).
LOCAL_DIRS: list[Path] = [] if PRODUCTION else [VAR_DIR]

DEBUG = env_bool("DEBUG", default=not PRODUCTION)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG must be false when TRAINYARD_ENV=production")

SECRET_KEY = env_secret("SECRET_KEY", None if PRODUCTION else "dev-only-insecure-key-" + "x" * 40)
if PRODUCTION and len(SECRET_KEY) < 50:
    raise ImproperlyConfigured("SECRET_KEY must be at least 50 characters in production")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
SITE_URL = env_str("SITE_URL", "http://localhost:8000")

INSTALLED_APPS = [
    "portal.accounts.admin_site.TwoFactorAdminConfig",  # django.contrib.admin, behind the 2nd factor
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
    "portal.core",
    "portal.accounts",
    "portal.catalog",
    "portal.sizing",
    "portal.quotes",
    "portal.orders",
    "portal.webhooks",
    "portal.billing",
    "provisioning",
    "portal.api",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "portal.core.middleware.RejectControlCharactersMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",  # request.user.is_verified(): the session's 2nd factor
    "django.contrib.messages.middleware.MessageMiddleware",
    "portal.accounts.middleware.TwoFactorMiddleware",  # enrol or verify before anything else
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes requires
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
ASGI_APPLICATION = "portal.asgi.application"

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

# --- Database -----------------------------------------------------------------------------
_default_db = None if PRODUCTION else f"sqlite:///{VAR_DIR / 'trainyard.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", _default_db), conn_max_age=env_int("DB_CONN_MAX_AGE", 60)
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A file, not :memory:, so a Celery worker process started by a test shares it.
    # Named per process so two test runs on one machine don't share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
elif env_bool("DB_PREPARED_STATEMENTS", True):
    # Parameters bound by PostgreSQL and a statement prepared after five uses on a connection:
    # parsing and planning cost the API's order list more than running it. Turn off behind a
    # pooler that cannot keep prepared statements (PgBouncer in transaction mode before 1.21).
    DATABASES["default"].setdefault("OPTIONS", {}).update(server_side_binding=True, prepare_threshold=5)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: cache and Celery broker -------------------------------------------------------
REDIS_URL = env_str("REDIS_URL", "")
if PRODUCTION and not REDIS_URL:
    raise ImproperlyConfigured("REDIS_URL must be set in production")

if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": REDIS_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

CELERY_BROKER_URL = REDIS_URL or "filesystem://"
CELERY_RESULT_BACKEND = REDIS_URL or f"file://{VAR_DIR / 'celery' / 'results'}"
if not REDIS_URL:
    # Embedded broker for `make run`: a real worker process, no server needed.
    _celery_dir = VAR_DIR / "celery"
    LOCAL_DIRS += [_celery_dir / sub for sub in ("queue", "control", "processed", "results")]
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_celery_dir / "queue"),
        "data_folder_out": str(_celery_dir / "queue"),
        "control_folder": str(_celery_dir / "control"),
        "processed_folder": str(_celery_dir / "processed"),
    }
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "trainyard")
# The sweeper has a queue of its own, so a backlog of steps cannot starve it; every worker
# setup consumes it (devserver, docker-compose's sweeper service, the tests' workers).
CELERY_SWEEP_QUEUE = env_str("CELERY_SWEEP_QUEUE", f"{CELERY_TASK_DEFAULT_QUEUE}.sweep")
CELERY_TASK_ROUTES = {"provisioning.sweep": {"queue": CELERY_SWEEP_QUEUE}}
# Results are read only where a caller waits for one (core.health_ping sets ignore_result=False):
# a task that stores no result never touches the result backend when it is queued, so a Redis
# outage costs a request only the short publish retry below, not the backend's retry loop.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": env_int("CELERY_PUBLISH_MAX_RETRIES", 1, minimum=0),
    "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
CELERY_BROKER_CONNECTION_TIMEOUT = env_int("CELERY_BROKER_CONNECTION_TIMEOUT", 2, minimum=1)
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 30 * 60, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 25 * 60, minimum=1)
CELERY_RESULT_EXPIRES = 24 * 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE: dict = {}

# --- Auth ---------------------------------------------------------------------------------
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]


def _derived_fernet_key(secret: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(secret.encode()).digest()).decode()


FIELD_ENCRYPTION_KEY = env_secret(
    "FIELD_ENCRYPTION_KEY", None if PRODUCTION else _derived_fernet_key(SECRET_KEY)
)

# --- I18N, static -------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# --- Request and upload limits ---------------------------------------------------------------
# Form bodies without files; files are refused past UPLOAD_MAX_BYTES while they stream in
# (portal.core.uploads), before any view reads them.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_NUMBER_FIELDS = 500
DATA_UPLOAD_MAX_NUMBER_FILES = 5
UPLOAD_MAX_BYTES = env_int("UPLOAD_MAX_BYTES", 1024 * 1024, minimum=1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = UPLOAD_MAX_BYTES  # small enough to keep in memory
FILE_UPLOAD_HANDLERS = ["portal.core.uploads.SizeLimitUploadHandler",
                        "django.core.files.uploadhandler.MemoryFileUploadHandler",
                        "django.core.files.uploadhandler.TemporaryFileUploadHandler"]

# --- E-mail -------------------------------------------------------------------------------
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if PRODUCTION
    else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Trainyard <noreply@localhost>")
# Where the pages tell customers to write (a failed order, a question about a server).
SUPPORT_EMAIL = env_str("SUPPORT_EMAIL", "support@localhost")

# --- Accounts: team invitations, self sign-up ---------------------------------------------
# How long an invitation link to join an organisation works.
INVITATION_VALID_DAYS = env_int("INVITATION_VALID_DAYS", 7, minimum=1)
# Anyone may create an account and an organisation at /account/signup/ only when this is true
# (off by default: the operator invites customers); the account works once its e-mail is verified.
SIGNUP_ENABLED = env_bool("SIGNUP_ENABLED", False)
# How long a link to verify a new account's e-mail, or confirm a changed e-mail, works.
ACCOUNT_LINK_VALID_HOURS = env_int("ACCOUNT_LINK_VALID_HOURS", 48, minimum=1)

# --- Security (production) ----------------------------------------------------------------
# true only when a reverse proxy in front of the portal sets X-Forwarded-Proto and appends the
# client's address to X-Forwarded-For (and strips what clients send): then HTTPS is read from
# the header, and login throttling counts the address the proxy saw.
TRUSTED_PROXY = env_bool("TRUSTED_PROXY", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if TRUSTED_PROXY else None
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", PRODUCTION)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if PRODUCTION else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = PRODUCTION
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", PRODUCTION)
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): every script, style, image and connection from this
# origin only, so no inline script or style runs (htmx is a static file; its inline indicator
# style is turned off in base.html's htmx-config).
CONTENT_SECURITY_POLICY = {"DIRECTIVES": {
    "default-src": ["'self'"], "script-src": ["'self'"], "style-src": ["'self'"],
    "img-src": ["'self'", "data:"], "font-src": ["'self'"], "connect-src": ["'self'"],
    "object-src": ["'none'"], "base-uri": ["'self'"], "form-action": ["'self'"],
    "frame-ancestors": ["'none'"]}}

# --- Login throttling (django-axes) -------------------------------------------------------
# After LOGIN_FAILURE_LIMIT failed log-ins for one username, or from one address, that
# username or address is locked out for LOGIN_LOCKOUT_MINUTES (a success resets the count);
# operators unlock at /ops/logins/.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend",
                           "django.contrib.auth.backends.ModelBackend"]
AXES_ENABLED = env_bool("LOGIN_THROTTLING", True)
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "portal.accounts.lockouts.lockout_response"
AXES_CLIENT_IP_CALLABLE = "portal.core.proxy.client_ip"
AXES_USERNAME_CALLABLE = "portal.accounts.lockouts.login_username"
AXES_VERBOSE = False

# --- Two-factor sign-in (django-otp: TOTP apps, one-time recovery codes) ---------------------
# Staff always, members of an organisation that requires it, anyone who turned it on: after the
# password (the login above, throttled by axes) a token from the authenticator app or a recovery
# code; until then every page sends them to that step (or to enrolment). docs/operations.md.
OTP_TOTP_ISSUER = env_str("TWO_FACTOR_ISSUER", "Trainyard")  # the account's label in the app
OTP_ADMIN_HIDE_SENSITIVE_DATA = True  # the admin never shows a device's secret key
# A wrong token makes the next try wait 1, 2, 4, 8… seconds (per device), so guessing is hopeless.
OTP_TOTP_THROTTLE_FACTOR = 1
OTP_STATIC_THROTTLE_FACTOR = 1
TWO_FACTOR_RECOVERY_CODES = 10

# --- REST API -----------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.accounts.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated",
                                   "portal.api.permissions.KeyScope"],
    "DEFAULT_PARSER_CLASSES": ["portal.api.parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["portal.api.renderers.FastJSONRenderer"],
    "DEFAULT_THROTTLE_CLASSES": ["portal.api.throttling.PerKeyRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"api": env_str("API_RATE_LIMIT", "600/min")},
    "EXCEPTION_HANDLER": "portal.api.errors.problem_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
}
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 1024 * 1024)  # a JSON body; larger is a 400
# Each process keeps the catalog in memory and checks at most this often whether it changed.
CATALOG_CACHE_CHECK_S = env_float("CATALOG_CACHE_CHECK_S", 2.0, minimum=0)
API_IDEMPOTENCY_PURGE_INTERVAL_S = env_int("API_IDEMPOTENCY_PURGE_INTERVAL_S", 3600, minimum=60)
# Outbound connections for customers and resellers (webhook receivers, custom S3 endpoints):
# https to public addresses only, checked where the URL is given and again, resolved, at every
# connection (portal/core/addresses.py). OUTBOUND_ALLOWED_NETWORKS lists networks (CIDR) that are
# allowed anyway, plain http too: an on-premises endpoint that is private by design. Default:
# none (a development server that sends webhooks to itself sets 127.0.0.0/8,::1/128).
OUTBOUND_ALLOWED_NETWORKS = env_networks("OUTBOUND_ALLOWED_NETWORKS", [])
if os.environ.get("WEBHOOK_ALLOW_LOOPBACK", "").strip().lower() in {"1", "true", "yes", "on"}:
    raise ImproperlyConfigured("WEBHOOK_ALLOW_LOOPBACK was replaced by OUTBOUND_ALLOWED_NETWORKS: "
                               "set OUTBOUND_ALLOWED_NETWORKS=127.0.0.0/8,::1/128 instead.")
# Webhooks: receivers as above. Each attempt waits WEBHOOK_TIMEOUT_S; retries back off
# exponentially from WEBHOOK_RETRY_BASE_S up to WEBHOOK_RETRY_MAX_S for WEBHOOK_RETRY_WINDOW_S;
# an endpoint failing that long is disabled. Every WEBHOOK_SWEEP_INTERVAL_S a sweep queues again
# pending deliveries whose task was lost (a broker restart).
WEBHOOK_TIMEOUT_S = env_float("WEBHOOK_TIMEOUT_S", 10.0, minimum=0.1)
WEBHOOK_RETRY_BASE_S = env_float("WEBHOOK_RETRY_BASE_S", 30.0, minimum=0.01)
WEBHOOK_RETRY_MAX_S = env_float("WEBHOOK_RETRY_MAX_S", 3600.0, minimum=0.01)
WEBHOOK_RETRY_WINDOW_S = env_int("WEBHOOK_RETRY_WINDOW_S", 24 * 3600, minimum=1)
WEBHOOK_DISABLE_AFTER_S = env_int("WEBHOOK_DISABLE_AFTER_S", 24 * 3600, minimum=1)
WEBHOOK_SWEEP_INTERVAL_S = env_int("WEBHOOK_SWEEP_INTERVAL_S", 300, minimum=10)
CELERY_BEAT_SCHEDULE |= {
    "api-idempotency-purge": {"task": "api.idempotency_purge",
                              "schedule": float(API_IDEMPOTENCY_PURGE_INTERVAL_S)},
    "webhooks-requeue-pending": {"task": "webhooks.requeue_pending",
                                 "schedule": float(WEBHOOK_SWEEP_INTERVAL_S),
                                 "options": {"expires": float(WEBHOOK_SWEEP_INTERVAL_S)}},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Trainyard reseller API",
    "DESCRIPTION": "Quotes, orders and training servers for resellers.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {"OrderStateEnum": "portal.orders.states.OrderState"},
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "portal.api.v1.schema.problem_responses",
                             "portal.api.v1.schema.request_strings",
                             "portal.api.v1.schema.one_model_source"],
    "COMPONENT_SPLIT_REQUEST": True,
}

# --- Logging: one JSON object per line on stdout ------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "portal.core.logging.JsonFormatter"}},
    "handlers": {"stdout": {"class": "logging.StreamHandler", "formatter": "json"}},
    "root": {"handlers": ["stdout"], "level": env_str("LOG_LEVEL", "INFO")},
    # The AWS SDK logs request and response bodies at DEBUG, and those hold issued secret keys
    # (CreateAccessKey): its loggers stay at INFO or above whatever LOG_LEVEL says.
    "loggers": {"django.db.backends": {"level": "WARNING"},
                **{name: {"level": "INFO"} for name in ("botocore", "boto3", "s3transfer",
                                                         "urllib3", "minio", "sushy")}},
}

# --- Provisioning -------------------------------------------------------------------------
NODE_DRIVERS = {
    "simulated": "provisioning.drivers.simulated.SimulatedDriver",
    "ssh": "provisioning.drivers.ssh.SshDriver",
}
DEFAULT_NODE_DRIVER = env_str("DEFAULT_NODE_DRIVER", "simulated")
NODE_DRIVER_OPTIONS: dict[str, dict] = {"simulated": {}, "ssh": {}}
# The provisioning key the ssh driver logs in with (a mounted secret file, never in the DB).
if _ssh_key_file := env_str("SSH_PRIVATE_KEY_FILE", ""):
    NODE_DRIVER_OPTIONS["ssh"] |= {"private_key_file": _ssh_key_file,
                                   "user": env_str("SSH_USER", "root")}
# The BMC password for the ssh driver's IPMI power control, from a mounted secret file: never
# in the database (a node's driver_options.ipmi gives only address and user) and never logged.
if (_ipmi_password := env_file("IPMI_PASSWORD_FILE")) is not None:
    if not _ipmi_password:
        raise ImproperlyConfigured("IPMI_PASSWORD_FILE names an empty file")
    NODE_DRIVER_OPTIONS["ssh"]["ipmi"] = {"password": _ipmi_password}
# The same for a Redfish BMC (driver_options.redfish gives address, user and system id).
if (_redfish_password := env_file("REDFISH_PASSWORD_FILE")) is not None:
    if not _redfish_password:
        raise ImproperlyConfigured("REDFISH_PASSWORD_FILE names an empty file")
    NODE_DRIVER_OPTIONS["ssh"]["redfish"] = {"password": _redfish_password}

# MAAS installs, erases and powers "maas" nodes (provisioning/drivers/maas.py); Trainyard then works
# on them over SSH with the same key as ssh nodes. The API key (consumer:token:secret) is a mounted
# secret file, never in the database; an unset MAAS_URL leaves the driver unconfigured.
NODE_DRIVERS["maas"] = "provisioning.drivers.maas.MaasDriver"
NODE_DRIVER_OPTIONS["maas"] = {
    "url": env_str("MAAS_URL", ""),
    "distro_series": env_str("MAAS_DISTRO_SERIES", ""),
    "user": env_str("MAAS_SSH_USER", "trainyard"),
    "deploy_timeout_s": env_int("MAAS_DEPLOY_TIMEOUT_S", 3600, minimum=60),
    "release_timeout_s": env_int("MAAS_RELEASE_TIMEOUT_S", 3 * 3600, minimum=60),
}
if _ssh_key_file:
    NODE_DRIVER_OPTIONS["maas"]["private_key_file"] = _ssh_key_file
if (_maas_api_key := env_file("MAAS_API_KEY_FILE")) is not None:
    if len(_maas_api_key.split(":")) != 3:
        raise ImproperlyConfigured("MAAS_API_KEY_FILE must hold one MAAS API key, "
                                   "consumer_key:token_key:token_secret")
    NODE_DRIVER_OPTIONS["maas"]["api_key"] = _maas_api_key

# OpenStack Ironic (standalone) images the nodes of the ``ironic`` driver; after the install
# the ssh driver's key logs in as IRONIC_SSH_USER (cloud-init creates it). Images by name:
# IRONIC_IMAGES='{"ubuntu-24.04-cuda-12.8": {"url": "https://…", "checksum": "sha256:…"}}'.
NODE_DRIVERS["ironic"] = "provisioning.drivers.ironic.IronicDriver"
IRONIC_AUTH = env_str("IRONIC_AUTH", "noauth")
if IRONIC_AUTH not in ("noauth", "http_basic"):
    raise ImproperlyConfigured("IRONIC_AUTH must be noauth or http_basic")
try:
    IRONIC_IMAGES = json.loads(env_str("IRONIC_IMAGES", "") or "{}")
except ValueError as exc:
    raise ImproperlyConfigured(f"IRONIC_IMAGES is not JSON: {exc}") from None
if not isinstance(IRONIC_IMAGES, dict):
    raise ImproperlyConfigured("IRONIC_IMAGES must be a JSON object of image name → {url, checksum}")
if (_ironic_password := env_file("IRONIC_PASSWORD_FILE")) == "":
    raise ImproperlyConfigured("IRONIC_PASSWORD_FILE names an empty file")
NODE_DRIVER_OPTIONS["ironic"] = {
    "ironic": {"url": env_str("IRONIC_URL", ""), "auth": IRONIC_AUTH,
               "username": env_str("IRONIC_USER", ""), "password": _ironic_password or ""},
    "images": IRONIC_IMAGES,
    "user": env_str("IRONIC_SSH_USER", "trainyard"),
    "deploy_timeout_s": env_int("IRONIC_DEPLOY_TIMEOUT_S", 3600, minimum=1),
    "clean_timeout_s": env_int("IRONIC_CLEAN_TIMEOUT_S", 7200, minimum=1),
    "poll_interval_s": env_float("IRONIC_POLL_INTERVAL_S", 10.0, minimum=0.05),
}
if _ssh_key_file:
    NODE_DRIVER_OPTIONS["ironic"]["private_key_file"] = _ssh_key_file


# Simulated nodes: 1.0 = realistic delays (seconds to minutes), 0 = instant (tests, bench).
SIMULATED_DRIVER_DELAY_SCALE = env_float("SIMULATED_DRIVER_DELAY_SCALE", 1.0)
SIMULATED_DRIVER_STATE_DIR = env_str("SIMULATED_DRIVER_STATE_DIR", str(VAR_DIR / "simulated"))
PROVISIONING_OS_IMAGE = env_str("PROVISIONING_OS_IMAGE", "ubuntu-24.04-cuda-12.8")
# Nodes reserved at approval go back to stock if the pipeline has not started by then.
PROVISIONING_RESERVATION_MINUTES = env_int("PROVISIONING_RESERVATION_MINUTES", 30, minimum=1)
# A worker holds a step under a lease it renews while it works; a dead worker's lease lapses
# and a redelivered task takes the step over.
PROVISIONING_STEP_LEASE_S = env_int("PROVISIONING_STEP_LEASE_S", 60, minimum=2)
PROVISIONING_STEP_MAX_ATTEMPTS = env_int("PROVISIONING_STEP_MAX_ATTEMPTS", 5, minimum=1)
PROVISIONING_RETRY_BASE_MS = env_int("PROVISIONING_RETRY_BASE_MS", 5000, minimum=1)
PROVISIONING_RETRY_MAX_MS = env_int("PROVISIONING_RETRY_MAX_MS", 10 * 60 * 1000, minimum=1)
# A database error while a step records its outcome: tries (with backoff) before it gives up.
PROVISIONING_DB_RETRIES = env_int("PROVISIONING_DB_RETRIES", 5, minimum=1)
# A step still running after its deadline fails (beat task `provisioning.sweep`).
PROVISIONING_STEP_DEADLINE_S = env_int("PROVISIONING_STEP_DEADLINE_S", 3600, minimum=1)
PROVISIONING_STEP_DEADLINES_S = {"deploy_os": 2 * PROVISIONING_STEP_DEADLINE_S,
                                 "sanitise": 3 * PROVISIONING_STEP_DEADLINE_S}
PROVISIONING_SWEEP_INTERVAL_S = env_int("PROVISIONING_SWEEP_INTERVAL_S", 60, minimum=1)
PROVISIONING_HEALTH_INTERVAL_S = env_int("PROVISIONING_HEALTH_INTERVAL_S", 300, minimum=10)
# Ready nodes per SKU, as the catalog shows stock (inventory counts them; the catalog sits below).
CATALOG_STOCK = "provisioning.inventory.stock.ReadyNodes"
# The pipeline's plug-ins, by dotted path (like NODE_DRIVERS). Storage backend: a class with
# provision(ctx) and revoke(ctx) (default: buckets and keys through provisioning.storage;
# empty: none, and ordering storage then fails the step with a reason staff can act on).
# Stack renderer: (*, order, node, nodes, facts) -> RenderedStack (provisioning.stack.bundle).
PROVISIONING_STORAGE_BACKEND = env_str("PROVISIONING_STORAGE_BACKEND",
                                       "provisioning.storage.backend.ServiceStorageBackend")
PROVISIONING_STACK_RENDERER = env_str("PROVISIONING_STACK_RENDERER",
                                      "provisioning.stack.bundle.render_stack")
# The account customers log in with on a handed-over server (a node's driver_options.login_user
# wins); shown on the server page.
PROVISIONING_LOGIN_USER = env_str("PROVISIONING_LOGIN_USER", "ubuntu")
# Training steps of each acceptance phase (DDP, then FSDP2); the loss must fall over them.
PROVISIONING_ACCEPTANCE_STEPS = env_int("PROVISIONING_ACCEPTANCE_STEPS", 30, minimum=6)

if REDIS_URL:
    # With acks_late, a message taken by a worker that died comes back after this many seconds.
    # Default: longer than the longest step may run, so a running step is not delivered twice.
    _longest_step_s = max(PROVISIONING_STEP_DEADLINE_S, *PROVISIONING_STEP_DEADLINES_S.values())
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", _longest_step_s + 600, minimum=1)}

CELERY_BEAT_SCHEDULE |= {
    "provisioning-sweep": {"task": "provisioning.sweep",
                           "schedule": float(PROVISIONING_SWEEP_INTERVAL_S),
                           # a sweep nobody took in time is replaced by the next one
                           "options": {"queue": CELERY_SWEEP_QUEUE,
                                       "expires": float(PROVISIONING_SWEEP_INTERVAL_S)}},
    "provisioning-health": {"task": "provisioning.health_all",
                            "schedule": float(PROVISIONING_HEALTH_INTERVAL_S)},
}

# --- Object storage (provisioning.storage; docs/storage.md) --------------------------------
# An adapter per provider kind (dotted path); a provider's STORAGE_<SLUG>_ADAPTER overrides it.
STORAGE_PROVIDER_ADAPTERS = {
    "minio": "provisioning.storage.minio.MinioProvider",
    "aws": "provisioning.storage.iam.IamProvider",
    "wasabi": "provisioning.storage.iam.IamProvider",
    "b2": "provisioning.storage.b2.B2Provider",
    "custom": "provisioning.storage.custom.CustomProvider",
}
# Admin credentials per catalog provider slug: from the environment or NAME_FILE secrets, never
# from the catalog seed. An empty key means "not configured": the storage step then fails with
# a reason staff can act on. endpoint_url overrides the catalog's (internal address the workers
# use); public_endpoint_url is what customers are shown (blank: the same).
STORAGE_PROVIDERS = {
    "minio": {
        "adapter": env_str("STORAGE_MINIO_ADAPTER", ""),
        "endpoint_url": env_str("STORAGE_MINIO_ENDPOINT_URL", ""),
        "public_endpoint_url": env_str("STORAGE_MINIO_PUBLIC_ENDPOINT_URL", ""),
        "access_key": env_secret("STORAGE_MINIO_ACCESS_KEY", ""),
        "secret_key": env_secret("STORAGE_MINIO_SECRET_KEY", ""),
        # Only with STORAGE_MINIO_ADAPTER=provisioning.storage.iam.IamProvider (the embedded
        # loopback S3 of `make run` speaks IAM, not MinIO's admin API).
        "options": ({"iam_endpoint_url": _iam} if (_iam := env_str("STORAGE_MINIO_IAM_ENDPOINT_URL", ""))
                    else {}),
    },
    "wasabi": {
        "access_key": env_secret("STORAGE_WASABI_ACCESS_KEY", ""),
        "secret_key": env_secret("STORAGE_WASABI_SECRET_KEY", ""),
    },
    "b2": {
        "access_key": env_secret("STORAGE_B2_KEY_ID", ""),
        "secret_key": env_secret("STORAGE_B2_APPLICATION_KEY", ""),
    },
    "aws-s3": {
        "access_key": env_secret("STORAGE_AWS_ACCESS_KEY", ""),
        "secret_key": env_secret("STORAGE_AWS_SECRET_KEY", ""),
    },
    "custom-s3": {},
}
# Bucket names are <prefix>-<order reference>: pick a prefix unique to this deployment (AWS,
# Wasabi and B2 bucket names are global).
STORAGE_BUCKET_PREFIX = env_str("STORAGE_BUCKET_PREFIX", "trainyard")
# Lifecycle: keep the newest N noncurrent versions of each checkpoint, expire older noncurrent
# versions after D days (incomplete multipart uploads are always aborted after 7 days).
STORAGE_KEEP_VERSIONS = env_int("STORAGE_KEEP_VERSIONS", 3, minimum=1)
STORAGE_NONCURRENT_DAYS = env_int("STORAGE_NONCURRENT_DAYS", 30, minimum=1)
# Days a terminated order's bucket is kept before it is deleted (the default of the per-order
# choice, 1–365); a beat task deletes expired buckets every STORAGE_DELETE_INTERVAL_S seconds.
STORAGE_RETENTION_DAYS = env_int("STORAGE_RETENTION_DAYS", 30, minimum=1)
if STORAGE_RETENTION_DAYS > 365:
    raise ImproperlyConfigured(f"STORAGE_RETENTION_DAYS must be at most 365, not {STORAGE_RETENTION_DAYS}")
STORAGE_DELETE_INTERVAL_S = env_int("STORAGE_DELETE_INTERVAL_S", 3600, minimum=60)
# On the node: the checkpoint directory synced to the bucket at termination (under
# $TRAINYARD_ROOT), and the Python 3 (with boto3) that runs the sync tool.
# How long to wait for a newly issued key to work (IAM is eventually consistent), seconds.
STORAGE_CREDENTIAL_PROPAGATION_S = env_float("STORAGE_CREDENTIAL_PROPAGATION_S", 30.0, minimum=0)
CELERY_BEAT_SCHEDULE |= {
    "storage-delete-expired": {"task": "provisioning.storage_delete_expired",
                               "schedule": float(STORAGE_DELETE_INTERVAL_S)},
}

# --- Retention (docs/operations.md "Retention") ---------------------------------------------
# Every table that grows with time has a window; a beat task deletes what is past it every
# RETENTION_INTERVAL_S seconds, RETENTION_BATCH_SIZE rows a short transaction. A window of 0 days
# keeps those rows forever. Audit rows (order, node, run and bucket transitions) are never pruned.
RETENTION_INTERVAL_S = env_int("RETENTION_INTERVAL_S", 3600, minimum=60)
RETENTION_BATCH_SIZE = env_int("RETENTION_BATCH_SIZE", 5000, minimum=1)
# Health checks: summarised per node per day (HealthCheckDaily) once the day is over, then the
# checks themselves are deleted after this many days (each node's newest check is kept).
HEALTH_CHECK_RETENTION_DAYS = env_int("HEALTH_CHECK_RETENTION_DAYS", 30, minimum=0)
HEALTH_SUMMARY_RETENTION_DAYS = env_int("HEALTH_SUMMARY_RETENTION_DAYS", 730, minimum=0)
# Step log lines of runs that finished this many days ago (never of a run in progress, nor of a
# failed run staff can still retry).
STEP_LOG_RETENTION_DAYS = env_int("STEP_LOG_RETENTION_DAYS", 90, minimum=0)
# Webhook deliveries that succeeded or were given up, with their attempts, and events left with
# no delivery, this many days after they were created (pending deliveries are never deleted).
WEBHOOK_RETENTION_DAYS = env_int("WEBHOOK_RETENTION_DAYS", 30, minimum=0)
# django-axes' log of log-ins and log-outs (AccessLog; and AccessFailureLog when enabled).
LOGIN_LOG_RETENTION_DAYS = env_int("LOGIN_LOG_RETENTION_DAYS", 90, minimum=0)
# Quotes never ordered, this many days after they expired (an ordered quote stays with its order).
QUOTE_RETENTION_DAYS = env_int("QUOTE_RETENTION_DAYS", 365, minimum=0)
# Monitoring alerts resolved this many days ago (their opening and closing stay in the node's
# history; an open alert is never deleted).
NODE_ALERT_RETENTION_DAYS = env_int("NODE_ALERT_RETENTION_DAYS", 365, minimum=0)
CELERY_BEAT_SCHEDULE |= {
    name: {"task": task, "schedule": float(RETENTION_INTERVAL_S),
           # a run nobody took in time is replaced by the next one
           "options": {"expires": float(RETENTION_INTERVAL_S)}}
    for name, task in {"retention-health-checks": "provisioning.retention_health_checks",
                       "retention-step-logs": "provisioning.retention_step_logs",
                       "retention-node-alerts": "provisioning.retention_node_alerts",
                       "retention-webhooks": "webhooks.retention",
                       "retention-sessions-and-login-logs": "accounts.retention",
                       "retention-quotes": "orders.retention"}.items()
}

# --- Billing (portal.billing; docs/operations.md "Billing") ---
# Usage is billed by started units of this many seconds (3600: by the started hour, as quoted).
BILLING_GRANULARITY_S = env_int("BILLING_GRANULARITY_S", 3600, minimum=60)
# The issuer on invoices (copied onto each at issue) and its gapless number sequence's prefix.
BILLING_ISSUER = {
    "name": env_str("BILLING_ISSUER_NAME", "Trainyard GPU Hosting"),
    # Lines as "\n" in one environment value.
    "address": env_str("BILLING_ISSUER_ADDRESS", r"Example Street 1\n10115 Berlin\nGermany")
    .replace("\\n", "\n"),
    "country": env_str("BILLING_ISSUER_COUNTRY", "DE").upper(),
    "vat_id": env_str("BILLING_ISSUER_VAT_ID", ""),
    "email": env_str("BILLING_ISSUER_EMAIL", "billing@example.com"),
}
BILLING_NUMBER_PREFIX = env_str("BILLING_NUMBER_PREFIX", "TY")
# Tax rate per customer country, COUNTRY=PERCENT,…; a country not listed: 0 (see docs/operations.md).
try:
    from portal.billing.tax import parse_rates  # pure: the same parser the invoices use

    BILLING_TAX_RATES = parse_rates(env_str("BILLING_TAX_RATES", "DE=19"))
except ValueError as exc:
    raise ImproperlyConfigured(f"BILLING_TAX_RATES: {exc}") from None
CELERY_BEAT_SCHEDULE |= {
    # Drafts last month's invoices (idempotent: a second run changes nothing once drafted).
    "billing-close-month": {"task": "billing.close_month", "schedule": 3600.0,
                            "options": {"expires": 3600.0}},
}
CELERY_BEAT_SCHEDULE |= {
    # Spend alerts at 50/80/100 % of an organisation's limit (each sent once per month).
    "billing-spend-check": {"task": "billing.spend_check", "schedule": 600.0,
                            "options": {"expires": 600.0}},
}
CELERY_BEAT_SCHEDULE |= {
    # Orders whose customer-set "terminate at" time has passed are terminated (as a request would).
    "orders-terminate-due": {"task": "provisioning.terminate_due", "schedule": 60.0,
                             "options": {"expires": 60.0}},
}
# --- Monitoring (docs/operations.md "Monitoring") -------------------------------------------
# Prometheus stores the nodes' GPU metrics (dcgm-exporter) and node metrics (node_exporter); the
# portal reads charts from it. Empty: every node's charts are the simulated series (`make run`).
MONITORING_PROMETHEUS_URL = env_str("MONITORING_PROMETHEUS_URL", "")
MONITORING_QUERY_TIMEOUT_S = env_float("MONITORING_QUERY_TIMEOUT_S", 5.0, minimum=0.1)
# The bearer token Prometheus sends for its scrape targets (/monitoring/targets) and for the
# portal's own /metrics. Empty: both refuse every token (staff sessions still read /metrics).
MONITORING_TOKEN = env_secret("MONITORING_TOKEN", "")
# The bearer token Alertmanager's webhook sends to /monitoring/alerts. Empty: alerts are refused.
MONITORING_ALERT_TOKEN = env_secret("MONITORING_ALERT_TOKEN", "")
# Where the exporters listen on each node's management address.
MONITORING_DCGM_EXPORTER_PORT = env_int("MONITORING_DCGM_EXPORTER_PORT", 9400, minimum=1)
MONITORING_NODE_EXPORTER_PORT = env_int("MONITORING_NODE_EXPORTER_PORT", 9100, minimum=1)
# The portal's own metrics at /metrics (portal.core.metrics): request latency by view. Under
# gunicorn and Celery set PROMETHEUS_MULTIPROC_DIR (compose does) so every process is counted.
MIDDLEWARE = ["portal.core.metrics_middleware.RequestMetricsMiddleware", *MIDDLEWARE]
# What the stack installs on each GPU node (provisioning/stack/sh/exporters.sh), each pinned
# (package=version) from NVIDIA's CUDA apt repository: dcgm-exporter and the DCGM release it is
# paired with (NVIDIA/dcgm-exporter hack/VERSION: DCGM 4.5.3 with exporter 4.8.2; the DCGM debs
# carry epoch 1); -4-proprietary gives the profiling fields (tensor-core activity) on Ampere and
# older. Then the distribution's node_exporter. Both run as Trainyard's own systemd units on the
# management address only.
MONITORING_DCGM_PACKAGES = env_list("MONITORING_DCGM_PACKAGES", [
    "datacenter-gpu-manager-4-core=1:4.5.3-1", "datacenter-gpu-manager-4-proprietary=1:4.5.3-1",
    "datacenter-gpu-manager-exporter=4.8.2-1"])
MONITORING_NODE_EXPORTER_PACKAGE = env_str("MONITORING_NODE_EXPORTER_PACKAGE",
                                           "prometheus-node-exporter")
