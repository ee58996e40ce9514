"""Handing a conversation to a person (tandem.handoff.states): the owner's state machine,
atomic claims, and a visitor's messages while a person owns the conversation — stored
for them, nothing sent to the model tiers. Real database and Redis; the CPU tier's hop
runs in-process for the "asks in words" case."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import timedelta

import pytest
import websockets.sync.client as ws_client
from django.db import connection
from websockets.exceptions import ConnectionClosed

from devstack.processes import wait_for
from inference.pipeline import cpu
from inference.pipeline.submit import request_stored
from inference.wire import keys, streams
from inference.wire.connections import get_redis
from inference.wire.spec import RequestSpec, Sampling
from inference.wire.spec import save as spec_save
from knowledge.selectors import retrieval_spec
from tandem.chat import services
from tandem.chat.models import Conversation, Message, OfflineMessage
from tandem.chat.validation import InvalidInput
from tandem.chat.visitors import visitor_establish
from tandem.handoff import assignment, offline, states
from tandem.hours.texts import unavailable_text
from tenants.models import ApiKey, Membership, UsageRecord
from tenants.services import api_key_authenticate
from tests.factories import UserFactory, make_tenant
from tests.knowledge.conftest import import_help_centre
from tests.platform_fixtures import ask_for_person, chat_socket, signed_in_agent

pytestmark = pytest.mark.django_db(transaction=True)
H = Conversation.Handoff


@pytest.fixture
def site(redis_client):
    created = make_tenant()
    for key in redis_client.scan_iter(f"tandem:quota:{created.tenant.pk}:*"):
        redis_client.delete(key)
    key = api_key_authenticate(plaintext=created.widget_key.plaintext, kind=ApiKey.Kind.WIDGET)
    visitor = visitor_establish(tenant=created.tenant, visitor_id="visitor-1")
    conv = Conversation.objects.create(tenant=created.tenant, channel="widget", visitor_id="visitor-1")
    return created.tenant, key, visitor, conv


def send(site, text: str):
    _, key, visitor, conv = site
    return services.chat_submit(api_key=key, messages=[("user", text)], conversation_id=str(conv.pk),
                                visitor=visitor)


def request_keys(redis_client) -> list:
    return list(redis_client.scan_iter("tandem:req:*"))


def at_the_same_moment(*actions) -> list:
    """Run each action in a thread of its own; each calls the `go` it is given after its
    own reads, and they all go on together from there. Their results, in order (an
    exception raised is its result)."""
    barrier, results = threading.Barrier(len(actions)), [None] * len(actions)

    def run(i, action):
        try:
            results[i] = action(barrier.wait)
        except Exception as exc:  # noqa: BLE001 - the caller asserts on it
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate(actions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_two_agents_claiming_at_the_same_moment_make_exactly_one_owner(site):
    conv = site[3]
    states.handoff_request(conversation=conv, reason="button")

    def claim(agent):
        def act(go):
            mine = Conversation.objects.get(pk=conv.pk)  # each agent's own read
            go()
            states.conversation_claim(conversation=mine, agent=agent)
            return agent
        return act

    results = at_the_same_moment(*(claim(a) for a in (UserFactory(), UserFactory())))
    won = [r for r in results if not isinstance(r, Exception)]
    lost = [r for r in results if isinstance(r, states.Taken)]
    assert len(won) == 1 and len(lost) == 1
    conv.refresh_from_db()
    assert conv.handoff == H.HUMAN and conv.assignee == won[0]
    assert won[0].username in str(lost[0])  # the loser is told who answers


def test_while_a_person_owns_it_a_visitor_message_reaches_the_inbox_and_nothing_is_prefilled(site, redis_client):
    tenant, _, _, conv = site
    agent = UserFactory()
    states.conversation_claim(conversation=conv, agent=agent)
    before = request_keys(redis_client)
    with pytest.raises(states.HeldForPerson) as held:
        send(site, "Are you still there?")
    msg = held.value.message
    assert Message.objects.get(pk=msg.pk).content == "Are you still there?"
    assert not Message.objects.filter(conversation=conv, role=Message.Role.ASSISTANT).exists()
    assert request_keys(redis_client) == before  # no request spec, so no task for any tier
    assert not UsageRecord.objects.filter(tenant=tenant).exists()
    assert not redis_client.llen("cpu")  # nothing on the CPU tier's queue
    events = [e for _, e in redis_client.xrange(keys.conversation_events(str(conv.pk)))]
    assert any(b'"Are you still there?"' in e[b"e"] for e in events)  # the agents' sockets hear it


def test_an_agent_replies_only_once_they_own_it_and_notes_never_reach_a_prompt(site):
    conv = site[3]
    agent, other = UserFactory(first_name="Maya"), UserFactory()
    with pytest.raises(states.NotYours):
        states.agent_message(conversation=conv, agent=agent, text="Hello")
    states.conversation_claim(conversation=conv, agent=agent)
    with pytest.raises(states.NotYours):
        states.agent_message(conversation=conv, agent=other, text="Me too")
    reply = states.agent_message(conversation=conv, agent=agent, text="Hi, Maya here.")
    states.agent_message(conversation=conv, agent=other, text="VIP customer", note=True)
    assert reply.author == agent and reply.author_name == "Maya"
    conv.refresh_from_db()
    assert conv.first_human_reply_at is not None
    history = services.prompt_history(conv, max_prompt_tokens=conv.tenant.quota.max_prompt_tokens)
    assert {"role": "assistant", "content": "Hi, Maya here."} in history
    assert all("VIP" not in m["content"] for m in history)


def test_after_resolve_the_next_visitor_message_goes_back_to_the_bot(site, redis_client):
    conv = site[3]
    states.conversation_claim(conversation=conv, agent=UserFactory())
    assert states.conversation_resolve(conversation=conv)
    assert not states.conversation_resolve(conversation=conv)  # once
    sub = send(site, "One more question")
    conv.refresh_from_db()
    assert conv.handoff == H.BOT
    assert sub.assistant_message.status == Message.Status.QUEUED
    assert redis_client.exists(keys.request(str(sub.assistant_message.pk)))


def test_asking_for_a_person_in_words_hands_over_in_the_cpu_tier_without_a_model_call(site, redis_client):
    tenant, _, _, conv = site
    sub = send(site, "This is useless, I want to talk to a real person please")
    request_id = str(sub.assistant_message.pk)
    # Ended in the CPU tier. (When the session's platform is up, its CPU worker may take the
    # same task first: either run ends it, and the second finds it done.)
    assert cpu.preprocess_request(request_id) is None
    wait_for(lambda: (streams.read_all(redis_client, request_id) or [{}])[-1].get("type") == "end",
             timeout=30, what="the hand-over's end record")
    records = streams.read_all(redis_client, request_id)
    assert records[-1]["finish_reason"] == "handover"
    reply = Message.objects.get(pk=request_id)
    assert reply.status == Message.Status.DONE and reply.finish_reason == "handover" and reply.content
    conv.refresh_from_db()
    assert conv.handoff == H.PENDING_HUMAN and conv.handoff_reason == "words"
    assert not UsageRecord.objects.filter(tenant=tenant).exists()
    # The next message waits for the person, too.
    with pytest.raises(states.HeldForPerson):
        send(site, "Hello?")


def test_a_tenant_that_turns_the_words_off_keeps_the_bot(site):
    tenant, _, _, conv = site
    tenant.handover_patterns = "-"
    tenant.save()
    spec = states.handoff_spec(tenant=tenant, channel="widget")
    from inference.text.handover import asks_for_person
    assert not asks_for_person("talk to a human", spec["handover_patterns"])


def test_a_transcript_keeps_the_order_messages_were_written_in_whatever_their_clocks_say(site):
    tenant, _, visitor, conv = site
    agent = UserFactory(first_name="Maya")
    states.conversation_claim(conversation=conv, agent=agent)
    with pytest.raises(states.HeldForPerson):
        send(site, "1 my parcel")
    states.agent_message(conversation=conv, agent=agent, text="2 let me look")
    with pytest.raises(states.HeldForPerson):
        send(site, "3 thanks")
    rows = list(Message.objects.filter(conversation=conv).order_by("seq"))
    # Written in one second (a tie), and the last one on a host whose clock is behind.
    first = rows[0].created_at
    Message.objects.filter(pk__in=[rows[0].pk, rows[1].pk]).update(created_at=first)
    Message.objects.filter(pk=rows[2].pk).update(created_at=first.replace(microsecond=0) - timedelta(seconds=1))
    from tandem.chat import selectors
    from tandem.console import selectors as console_selectors
    from tandem.handoff import inbox
    said = ["1 my parcel", "2 let me look", "3 thanks"]
    assert [m.content for m in inbox.inbox_transcript(conv)] == said
    assert [m["text"] for m in selectors.conversation_transcript(
        tenant=tenant, conversation_id=conv.pk, visitor=visitor)["messages"]] == said
    assert [m.content for m in services.conversation_messages(tenant=tenant, conversation_id=conv.pk)] == said
    assert [i["message"].content for i in console_selectors.transcript(conv)] == said
    history = services.prompt_history(conv, max_prompt_tokens=tenant.quota.max_prompt_tokens)
    assert [m["content"] for m in history] == said
    assert inbox.inbox_list(tenant=tenant)[0]["last"] == "3 thanks"


def test_two_agents_reassigning_at_the_same_moment_make_exactly_one_owner(site):
    conv = site[3]
    first, *others = [UserFactory(), UserFactory(), UserFactory()]
    states.conversation_claim(conversation=conv, agent=first)

    def assign(to):
        def act(go):
            mine = Conversation.objects.get(pk=conv.pk)  # both saw `first` as the owner
            go()
            states.conversation_assign(conversation=mine, to=to, by=to)
            return to
        return act

    results = at_the_same_moment(*(assign(a) for a in others))
    won = [r for r in results if not isinstance(r, Exception)]
    assert len(won) == 1 and sum(isinstance(r, states.Stale) for r in results) == 1
    conv.refresh_from_db()
    assert conv.assignee == won[0]


def test_with_no_agent_online_the_widget_is_told_and_its_offline_form_reaches_the_inbox(platform, client):
    created = make_tenant()
    owner = UserFactory()
    Membership.objects.create(user=owner, tenant=created.tenant, role=Membership.Role.OWNER)
    with chat_socket(platform, created.widget_key.plaintext) as chat:
        chat.send({"type": "handoff", "conversation": None})
        cid = chat.recv()["id"]
        handed = chat.recv()
        assert handed == {"type": "handoff", "conversation": cid, "state": "pending_human", "agent": "",
                          "offline": True}
        chat.send({"type": "offline", "conversation": cid, "email": "not an address", "text": "Hello"})
        assert chat.recv()["code"] == "invalid_email"
        chat.send({"type": "offline", "conversation": str(uuid.uuid4()), "email": "ann@example.test", "text": "x"})
        assert chat.recv()["code"] == "conversation_not_found"
        chat.send({"type": "offline", "conversation": cid, "email": " ann@example.test ",
                   "text": "My parcel 42 never came"})
        assert chat.recv() == {"type": "offline_received", "conversation": cid}
    with chat_socket(platform, created.widget_key.plaintext, visitor=chat.visitor_token) as again:
        again.send({"type": "history", "conversation": cid})  # the page reloaded: the form again
        restored = again.recv()
        assert (restored["type"], restored["handoff"], restored.get("offline")) == ("history", "pending_human", True)
    left = OfflineMessage.objects.get(conversation_id=cid)
    assert (left.tenant, left.email, left.text) == (created.tenant, "ann@example.test", "My parcel 42 never came")
    assert Conversation.objects.get(pk=cid).user_email == "ann@example.test"
    client.force_login(owner)
    page = client.get(f"/console/t/{created.tenant.slug}/inbox/").content.decode()
    assert "ann@example.test" in page and "My parcel 42 never came" in page


def test_with_an_agent_online_the_hand_over_is_not_offline(site, redis_client):
    tenant, _, _, conv = site
    agent = UserFactory()
    Membership.objects.create(user=agent, tenant=tenant, role=Membership.Role.AGENT)
    assignment.presence_set(tenant=tenant, agent=agent, status="online")
    states.handoff_request(conversation=conv, reason="button")
    with pytest.raises(InvalidInput):  # a conversation the bot has is not an offline one
        offline.offline_message_leave(conversation=Conversation.objects.create(
            tenant=tenant, channel="widget", visitor_id="v"), email="a@b.test", text="hi")
    with pytest.raises(InvalidInput, match="valid e-mail"):  # longer than the column: a 4xx, not a 500
        offline.offline_message_leave(conversation=conv, email="a" * 250 + "@b.test", text="hi")
    last = [e for _, e in redis_client.xrange(keys.conversation_events(str(conv.pk)))][-1]
    assert b'"pending_human"' in last[b"e"] and b"offline" not in last[b"e"]  # what the widget hears


def agent_socket(platform, client, conv):
    """The console's agent socket for `conv`, signed in as `client`'s session."""
    url = f"{platform.ws_url}/ws/agent/{conv.tenant.slug}/{conv.pk}/"
    return ws_client.connect(url, origin=platform.base_url, open_timeout=20,
                             additional_headers={"Cookie": f"sessionid={client.cookies['sessionid'].value}"})


def test_a_suggested_reply_streams_to_the_agent_alone_and_reaches_the_visitor_only_when_sent(platform, client):
    created = make_tenant(max_output_tokens=12)
    tenant = created.tenant
    agent = signed_in_agent(client, tenant, "Maya")
    with chat_socket(platform, created.widget_key.plaintext) as chat:
        conv = ask_for_person(chat)
        cid = str(conv.pk)
        with agent_socket(platform, client, conv) as sock:
            def frame():
                return json.loads(sock.recv(timeout=120))

            sock.send(json.dumps({"type": "suggest"}))  # not theirs yet: refused, nothing started
            assert frame()["code"] == "not_assigned"
            assert client.post(f"/console/t/{tenant.slug}/inbox/{cid}/claim/").status_code == 302
            chat.recv_until(lambda f: f["type"] == "handoff" and f["state"] == "human")
            chat.send({"type": "message", "text": "How long does delivery take?", "conversation": cid})
            chat.recv_until(lambda f: f["type"] == "received")
            seen = [frame()]
            while not (seen[-1]["type"] == "message" and seen[-1]["role"] == "user"):
                seen.append(frame())  # the claim, then the visitor's message, live
            sock.send(json.dumps({"type": "suggest"}))
            frames = [frame()]
            while frames[-1]["type"] not in ("draft_end", "draft_error"):
                frames.append(frame())
        draft_id = next(f["message"] for f in frames if f["type"] == "draft_start")
        tokens = [f for f in frames if f["type"] == "draft"]
        assert frames[-1]["type"] == "draft_end" and tokens
        assert [f["index"] for f in tokens] == list(range(len(tokens)))
        text = "".join(f["text"] for f in tokens)
        draft = Message.objects.get(pk=draft_id)
        assert draft.role == "draft" and draft.content == text and draft.author == agent
        assert UsageRecord.objects.filter(tenant=tenant, message_id=draft.pk).exists()  # the tenant's usage
        # Nothing of it reached the visitor: no frame while it streamed, not in their transcript,
        # not resumable by its id, and no prompt sees it.
        chat.send({"type": "resume", "message": draft_id, "after": -1})
        assert chat.recv()["code"] == "message_not_found"
        chat.send({"type": "history", "conversation": cid})
        history = chat.recv()
        assert history["type"] == "history" and draft_id not in [m["id"] for m in history["messages"]]
        assert all(m["role"] in ("user", "agent") for m in history["messages"])
        assert all(m["content"] != text for m in services.prompt_history(conv, max_prompt_tokens=1000)
                   if m["role"] == "assistant")
        # The agent sends it (edited or not): now, and only now, the visitor has it.
        sent = f"{text} (Maya)"
        assert client.post(f"/console/t/{tenant.slug}/inbox/{cid}/reply/", {"text": sent}).status_code == 302
        got = chat.recv_until(lambda f: f["type"] == "agent_message")[-1]
        assert got["text"] == sent and got["author"] == "Maya"


def unserved_request(tenant, text: str) -> RequestSpec:
    """A widget request as the web tier writes it, on a pool no worker serves (so only this
    test's in-process CPU hop takes it), with the tenant's hand-over settings."""
    pool = f"ungrounded-{uuid.uuid4().hex[:8]}"
    conversation = Conversation.objects.create(tenant=tenant, channel="widget", visitor_id="v")
    Message.objects.create(conversation=conversation, role="user", content=text)
    reply = Message.objects.create(conversation=conversation, role="assistant", status="queued")
    spec = RequestSpec(request_id=str(reply.pk), tenant_id=tenant.pk, api_key_id=None,
                       conversation_id=str(conversation.pk), channel="widget", sampling=Sampling(max_tokens=8),
                       prefill_pool=pool, decode_pool=pool, max_prompt_tokens=1536,
                       prompt_messages=[{"role": "user", "content": text}], retrieval=retrieval_spec(tenant),
                       **states.handoff_spec(tenant=tenant, channel="widget"))
    spec_save(get_redis(), spec)
    request_stored(request_id=spec.request_id, committed=True)
    return spec


def test_with_the_no_grounded_answer_trigger_on_a_question_the_knowledge_cannot_answer_goes_to_a_person(
        redis_client):
    tenant = make_tenant().tenant
    import_help_centre(tenant)
    tenant.handover_ungrounded = True
    tenant.save()
    asked = unserved_request(tenant, "xylophone zeppelin quasar")
    assert asked.handover_ungrounded and asked.retrieval
    assert cpu.preprocess_request(asked.request_id) is None  # ended in the CPU tier: no model call
    assert streams.read_all(redis_client, asked.request_id)[-1]["finish_reason"] == "handover"
    reply = Message.objects.get(pk=asked.request_id)
    # Nobody of the tenant is online: the assistant's words promise nobody (tandem.hours.texts).
    assert reply.finish_reason == "handover" and reply.content == unavailable_text()
    conv = Conversation.objects.get(pk=asked.conversation_id)
    assert conv.handoff == H.PENDING_HUMAN and conv.handoff_reason == "ungrounded"
    # A question the knowledge answers goes on to the model, as before.
    grounded = unserved_request(tenant, "I was charged twice for my order")
    assert cpu.preprocess_request(grounded.request_id) == f"prefill.{grounded.prefill_pool}"
    assert Conversation.objects.get(pk=grounded.conversation_id).handoff == H.BOT
    # Off (the default): the unanswerable question goes to the model too.
    tenant.handover_ungrounded = False
    tenant.save()
    unanswered = unserved_request(tenant, "xylophone zeppelin quasar")
    assert cpu.preprocess_request(unanswered.request_id) == f"prefill.{unanswered.prefill_pool}"
    for spec in (grounded, unanswered):
        for key in redis_client.scan_iter(match=f"prefill.{spec.prefill_pool}*"):
            redis_client.delete(key)


def test_round_robin_and_an_agent_claiming_at_the_same_moment_make_exactly_one_owner(site):
    tenant, _, _, conv = site
    online, claimer = UserFactory(), UserFactory()
    Membership.objects.create(user=online, tenant=tenant, role=Membership.Role.AGENT)
    assignment.presence_set(tenant=tenant, agent=online, status="online")
    tenant.handover_round_robin = True
    tenant.save()
    Conversation.objects.filter(pk=conv.pk).update(handoff=H.PENDING_HUMAN)

    def round_robin(go):
        go()
        return assignment.assign_round_robin(conversation_id=conv.pk, tenant=tenant)

    def claim(go):
        mine = Conversation.objects.get(pk=conv.pk)
        go()
        states.conversation_claim(conversation=mine, agent=claimer)
        return claimer

    results = at_the_same_moment(round_robin, claim)
    assert all(r is None or isinstance(r, (states.Taken, type(claimer))) for r in results), results
    conv.refresh_from_db()
    winners = [w for w in results if w is not None and not isinstance(w, Exception)]
    assert len(winners) == 1 and conv.handoff == H.HUMAN and conv.assignee == winners[0]


def test_an_agent_demoted_after_the_socket_opened_gets_no_draft(platform, client):
    created = make_tenant(max_output_tokens=4)
    tenant = created.tenant
    agent = UserFactory(first_name="Sam")
    member = Membership.objects.create(user=agent, tenant=tenant, role=Membership.Role.AGENT)
    client.force_login(agent)
    with chat_socket(platform, created.widget_key.plaintext) as chat:
        conv = ask_for_person(chat)
        cid = str(conv.pk)
        with agent_socket(platform, client, conv) as sock:
            assert client.post(f"/console/t/{tenant.slug}/inbox/{cid}/claim/").status_code == 302
            chat.send({"type": "message", "text": "Are you there?", "conversation": cid})
            chat.recv_until(lambda f: f["type"] == "received")
            member.role = Membership.Role.VIEWER
            member.save(update_fields=["role"])
            # The socket follows the role change (it closes 4403: access_events); a
            # suggestion that reaches it first is refused. Either way, no draft.
            try:
                sock.send(json.dumps({"type": "suggest"}))
                frame = json.loads(sock.recv(timeout=60))
                while frame["type"] not in ("draft_start", "draft_error"):
                    frame = json.loads(sock.recv(timeout=60))
            except ConnectionClosed:
                frame = {"closed": sock.close_code}
    assert frame in ({"type": "draft_error", "code": "forbidden", "detail": "Your role may no longer use the inbox."},
                     {"closed": 4403})
    assert not Message.objects.filter(conversation_id=cid, role="draft").exists()
