"""Actions of the live tests (tests/actions/test_live.py, test_rest*.py): an action whose
URL is the test's endpoint on 127.0.0.1, and the tenant whose refund waits for an
agent's approval, with that agent signed in."""

from __future__ import annotations

from tandem.actions import services
from tests.factories import make_tenant
from tests.platform_fixtures import signed_in_agent

ORDER = {"type": "object", "properties": {"order_id": {"type": "string", "maxLength": 8}},
         "required": ["order_id"], "additionalProperties": False}


def action(tenant, endpoint, **fields):
    base = {"name": "order_status", "description": "Look up an order's delivery state by its id.",
            "status_text": "Looking up your order…", "parameters": ORDER, "method": "GET",
            "url_template": f"{endpoint.url}/orders/{{order_id}}", "timeout_s": 3, "trigger_phrases": "my order"}
    return services.action_create(tenant=tenant, by=None, **{**base, **fields}).action


def refund_awaiting_approval(endpoint, client):
    """A tenant whose `refund_order` (forced by "refund") needs an agent's approval, and
    Grace, its agent, signed in on `client` (the console's test client)."""
    created = make_tenant(max_output_tokens=48)
    action(created.tenant, endpoint, name="refund_order", description="Refund an order by its id.",
           status_text="Refunding your order…", trigger_phrases="refund", who="anyone", needs_approval=True)
    signed_in_agent(client, created.tenant, "Grace")
    return created
