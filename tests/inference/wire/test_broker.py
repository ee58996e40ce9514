"""`inference.wire.broker.send` puts on the queue the message `apply_async` would: the
workers cannot tell which sent it."""

from __future__ import annotations

import base64
import json
import uuid

from inference.tasks import decode
from inference.wire import broker
from inference.wire.connections import get_redis

VARYING = {"id", "root_id", "correlation_id", "delivery_tag", "argsrepr", "origin"}


def _pop(queue: str, priority: int) -> dict:
    raw = get_redis().rpop(f"{queue}:{priority}" if priority else queue)
    assert raw is not None, "nothing was published"
    return json.loads(raw)


def _comparable(message: dict) -> dict:
    def strip(d: dict) -> dict:
        return {k: (strip(v) if isinstance(v, dict) else v) for k, v in d.items() if k not in VARYING}

    body = json.loads(base64.b64decode(message["body"]))
    return {"headers": strip(message["headers"]), "properties": strip(message["properties"]), "body": body,
            "content-type": message["content-type"], "content-encoding": message["content-encoding"]}


def test_send_publishes_what_apply_async_publishes():
    queue = f"decode.publish-test-{uuid.uuid4().hex[:8]}"
    args = ["a-request-id", {"first_token": 42, "prefill_worker": "prefill.shared@host", "ttft_ms": 12.5,
                             "prefill_engine_ms": 10.0, "cached_tokens": 0}]
    decode.apply_async(args=args, queue=queue, priority=3)
    by_celery = _pop(queue, 3)
    task_id = broker.send(broker.DECODE, args, queue=queue, priority=3)
    by_send = _pop(queue, 3)
    assert by_send["headers"]["id"] == task_id and by_send["headers"]["task"] == "tandem.decode"
    assert _comparable(by_send) == _comparable(by_celery)
    assert json.loads(base64.b64decode(by_send["body"]))[0] == args
