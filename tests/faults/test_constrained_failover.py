"""A constrained reply survives its decode worker's death: the worker that takes it over
replays the streamed tokens into its grammar matcher, so the reply stays valid JSON of
its schema and, greedy, equals the uninterrupted run (real processes, real SIGKILL)."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from inference.wire import keys
from tests.factories import make_tenant

from .conftest import ensure_workers, workers_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["answer", "steps"], "properties": {
    "answer": {"type": "string", "maxLength": 60},
    "steps": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 40}}}}
FORMAT = {"type": "json_schema", "json_schema": {"name": "howto", "schema": SCHEMA, "strict": True}}


def test_a_migrated_constrained_reply_stays_valid_json_and_equals_the_uninterrupted_run(faults_platform):
    p = faults_platform
    ensure_workers(p, "decode", 2)
    tenant = make_tenant(max_output_tokens=160)
    client = openai.OpenAI(base_url=f"{p.base_url}/v1", api_key=tenant.secret_key.plaintext, max_retries=0,
                           timeout=300)
    # A frequency penalty too: its history (the tokens so far) must survive the move as well.
    args = dict(model=client.models.list().data[0].id, max_tokens=160, temperature=0, response_format=FORMAT,
                frequency_penalty=0.5,
                messages=[{"role": "user", "content": "How do I plant tomatoes? Answer with the steps."}])
    reference = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**args, stream=True)
                        if c.choices)

    raw = client.chat.completions.with_raw_response.create(**args, stream=True)
    request_id = raw.headers["x-request-id"]
    pieces, killed, finish = [], None, None
    for chunk in raw.parse():
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        if killed is None and len(pieces) >= 4:
            owner = p.client.hget(keys.owner(request_id), "worker").decode()
            killed = next(n for n in workers_of(p, "decode") if p.worker_name(n, p.client) == owner)
            p.kill(killed)
    assert killed is not None
    assert int(p.client.hget(keys.owner(request_id), "migrations")) == 1
    text = "".join(pieces)
    assert text == reference and finish == "stop"
    jsonschema.validate(json.loads(text), SCHEMA)
