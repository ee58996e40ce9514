"""`python -m inference.worker ROLE SLOTS [--print]`: become the Celery worker of a tier
(the container entrypoint's worker subcommands). `--print` shows the command instead."""

from __future__ import annotations

import os
import sys

from .commandline import worker_argv


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] not in ("cpu", "prefill", "decode", "colocated") or not argv[1].isdigit():
        sys.exit("usage: python -m inference.worker cpu|prefill|decode|colocated SLOTS [--print]")
    role, slots = argv[0], int(argv[1])
    command = worker_argv(role, os.environ.get("TANDEM_POOL", "shared"), concurrency=slots)
    if "--print" in argv[2:]:
        print(" ".join(command))
        return
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
