"""Where this process reports how replies go: the sink the web tier registers
(`contracts.ReplySink`; tandem.chat's AppConfig.ready, in every process that sets up
Django). Kept apart from `outcomes` so that registering imports nothing else."""

from __future__ import annotations

from .contracts import ReplySink

_sink: ReplySink | None = None


def register(sink: ReplySink) -> None:
    """One sink per process; a second registration replaces the first."""
    global _sink
    _sink = sink


def current() -> ReplySink:
    if _sink is None:
        raise RuntimeError("No reply sink is registered in this process: the web tier registers one when "
                           "Django sets up (tandem.chat in INSTALLED_APPS, then django.setup()).")
    return _sink
