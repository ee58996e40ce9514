"""Worker start-up. A model worker is started with a role and a pool, e.g.

    TANDEM_ROLE=decode TANDEM_POOL=shared celery -A tandem worker -Q decode.shared -P threads -c 64

and loads its engine once, when the worker starts (Celery's `worker_init` signal), in the
worker's main process: with the threads pool no process is forked after the model (and
CUDA) is initialised. CPU workers load only the tokenizer."""

from __future__ import annotations

import logging
import os
import sys

from celery.signals import worker_init, worker_shutdown


@worker_init.connect
def _load_engine(**_):
    role = os.environ.get("TANDEM_ROLE", "cpu")
    if role == "cpu":
        # Load the tokenizer now, not on the first request (which would pay seconds).
        from .tokens import get_tokenizer

        get_tokenizer()
        return
    from .runtime import start_runtime
    from .worker_config import worker_config_from_env

    try:
        start_runtime(worker_config_from_env())
    except Exception:
        # Celery logs and swallows signal-handler errors, and would then consume tasks
        # with no engine behind them. A model worker that cannot load its model exits.
        logging.getLogger(__name__).exception("the %s worker could not start its engine; exiting", role)
        logging.shutdown()
        os._exit(70)


@worker_shutdown.connect
def _stop_engine(**_):
    from . import runtime

    if runtime._runtime is not None:
        runtime._runtime.stop()


def worker_argv(role: str, pool: str, *, concurrency: int) -> list[str]:
    """The Celery command line of a worker (docker/entrypoint.sh builds the same one).

    Concurrency 1 runs tasks in the worker's main thread (`-P solo`): no hand-off to a
    pool thread, about 1 ms less per task on the benchmark machine. That is how the CPU
    tier runs (its work holds the GIL; it scales by processes). Model workers need a
    thread per task: their tasks wait on the engine, which batches them."""
    queue = "cpu" if role == "cpu" else f"{role}.{pool}"
    pool_args = ["-P", "solo"] if concurrency == 1 else ["-P", "threads", "-c", str(concurrency)]
    return [sys.executable, "-m", "celery", "-A", "tandem", "worker", "-Q", queue, *pool_args,
            "-n", f"{role}.{pool}@%h", "--without-gossip", "--without-mingle", "-l", "INFO"]


def devstack_workers(cores: list[int]) -> list[tuple[str, list[str], dict[str, str]]]:
    """The workers `make run` starts: CPU, one prefill and one decode worker on the
    shared pools, each model worker pinned to its own core when there are two or more."""
    prefill_cores = cores[:1] if len(cores) >= 2 else cores
    decode_cores = cores[1:] if len(cores) >= 2 else cores
    def env(role, cpus):
        return {"TANDEM_ROLE": role, "TANDEM_POOL": "shared", "TANDEM_CPU_AFFINITY": ",".join(map(str, cpus)),
                "TANDEM_THREADS": str(len(cpus))}
    return [
        ("cpu-worker", worker_argv("cpu", "shared", concurrency=1), {"TANDEM_ROLE": "cpu"}),
        ("prefill-worker", worker_argv("prefill", "shared", concurrency=8), env("prefill", prefill_cores)),
        ("decode-worker", worker_argv("decode", "shared", concurrency=64), env("decode", decode_cores)),
    ]
