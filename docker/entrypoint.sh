#!/usr/bin/env bash
# Tandem's container entrypoint: one image, one subcommand per tier (docs/deploy.md).
#
#   web                 migrate, then daphne on 0.0.0.0:8000 (websocket + REST + admin)
#   cpu-worker          Celery on queue `cpu` (validate, build prompt, tokenize)
#   prefill-worker      Celery on queue `prefill.$TANDEM_POOL` (loads the model at start)
#   decode-worker       Celery on queue `decode.$TANDEM_POOL`
#   colocated-worker    Celery on queue `colocated.$TANDEM_POOL` (prefill + decode in one)
#   prepare-model       make sure the default model is in $TANDEM_MODEL (idempotent)
#   migrate             manage.py migrate (a one-shot before web and the workers)
#   seed                manage.py seed_demo (default pools, demo tenant, admin user)
#   manage ARGS...      manage.py ARGS...
#   healthcheck TIER    web, cpu-worker, prefill-worker, decode-worker, colocated-worker
#   anything else       run as a command (e.g. `bash`)
#
# Model workers use Celery's threads pool: the engine is loaded once in the worker's main
# process and nothing forks after CUDA is initialised. TANDEM_ENTRYPOINT_DRY_RUN=1 prints
# each command instead of running it (tests/test_deploy_files.py uses it).
set -euo pipefail

POOL="${TANDEM_POOL:-shared}"
PREPARE_LOCK_TIMEOUT_S="${TANDEM_PREPARE_LOCK_TIMEOUT_S:-1800}"

log() { echo "[entrypoint] $*" >&2; }

dry_run() { [ "${TANDEM_ENTRYPOINT_DRY_RUN:-0}" = "1" ]; }

# Run a step and come back.
run() {
    if dry_run; then echo "$*"; return 0; fi
    "$@"
}

# Become the given command, so that the container's stop signal reaches it directly
# (SIGTERM: Celery's warm shutdown, daphne's graceful close).
become() {
    if dry_run; then echo "exec $*"; exit 0; fi
    exec "$@"
}

# The default model (SmolLM2-135M-Instruct) is converted once into $TANDEM_MODEL, on
# the shared `models` volume. Skipped when TANDEM_PREPARE_MODEL=0, when TANDEM_MODEL is
# not a path (a Hugging Face id in the local cache), or when it holds a model that
# prepare did not write (config.json without prepare's marker: the operator's own
# weights). A file lock makes replicas that start together prepare it only once.
ensure_model() {
    local model="${TANDEM_MODEL:-}"
    if [ "${TANDEM_PREPARE_MODEL:-1}" = "0" ] || [ -z "$model" ] || [ "${model#/}" = "$model" ]; then
        return 0
    fi
    if [ -f "$model/config.json" ] && [ ! -f "$model/tandem-prepared.json" ]; then
        log "$model holds a model prepare did not write; using it as is"
        return 0
    fi
    run python - "$model" "$PREPARE_LOCK_TIMEOUT_S" <<'PY'
import fcntl
import sys
import time
from pathlib import Path

from inference.engine.prepare import is_prepared, prepare_model

out, timeout = Path(sys.argv[1]), float(sys.argv[2])
if not is_prepared(out):
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / ".prepare.lock", "w") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    sys.exit(f"timed out waiting for another process to prepare {out}")
                time.sleep(2)
        if not is_prepared(out):  # the holder before us may have finished it
            prepare_model(out)
            # prepare writes through mkdtemp (mode 0700): let any uid that mounts the volume
            # read the weights, not only the one that prepared them.
            for path in (out, *out.rglob("*")):
                path.chmod(0o755 if path.is_dir() else 0o644)
PY
}

# A worker tier. Its node name carries role and pool; %h is the container's hostname,
# distinct for every replica of a scaled service.
worker() {
    local role="$1" slots="$2"
    if [ -n "${TANDEM_ROLE:-}" ] && [ "$TANDEM_ROLE" != "$role" ]; then
        log "TANDEM_ROLE=$TANDEM_ROLE contradicts the subcommand $role-worker"
        exit 64
    fi
    export TANDEM_ROLE="$role" TANDEM_POOL="$POOL"
    ensure_model  # the CPU tier needs the tokenizer, the model tiers the weights
    # The Celery command line (queue, pool, node name) is built in one place, the one
    # `make run` uses too: inference/worker/commandline.py.
    become python -m inference.worker "$role" "$slots"
}

