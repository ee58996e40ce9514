"""Worker start-up. A model worker is started with a role and a pool, e.g.

    TANDEM_ROLE=decode TANDEM_POOL=shared celery -A tandem worker -Q decode.shared -P threads -c 64

and loads its engine once, when the worker starts (Celery's `worker_init` signal), in the
worker's main process: with the threads pool no process is forked after the model (and
CUDA) is initialised. CPU workers load only the tokenizer. Every worker, CPU tier
included, beats and serves its metrics (worker.process); `inference.tasks` starts its
watcher once the worker is ready (the watcher is a pipeline module, above this layer).

Every process that loads the Celery app imports this module (the web tier too, to send
tasks), so the handlers import the runtime when they run: only a worker loads torch."""

from __future__ import annotations

import logging
import os
import threading

from celery.signals import task_prerun, worker_init, worker_shutdown


@worker_init.connect
def _load_engine(sender=None, **_):
    role = os.environ.get("TANDEM_ROLE", "cpu")
    if role == "cpu":
        # Load the tokenizer now, not on the first request (which would pay seconds).
        from ..text.tokenizer import get_tokenizer
        from .process import start_process

        get_tokenizer()
        if _consumes(sender, "cpu"):
            # The question encoder too (knowledge retrieval), beside the worker's start
            # rather than on the first question; the webhooks and actions workers
            # (also the CPU role, other queues) never embed.
            from knowledge import embedding

            threading.Thread(target=embedding.warm, name="knowledge-warm", daemon=True).start()
        start_process("cpu", os.environ.get("TANDEM_POOL", "shared"))
        return
    from .config import worker_config_from_env
    from .runtime import start_runtime

    try:
        start_runtime(worker_config_from_env())
    except Exception:
        # Celery logs and swallows signal-handler errors, and would then consume tasks
        # with no engine behind them. A model worker that cannot load its model exits.
        logging.getLogger(__name__).exception("the %s worker could not start its engine; exiting", role)
        logging.shutdown()
        os._exit(70)


def _consumes(worker, queue: str) -> bool:
    try:
        return queue in worker.app.amqp.queues.consume_from
    except AttributeError:
        return False


@task_prerun.connect
def _check_connection(**_):
    """The CPU tier keeps its database connection between tasks (settings:
    CELERY_DB_REUSE_MAX); before each, as before a web request, one past CONN_MAX_AGE or
    broken is closed (the task then opens a new one)."""
    if os.environ.get("TANDEM_ROLE", "cpu") == "cpu":
        from django.db import close_old_connections

        close_old_connections()


@worker_shutdown.connect
def _stop_engine(**_):
    from .process import current
    from .runtime import stop_runtime

    stop_runtime()
    proc = current()
    if proc is not None:
        proc.stop()
