"""Handing a request from the CPU tier to the model tiers: a meeting of two parties.

The web tier enqueues a request on the CPU tier before it writes the message rows
(`services.request_enqueue`), so two things happen side by side: the web tier commits
(or rolls back) the rows, and the CPU tier builds the prompt (or finds the request
invalid). The request may go on only once both are done, since no tier may look for a
row that is not yet visible. Each party reports its outcome by appending it to
`tandem:handoff:<id>`, in one Redis transaction with the state that goes with it; the
party whose report completes the pair acts on both: it sends the request to its prefill
(or colocated) queue, fails it, or drops it. Nobody waits for the other, so a CPU worker
that runs one task at a time goes on to the next request at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import redis

from . import keys

KEY_TTL_S = 600
WEB, CPU = "web", "cpu"


def web_report(committed: bool) -> dict:
    return {"party": WEB, "committed": committed}


def cpu_ready(*, task: str, queue: str, priority: int) -> dict:
    """The prompt is built and stored in the spec; `task` ("prefill" or "colocated") goes
    on `queue` at broker `priority`."""
    return {"party": CPU, "task": task, "queue": queue, "priority": priority}


def cpu_failed(code: str, message: str) -> dict:
    return {"party": CPU, "failed": [code, message]}


def report(client: redis.Redis, request_id: str, outcome: dict,
           with_state: Callable[[redis.client.Pipeline], None] | None = None) -> None:
    """Append this party's `outcome` (and write `with_state`'s commands in the same
    transaction); if that completes the pair, act on both outcomes."""
    key = keys.handoff(request_id)
    pipe = client.pipeline(transaction=True)
    if with_state is not None:
        with_state(pipe)
    pipe.rpush(key, json.dumps(outcome))
    pipe.lrange(key, 0, -1)
    pipe.expire(key, KEY_TTL_S)
    *_, length, entries, _ = pipe.execute()
    reports = [json.loads(e) for e in entries]
    before = {r["party"] for r in reports[: length - 1]}
    if before != {WEB, CPU} and {r["party"] for r in reports} == {WEB, CPU}:
        _act(request_id, reports)  # this report completed the pair (a repeat never does)


def _act(request_id: str, reports: list[dict]) -> None:
    web = next(r for r in reports if r["party"] == WEB)
    cpu = next(r for r in reports if r["party"] == CPU)
    if not web["committed"]:
        return  # rolled back: no rows, nobody waiting; the spec and stream expire
    if "failed" in cpu:
        from . import services

        code, message = cpu["failed"]
        services.request_fail(request_id=request_id, code=code, message=message)
        return
    from . import publish, tasks

    publish.send(getattr(tasks, cpu["task"]), [request_id], queue=cpu["queue"], priority=cpu["priority"])