healthcheck() {
    local tier="${1:-web}"
    case "$tier" in
        web)
            # /healthz: daphne and Django answer. It is served before host validation and
            # the SSL redirect (tandem/ops.py), so a probe by address over plain HTTP works.
            # (/readyz says whether the platform can serve: for the load balancer.)
            python - <<'PY'
import http.client
import sys

conn = http.client.HTTPConnection("127.0.0.1", 8000, timeout=5)
conn.request("GET", "/healthz")
status = conn.getresponse().status
sys.exit(0 if status == 200 else f"web answered {status}")
PY
            ;;
        cpu-worker|prefill-worker|decode-worker|colocated-worker)
            # Every worker serves /healthz on TANDEM_METRICS_PORT: 200 while its heartbeat
            # reaches Redis (every second) and, for a model worker, its engine's threads
            # run; it beats only once its engine is loaded (inference/worker/process.py).
            python - "${TANDEM_METRICS_PORT:-9100}" <<'PY'
import http.client
import sys

conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=5)
conn.request("GET", "/healthz")
response = conn.getresponse()
sys.exit(0 if response.status == 200 else f"worker answered {response.status}: {response.read()[:300]!r}")
PY
            ;;
        webhooks-worker|actions-worker)
            # Celery answers a ping to the worker's node name (queue.py: <queue>@<host>).
            python -m celery -A tandem inspect ping -d "${tier%-worker}@$(hostname)" --timeout 10 >/dev/null
            ;;
        *)
            log "healthcheck: expected web, cpu-worker, prefill-worker, decode-worker, colocated-worker, webhooks-worker or actions-worker, not $tier"
            exit 64
            ;;
    esac
}

cmd="${1:-web}"
if [ "$#" -gt 0 ]; then shift; fi

case "$cmd" in
    web)
        if [ "${TANDEM_MIGRATE_ON_START:-1}" = "1" ]; then
            run python manage.py migrate --noinput
        fi
        ensure_model  # quota admission counts prompt tokens with the model's tokenizer
        # As devstack/processes.py:daphne_argv starts it: a listen backlog a burst of
        # visitors fits in, and the keepalive ping's interval.
        become python -m tandem.webserver --websocket_connect_timeout 30 \
            --ping-interval "${TANDEM_WS_PING_INTERVAL_S:-45}" \
            -e "tcp:port=8000:interface=0.0.0.0:backlog=4096" --proxy-headers tandem.asgi:application
        ;;
    cpu-worker)
        worker cpu "${TANDEM_WORKER_CONCURRENCY:-1}"
        ;;
    prefill-worker)
        worker prefill "${TANDEM_WORKER_CONCURRENCY:-${TANDEM_PREFILL_MAX_BATCH:-8}}"
        ;;
    decode-worker)
        worker decode "${TANDEM_WORKER_CONCURRENCY:-${TANDEM_MAX_BATCH:-64}}"
        ;;
    colocated-worker)
        worker colocated "${TANDEM_WORKER_CONCURRENCY:-${TANDEM_MAX_BATCH:-64}}"
        ;;
    webhooks-worker|actions-worker)
        # The CPU tier's outbound queues (webhook deliveries, tenant actions), Celery
        # threads on a queue each: python -m tandem.webhooks / tandem.actions.
        export TANDEM_ROLE=cpu
        become python -m "tandem.${cmd%-worker}"
        ;;
    prepare-model)
        TANDEM_PREPARE_MODEL=1 ensure_model
        ;;
    migrate)
        become python manage.py migrate --noinput "$@"
        ;;
    seed)
        if [ "${TANDEM_ENV:-}" = "production" ] \
            && { [ -z "${TANDEM_ADMIN_PASSWORD:-}" ] || [ "$TANDEM_ADMIN_PASSWORD" = "tandem-admin" ]; }; then
            log "seed: set TANDEM_ADMIN_PASSWORD (not the development default) in production"
            exit 64
        fi
        become python manage.py seed_demo "$@"
        ;;
    manage)
        become python manage.py "$@"
        ;;
    healthcheck)
        healthcheck "$@"
        ;;
    *)
        become "$cmd" "$@"
        ;;
esac
