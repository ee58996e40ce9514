"""A worker's command line: the Celery invocation of each tier, used by `make run`, by
`python -m inference.worker` (the container entrypoint) and by the tests, so that there
is one of it."""

from __future__ import annotations

import os
import sys

from ..wire import broker


def worker_argv(role: str, pool: str, *, concurrency: int) -> list[str]:
    """The Celery command line of a worker (`python -m inference.worker`, which
    docker/entrypoint.sh runs, execs it).

    Concurrency 1 runs tasks in the worker's main thread (`-P solo`): no hand-off to a
    pool thread on the way to the first token. That is how the CPU
    tier runs (its work holds the GIL; it scales by processes). Model workers need a
    thread per task: their tasks wait on the engine, which batches them."""
    queue = broker.queue_name(role, pool)
    pool_args = ["-P", "solo"] if concurrency == 1 else ["-P", "threads", "-c", str(concurrency)]
    return [sys.executable, "-m", "celery", "-A", "tandem", "worker", "-Q", queue, *pool_args,
            "-n", f"{role}.{pool}@%h", "--without-gossip", "--without-mingle", "-l", os.environ.get("LOG_LEVEL", "INFO")]


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
