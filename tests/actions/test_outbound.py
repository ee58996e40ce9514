"""The request an action makes, to a real HTTP server on 127.0.0.1: arguments URL-encoded
into the path (no value adds a segment or changes the host), the rest in the query or
body, the user id signed as docs/actions.md verifies it, the secret header sent; a
private address refused unless the operator allows it; the answer capped in size and
time."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tandem.actions import outbound, services

pytestmark = pytest.mark.django_db

DOC = Path(__file__).resolve().parents[2] / "docs" / "actions.md"
ORDER = {"type": "object", "properties": {"order_id": {"type": "string"}, "note": {"type": "string"}},
         "required": ["order_id"]}


def documented_verifier():
    """verify_tandem_signature, as the doc's Python block defines it."""
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    return namespace["verify_tandem_signature"]


def make_action(endpoint, **fields):
    from tests.factories import make_tenant

    base = {"name": "order_status", "description": "Look up an order.", "parameters": ORDER, "method": "GET",
            "url_template": f"{endpoint.url}/orders/{{order_id}}", "timeout_s": 2,
            "secret_header_name": "Authorization", "secret_header_value": "Bearer sk-shop"}
    return services.action_create(tenant=make_tenant().tenant, by=None, **{**base, **fields})


def test_arguments_are_url_encoded_and_the_user_is_signed(endpoint, allow_loopback):
    saved = make_action(endpoint)
    answer = outbound.call(saved.action, {"order_id": "../admin?x=1#", "note": "soon"}, user_id="u-1",
                           verified=True, call_id="c-1")
    assert answer.ok and json.loads(answer.body)["state"] == "shipped"
    [got] = endpoint.requests
    assert got.method == "GET" and got.path == "/orders/..%2Fadmin%3Fx%3D1%23?note=soon"
    assert got.headers["authorization"] == "Bearer sk-shop"
    assert got.headers["tandem-user"] == "u-1" and got.headers["tandem-user-verified"] == "true"
    verify = documented_verifier()
    assert verify(saved.signing_secret, got.headers["tandem-signature"], "GET", got.path, "u-1", got.body)
    assert not verify(saved.signing_secret, got.headers["tandem-signature"], "GET", got.path, "u-2", got.body)


def test_a_post_sends_the_other_arguments_as_json_and_an_anonymous_visitor_as_no_user(endpoint, allow_loopback):
    saved = make_action(endpoint, method="POST")
    outbound.call(saved.action, {"order_id": "A-17", "note": "gift"}, user_id="ignored", verified=False,
                  call_id="c-2")
    [got] = endpoint.requests
    assert got.path == "/orders/A-17" and json.loads(got.body) == {"note": "gift"}
    assert got.headers["tandem-user"] == "" and got.headers["tandem-user-verified"] == "false"
    assert documented_verifier()(saved.signing_secret, got.headers["tandem-signature"], "POST", got.path, "",
                                 got.body)


def test_a_private_address_is_refused_unless_the_operator_allows_it(endpoint, allow_loopback, settings):
    saved = make_action(endpoint, url_template=endpoint.url.replace("127.0.0.1", "localhost") + "/o/{order_id}")
    answer = outbound.call(saved.action, {"order_id": "1"}, user_id="", verified=False, call_id="c-3")
    assert answer.status is None and "loopback" in answer.error
    assert endpoint.requests == []


def test_the_answer_is_capped_in_size_and_time(endpoint, allow_loopback, settings):
    settings.TANDEM_ACTIONS_MAX_RESPONSE_BYTES = 1000
    endpoint.body = b"x" * 50_000
    saved = make_action(endpoint, timeout_s=0.5)
    answer = outbound.call(saved.action, {"order_id": "1"}, user_id="", verified=False, call_id="c-4")
    assert answer.ok and len(answer.body) == 1000
    endpoint.delay_s = 2.0
    slow = outbound.call(saved.action, {"order_id": "1"}, user_id="", verified=False, call_id="c-5")
    assert slow.status is None and "within 0.5 s" in slow.error and slow.duration_ms < 1500
