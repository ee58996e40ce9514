"""Quotas hold across web processes and under bursts, over the REST API."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from devstack.processes import extra_web, wait_for
from tenants.models import UsageRecord
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def body(model: str, text: str = "Hi", max_tokens: int = 1, **extra) -> dict:
    return {"model": model, "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "user", "content": text}], **extra}


def model_id(platform, key) -> str:
    return httpx.get(f"{platform.base_url}/v1/models", headers={"Authorization": f"Bearer {key}"}).json()["data"][0]["id"]


async def burst(urls: list[str], key: str, payloads: list[dict]) -> list[httpx.Response]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(timeout=180) as client:
        return await asyncio.gather(*[
            client.post(f"{urls[i % len(urls)]}/v1/chat/completions", json=p, headers=headers)
            for i, p in enumerate(payloads)])


def test_100_concurrent_requests_over_two_web_processes_admit_exactly_the_rpm(platform):
    tenant = make_tenant(requests_per_minute=10, max_concurrent_streams=200, max_output_tokens=4)
    key = tenant.secret_key.plaintext
    model = model_id(platform, key)
    with extra_web(platform) as second:
        responses = asyncio.run(burst([platform.base_url, second], key, [body(model)] * 100))
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 10, statuses
    assert statuses.count(429) == 90
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert int(refused.headers["retry-after"]) >= 1
    assert UsageRecord.objects.filter(tenant=tenant.tenant).count() == 10


def test_the_concurrent_stream_limit_holds_under_a_burst_and_frees_when_streams_end(platform):
    tenant = make_tenant(max_concurrent_streams=2, max_output_tokens=24)
    key = tenant.secret_key.plaintext
    model = model_id(platform, key)
    responses = asyncio.run(burst([platform.base_url], key, [body(model, "Tell me a story.", 24)] * 8))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200, 200] + [429] * 6, statuses
    # both admitted requests have ended, so their slots are back
    again = httpx.post(f"{platform.base_url}/v1/chat/completions", json=body(model), timeout=120,
                       headers={"Authorization": f"Bearer {key}"})
    assert again.status_code == 200, again.text


def test_token_reservations_never_let_counted_usage_pass_the_tokens_per_minute(platform):
    limit = 700
    tenant = make_tenant(tokens_per_minute=limit, max_concurrent_streams=100, max_output_tokens=60)
    key = tenant.secret_key.plaintext
    model = model_id(platform, key)
    responses = asyncio.run(burst([platform.base_url], key, [body(model, "Describe your refund policy.", 60)] * 20))
    admitted = [r for r in responses if r.status_code == 200]
    assert 1 <= len(admitted) < 20
    assert all(r.status_code in (200, 429) for r in responses)
    wait_for(lambda: UsageRecord.objects.filter(tenant=tenant.tenant).count() == len(admitted),
             timeout=60, what="usage records")
    counted = sum(u.prompt_tokens + u.completion_tokens for u in UsageRecord.objects.filter(tenant=tenant.tenant))
    assert counted <= limit
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.headers["x-ratelimit-limit-tokens"] == str(limit)
