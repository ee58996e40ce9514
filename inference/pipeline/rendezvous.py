"""The rendezvous of the web tier's commit and the CPU tier's prompt, where a request
goes on from the CPU tier to the model tiers: a meeting of two parties. (Not the human
hand-off, which is tandem.handoff's.)

The web tier enqueues a request on the CPU tier before it writes the message rows
(`submit.request_enqueue`), so two things happen side by side: the web tier commits
(or rolls back) the rows, and the CPU tier builds the prompt (or finds the request
invalid). The request may go on only once both are done, since no tier may look for a
row that is not yet visible. Each party reports its outcome by appending it to
`tandem:rendezvous:<id>`, in one Redis transaction with the state that goes with it; the
party whose report completes the pair acts on both: it sends the request to its prefill
(or colocated) queue, fails it, or drops it. Nobody waits for the other, so a CPU worker
that runs one task at a time goes on to the next request at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import redis

from ..wire import broker, keys, worker_ownership
from . import outcomes
from .contracts import HANDOVER, HANDOVER_UNGROUNDED

KEY_TTL_S = 600
WEB, CPU = "web", "cpu"
SENT, FAILED, DROPPED = "sent", "failed", "dropped"
PAIR = {WEB, CPU}
SENT_MARK = "sent"  # recorded after the send, so a redelivered CPU task can tell


def web_report(committed: bool) -> dict:
    return {"party": WEB, "committed": committed}


def cpu_ready(*, task: str, queue: str, priority: int) -> dict:
    """The prompt is built and stored in the spec; the task named `task` (broker.PREFILL
    or broker.COLOCATED) goes on `queue` at broker `priority`."""
    return {"party": CPU, "task": task, "queue": queue, "priority": priority}


def cpu_failed(code: str, message: str) -> dict:
    return {"party": CPU, "failed": [code, message]}


def report(client: redis.Redis, request_id: str, outcome: dict,
           with_state: Callable[[redis.client.Pipeline], None] | None = None) -> str | None:
    """Append this party's `outcome` (and write `with_state`'s commands in the same
    transaction); if that completes the pair, act on both outcomes. Returns what this
    call did: SENT, FAILED, DROPPED, or None when the pair is not complete (or was
    already)."""
    key = keys.rendezvous(request_id)
    pipe = client.pipeline(transaction=True)
    if with_state is not None:
        with_state(pipe)
    if outcome.get("party") == CPU and "task" in outcome:
        # Whoever completes the pair sends it: the record that it is sent goes first.
        tier = "colocated" if outcome["task"] == broker.COLOCATED else "prefill"
        worker_ownership.mark_sent(pipe, worker_ownership.Stage(
            request_id=request_id, stage=tier, epoch=0, task=outcome["task"], args=[request_id],
            queue=outcome["queue"], pool=outcome["queue"].split(".", 1)[1]))
    pipe.rpush(key, json.dumps(outcome))
    pipe.lrange(key, 0, -1)
    pipe.expire(key, KEY_TTL_S)
    *_, length, entries, _ = pipe.execute()
    reports = [json.loads(e) for e in entries]
    before = {r["party"] for r in reports[: length - 1]}
    if not PAIR <= before and PAIR <= {r["party"] for r in reports}:
        return _act(client, request_id, reports)  # this report completed the pair (a repeat never does)
    return None


def send_if_lost(client: redis.Redis, request_id: str) -> bool:
    """For a redelivered CPU task that finds its prompt already stored: when the pair is
    complete and the request was to go on but no send was recorded (the worker that
    completed the pair died between its report and the send), send it now. True if it
    did. (A worker that died after the send but before recording it makes this send a
    second time; readers skip repeated token indices and a reply is finished once.)"""
    reports = [json.loads(e) for e in client.lrange(keys.rendezvous(request_id), 0, -1)]
    parties = {r["party"] for r in reports}
    if not PAIR <= parties or SENT_MARK in parties:
        return False
    web, cpu = _outcomes(reports)
    if not web["committed"] or "failed" in cpu:
        return False
    return _act(client, request_id, reports) == SENT


def _outcomes(reports: list[dict]) -> tuple[dict, dict]:
    """The web tier's and the CPU tier's reports (the first of each, should one repeat)."""
    return (next(r for r in reports if r["party"] == WEB), next(r for r in reports if r["party"] == CPU))


def _act(client: redis.Redis, request_id: str, reports: list[dict]) -> str:
    web, cpu = _outcomes(reports)
    if not web["committed"]:
        # Rolled back: no rows and nobody waiting (the web tier answered with an error).
        # Nothing reads the request's keys again (the hand-off record stays until it
        # expires, so a repeated report still finds the pair complete).
        client.delete(keys.request(request_id), keys.stream(request_id), keys.listener(request_id))
        return DROPPED
    if "failed" in cpu:
        code, message = cpu["failed"]
        if code in (HANDOVER, HANDOVER_UNGROUNDED):  # a person answers: `message` is the reply
            outcomes.request_handover(request_id=request_id, text=message,
                                      reason="words" if code == HANDOVER else "ungrounded")
        else:
            outcomes.request_fail(request_id=request_id, code=code, message=message)
        return FAILED
    broker.send(cpu["task"], [request_id], queue=cpu["queue"], priority=cpu["priority"])
    client.rpush(keys.rendezvous(request_id), json.dumps({"party": SENT_MARK}))  # see send_if_lost
    return SENT
