"""The seam between the web tier and the pipeline: the pipeline reports replies'
outcomes to the sink the web tier registers in every process that sets up Django, and a
request the web tier cannot store is released and dropped by the one submit sequence
that visitors' messages and agents' drafts share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from inference.pipeline import api
from inference.wire import keys
from tandem.chat import services
from tandem.chat.models import Conversation, Message
from tests.factories import make_tenant

ROOT = Path(__file__).resolve().parents[3]


def test_every_process_that_sets_up_django_reports_replies_to_the_web_tiers_sink():
    # Workers are Celery processes whose Django fixup runs django.setup(); daphne and
    # management commands set up Django too. None of them imports tandem for it.
    script = ("import django; django.setup()\n"
              "from inference.pipeline import sink\n"
              "print(type(sink.current()).__module__, type(sink.current()).__name__)")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tandem.settings"}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["tandem.chat.reply_sink", "ReplyRows"]


@pytest.mark.django_db(transaction=True)
def test_a_request_whose_rows_fail_to_store_frees_its_admission_and_is_dropped():
    tenant = make_tenant(max_concurrent_streams=1).tenant
    conversation = Conversation.objects.create(tenant=tenant, channel="widget")

    def admitted(history: list[dict]) -> tuple[api.RequestSpec, object]:
        route = api.route_for_tenant(tenant)
        spec = services.request_spec(
            tenant=tenant, route=route, request_id=uuid.uuid4(), conversation_id=conversation.pk, channel="widget",
            api_key_id=None, sampling=None, prompt_messages=history,
            handover={"handover_patterns": api.HANDOVER_OFF})
        return spec, services.request_admit(spec=spec, tenant=tenant, history=[], new=["Hello"])

    spec, admission = admitted([{"role": "user", "content": "Hello"}])
    assert admission.allowed

    def rows_that_fail():
        Message.objects.create(id=spec.request_id, conversation=conversation, role=Message.Role.ASSISTANT,
                               status=Message.Status.QUEUED)
        raise RuntimeError("the database went away mid-write")

    with pytest.raises(RuntimeError, match="went away"):
        services.request_submit(spec=spec, admission=admission, write_rows=rows_that_fail)

    # Rolled back, and reported so: the CPU tier's report will drop it.
    assert not Message.objects.filter(pk=spec.request_id).exists()
    # (The request was enqueued before the rows were written: a CPU worker running in the same
    # session may report its side before or after the web tier, which is what completes the
    # pair and drops it either way. Only the web tier's report is this test's to check.)
    reports = [json.loads(r) for r in api.get_redis().lrange(keys.rendezvous(spec.request_id), 0, -1)]
    assert [r for r in reports if r["party"] == "web"] == [{"party": "web", "committed": False}]
    assert {r["party"] for r in reports} <= {"web", "cpu"}
    # Its stream slot is free again: the tenant's one concurrent stream admits the next.
    _, again = admitted([{"role": "user", "content": "Hello again"}])
    assert again.allowed, again.reason


@pytest.mark.django_db(transaction=True)
def test_a_refused_admission_stores_and_enqueues_nothing():
    tenant = make_tenant(max_concurrent_streams=1).tenant
    conversation = Conversation.objects.create(tenant=tenant, channel="widget")
    route = api.route_for_tenant(tenant)
    specs = [services.request_spec(
        tenant=tenant, route=route, request_id=uuid.uuid4(), conversation_id=conversation.pk, channel="widget",
        api_key_id=None, sampling=None, prompt_messages=[{"role": "user", "content": "Hi"}],
        handover={"handover_patterns": api.HANDOVER_OFF}) for _ in range(2)]
    first = services.request_admit(spec=specs[0], tenant=tenant, history=[], new=["Hi"])
    second = services.request_admit(spec=specs[1], tenant=tenant, history=[], new=["Hi"])
    assert first.allowed and not second.allowed

    with pytest.raises(services.QuotaRefused) as refused:
        services.request_submit(spec=specs[1], admission=second, write_rows=lambda: pytest.fail("rows written"))
    assert refused.value.code == "rate_limited"
    assert not api.get_redis().exists(keys.rendezvous(specs[1].request_id))
