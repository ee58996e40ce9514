"""Drafts of the assistant's settings, without a model: a draft starts from the live
settings, a request made with it carries its prompt, retrieval and sampling in its spec
(read on the server, the live settings untouched), publishing is one audited change by
a person, and another tenant's draft is not found. Also: an evaluation conversation's
hand-over stays on the reply (nobody is called) and its reply is no webhook event; a
step of a run acts once; one run at a time per tenant; a reply cancelled from outside
stops its run; a run (or a polled trial reply) renews its replies' listener lease."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.utils import timezone

from inference.pipeline import api as pipeline
from knowledge import services as knowledge_services
from knowledge.selectors import settings_for
from tandem.chat import services as chat
from tandem.chat.models import Conversation, Message
from tandem.chat.reply_sink import ReplyRows
from tandem.evals import drafts, services
from tandem.evals.assistant_settings import draft_settings, live_settings
from tandem.evals.models import AssistantDraft, EvalCase, EvalRun
from tandem.repetition.selectors import penalties_for
from tenants.access import NotFound
from tenants.audit import Actor
from tenants.models import AuditLog
from tests.console.conftest import user
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


def live_spec(tenant):
    tenant.refresh_from_db()
    route = pipeline.route_for_tenant(tenant)
    return chat.request_spec(tenant=tenant, route=route, request_id=uuid.uuid4(), conversation_id=uuid.uuid4(),
                             channel="api", api_key_id=None, sampling=None,
                             prompt_messages=[{"role": "user", "content": "Hi"}],
                             handover={"handover_patterns": pipeline.HANDOVER_OFF})


def test_a_draft_starts_from_the_live_settings_and_changes_only_what_it_is_given():
    tenant = make_tenant(max_output_tokens=64).tenant
    knowledge_services.settings_update(tenant=tenant, top_k=4, min_score=0.2)
    draft = drafts.draft_save(tenant=tenant, min_score=0.35)
    assert (draft.system_prompt, draft.top_k, draft.min_score, draft.temperature) == (
        tenant.system_prompt, 4, 0.35, None)
    assert drafts.draft_changes(draft) == {"min_score": [0.2, 0.35]}
    again = drafts.draft_save(tenant=tenant, system_prompt="Be brief.")
    assert again.pk == draft.pk and again.min_score == 0.35  # one draft per tenant, kept
    with pytest.raises(drafts.DraftError) as refused:
        drafts.draft_save(tenant=tenant, max_tokens=65)
    assert refused.value.field == "max_tokens"
    with pytest.raises(drafts.DraftError) as refused:
        drafts.draft_save(tenant=tenant, min_score=1.5)
    assert refused.value.field == "min_score"


def test_a_request_with_the_draft_carries_its_settings_and_the_live_ones_stay():
    tenant = make_tenant(max_output_tokens=64).tenant
    knowledge_services.settings_update(tenant=tenant, top_k=3)
    draft = drafts.draft_save(tenant=tenant, system_prompt="Answer in French.", top_k=5, min_score=0.25, mode="bm25",
                              temperature=0.6, frequency_penalty=0.0, max_tokens=20)
    spec = draft_settings(draft).apply(live_spec(tenant), tenant=tenant)
    assert spec.system_prompt == "Answer in French."
    assert spec.retrieval == {"k": 5, "min_score": 0.25, "language": "english", "mode": "bm25"}
    assert (spec.sampling.temperature, spec.sampling.frequency_penalty, spec.sampling.max_tokens) == (0.6, 0.0, 20)
    live = live_settings(tenant).apply(live_spec(tenant), tenant=tenant)
    assert live.system_prompt == tenant.system_prompt and live.retrieval["k"] == 3
    assert (live.sampling.temperature, live.sampling.max_tokens) == (0.0, 64)
    drafts.draft_save(tenant=tenant, knowledge_enabled=False)
    assert draft_settings(drafts.draft_get(tenant=tenant)).apply(live_spec(tenant), tenant=tenant).retrieval == {}


def test_publishing_makes_the_draft_live_in_one_audited_change_by_a_person():
    tenant = make_tenant().tenant
    owner = user()
    draft = drafts.draft_save(tenant=tenant, system_prompt="You are Demo Co's assistant.", top_k=6, min_score=0.45,
                              temperature=0.9, frequency_penalty=0.3)
    with pytest.raises(drafts.DraftError) as refused:  # a temperature has no live setting to go to
        drafts.draft_publish(tenant=tenant, draft_id=draft.pk, actor=Actor.console(owner))
    assert refused.value.field == "temperature"
    drafts.draft_save(tenant=tenant, temperature=None)
    changes = drafts.draft_publish(tenant=tenant, draft_id=draft.pk, actor=Actor.console(owner))
    assert set(changes) == {"system_prompt", "top_k", "min_score", "frequency_penalty"}
    assert penalties_for(tenant_id=tenant.pk).frequency == 0.3  # the tenant's repetition control
    tenant.refresh_from_db()
    assert tenant.system_prompt == "You are Demo Co's assistant."
    k = settings_for(tenant)
    assert (k.top_k, k.min_score) == (6, 0.45)
    assert not AssistantDraft.objects.filter(tenant=tenant).exists()
    entry = AuditLog.objects.get(entity="assistant_draft", action="publish")
    assert entry.actor == owner and entry.source == "console" and entry.tenant == tenant
    assert entry.changes["top_k"] == [3, 6]
    assert AuditLog.objects.filter(entity="tenant", action="update", actor=owner).exists()  # the prompt's own entry


def test_another_tenants_draft_is_not_found():
    a, b = make_tenant().tenant, make_tenant().tenant
    b_draft = drafts.draft_save(tenant=b, system_prompt="B")
    EvalCase.objects.create(tenant=a, question="Hi")
    for fn in (lambda: drafts.draft_publish(tenant=a, draft_id=b_draft.pk, actor=Actor()),
               lambda: services.run_start(tenant=a, settings="draft", draft_id=b_draft.pk, send=False),
               lambda: drafts.draft_get_by_id(tenant=a, draft_id="not-a-uuid")):
        with pytest.raises(NotFound):
            fn()
    b.refresh_from_db()
    assert b.system_prompt != "B" and AssistantDraft.objects.filter(pk=b_draft.pk).exists()


def test_an_evaluation_conversation_hands_over_on_the_reply_alone():
    tenant = make_tenant().tenant
    conversation = Conversation.objects.create(tenant=tenant, channel="api", visitor_id="eval:7")
    reply = Message.objects.create(conversation=conversation, role="assistant", status="queued")
    handed = ReplyRows().reply_handed_over(request_id=str(reply.pk), text="A person will answer.", reason="words")
    assert handed is not None and handed.waits is False  # nobody is called
    conversation.refresh_from_db()
    reply.refresh_from_db()
    assert conversation.handoff == "bot" and (reply.finish_reason, reply.content) == ("handover", "A person will answer.")


def test_an_evaluation_reply_is_no_webhook_event_and_a_visitors_is():
    from tandem.webhooks import chat_events
    from tandem.webhooks import services as webhooks
    from tandem.webhooks.models import Event

    tenant = make_tenant().tenant
    webhooks.endpoint_create(tenant=tenant, url="https://hooks.example.com/", events=["message.created",
                                                                                     "reply.failed"])
    replies = {}
    for visitor in ("eval:3", "v-1"):
        conversation = Conversation.objects.create(tenant=tenant, channel="api", visitor_id=visitor)
        replies[visitor] = Message.objects.create(conversation=conversation, role="assistant", content="Hi.")
        chat_events.reply_ended(request_id=str(replies[visitor].pk))
        chat_events.reply_failed(request_id=str(replies[visitor].pk), code="stalled")
    assert sorted(Event.objects.values_list("type", flat=True)) == ["message.created", "reply.failed"]
    assert all(str(replies["v-1"].pk) in body for body in Event.objects.values_list("body", flat=True))


def test_a_step_of_a_run_acts_only_once():
    tenant = make_tenant().tenant
    EvalCase.objects.create(tenant=tenant, question="Hi")
    run = services.run_start(tenant=tenant, send=False)
    assert run.step == 0 and run.status == "queued"
    assert services.run_step(run_id=run.pk, step=5, send=False) is False  # not the current step: nothing
    run.refresh_from_db()
    assert (run.step, run.status, run.pending) == (0, "queued", [EvalCase.objects.get().pk])
    EvalRun.objects.filter(pk=run.pk).update(status="done")
    assert services.run_step(run_id=run.pk, step=0, send=False) is True  # final: nothing more


def test_one_run_at_a_time_and_a_stalled_one_makes_way():
    tenant = make_tenant().tenant
    EvalCase.objects.create(tenant=tenant, question="Hi")
    first = services.run_start(tenant=tenant, send=False)
    with pytest.raises(services.EvalInputError) as refused:
        services.run_start(tenant=tenant, send=False)
    assert refused.value.code == "run_in_progress"
    EvalRun.objects.filter(pk=first.pk).update(
        progressed_at=timezone.now() - dt.timedelta(seconds=services.STALLED_S + 1))
    second = services.run_start(tenant=tenant, send=False)
    first.refresh_from_db()
    assert first.status == "failed" and first.error.startswith("Stalled") and second.status == "queued"


def test_a_reply_cancelled_from_outside_stops_the_run():
    tenant = make_tenant().tenant
    cases = [EvalCase.objects.create(tenant=tenant, question=q) for q in ("One?", "Two?", "Three?")]
    run = services.run_start(tenant=tenant, send=False)
    conversation = Conversation.objects.create(tenant=tenant, channel="api", visitor_id=f"eval:{run.pk}")
    cancelled = Message.objects.create(conversation=conversation, role="assistant", status="cancelled")
    EvalRun.objects.filter(pk=run.pk).update(in_flight={str(cancelled.pk): cases[0].pk},
                                             pending=[c.pk for c in cases[1:]])
    assert services.run_step(run_id=run.pk, step=0, send=False) is True
    run.refresh_from_db()
    assert (run.status, run.error, run.pending, run.in_flight) == ("failed", services.STOPPED, [], {})
    assert run.summary["cases"] == 1 and not Message.objects.exclude(pk=cancelled.pk).exists()  # nothing asked


def test_a_run_or_a_polled_trial_reply_keeps_its_listener_lease(redis_client):
    from inference.wire import keys
    from inference.wire.reader import LISTENER_TTL_S

    redis_client.set(keys.listener("eval-r1"), "1", ex=2)
    pipeline.keep_listening(request_ids=["eval-r1", "eval-gone"])
    assert LISTENER_TTL_S - 2 <= redis_client.ttl(keys.listener("eval-r1")) <= LISTENER_TTL_S
    assert not redis_client.exists(keys.listener("eval-gone"))  # a lapsed lease is not revived
