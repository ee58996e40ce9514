"""A streamed REST conversation answer that waits for a person's approval stays alive:
during the silence the stream carries SSE keep-alive comments (tandem.api.keepalive,
TANDEM_API_SSE_KEEPALIVE_S, 15 s by default on the session platform), so the official
openai client with a 20 s read timeout reads the whole answer across a 35 s wait. On the
running platform, with the actions worker and the tenant's endpoint of test_rest.py."""

from __future__ import annotations

import threading
import time

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from tandem.actions.models import ActionCall
from tests.actions.live import refund_awaiting_approval
from tests.actions.test_rest import conversation, wait_for_event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.real_model]

COMMENT = b": keep-alive\n\n"
SILENCE_S = 35  # longer than the client's read timeout, and than two keep-alive intervals


class _Tee(httpx.SyncByteStream):
    def __init__(self, stream, raw: bytearray):
        self.stream, self.raw = stream, raw

    def __iter__(self):
        for chunk in self.stream:
            self.raw += chunk
            yield chunk

    def close(self) -> None:
        self.stream.close()


class RecordingTransport(httpx.HTTPTransport):
    """httpx's own transport, keeping a copy of the bytes the client reads (the raw
    stream, comments included, which the client's SSE decoder skips)."""

    def __init__(self):
        super().__init__()
        self.raw = bytearray()

    def handle_request(self, request):
        response = super().handle_request(request)
        return httpx.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                              stream=_Tee(response.stream, self.raw))


def test_a_streamed_answer_waiting_for_approval_sends_keep_alives_and_a_20_s_read_timeout_reads_it_whole(
        platform, grammar_warm, actions_worker, endpoint, allow_loopback, client):
    created = refund_awaiting_approval(endpoint, client)
    tenant = created.tenant
    with httpx.Client(base_url=platform.base_url, timeout=60) as http:
        cid = conversation(http, created)

    transport = RecordingTransport()
    api = openai.OpenAI(base_url=f"{platform.base_url}/api/v1", api_key=created.secret_key.plaintext,
                        max_retries=0, timeout=httpx.Timeout(20, connect=5),
                        http_client=httpx.Client(transport=transport))
    read: dict = {}

    def stream():  # the answer waits for the approval: on a thread of its own
        try:
            chunks = api.post(f"/conversations/{cid}/messages/", cast_to=ChatCompletionChunk,
                              body={"content": "Please refund order A-17", "stream": True},
                              stream=True, stream_cls=openai.Stream[ChatCompletionChunk])
            read["chunks"] = list(chunks)
        except Exception as exc:  # noqa: BLE001 - reported by the assertions below
            read["error"] = exc

    reader = threading.Thread(target=stream)
    reader.start()
    wait_for_event(cid, lambda e: e.get("type") == "action" and e.get("state") == "awaiting_approval")
    call = ActionCall.objects.get(conversation_id=cid)
    assert call.status == "awaiting_approval" and endpoint.requests == []
    time.sleep(SILENCE_S)  # the silence under test: nobody approves yet
    assert reader.is_alive() and not read, read  # still reading, past its 20 s read timeout
    during = bytes(transport.raw)
    assert during.count(COMMENT) >= 2, during
    assert b'"content":"' not in during.replace(b'"content":""', b"")  # no answer text yet

    assert client.post(f"/console/t/{tenant.slug}/approvals/{call.pk}/approve/").status_code == 302
    reader.join(timeout=180)
    assert not reader.is_alive()
    assert "error" not in read, read.get("error")

    chunks = read["chunks"]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text and "<tool_call>" not in text
    assert finishes in (["stop"], ["length"])
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0

    raw = bytes(transport.raw)
    first_text = raw.index(b'"content":"', raw.index(b'"content":""') + 1)
    assert raw[:first_text].count(COMMENT) >= 2
    assert raw.endswith(b"data: [DONE]\n\n")
    # Every line is an SSE data line, a comment or a separator: nothing else slipped in.
    assert {line.split(b":", 1)[0] for line in raw.split(b"\n") if line} == {b"data", b""}
