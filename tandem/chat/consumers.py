"""The chat websocket, `/ws/chat/?key=<widget key>[&visitor=…][&user=…&user_hash=…]`.
Protocol: docs/protocol.md.

Thin: it authenticates, parses frames and calls chat services; replies are read from the
request's Redis Stream (through `ReplyFollower`, as the REST views read them) and
forwarded as they arrive. Each request being followed has its own asyncio task, so one
socket can follow several, and a bad frame never stops the others."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from inference.wire import streams
from inference.wire.connections import async_redis
from tandem.actions.stream import CallHider
from tandem.attachments import socket as attachment_socket
from tandem.chat.validation import InvalidInput
from tandem.feedback import socket as feedback_socket
from tandem.handoff import assignment, states
from tandem.handoff.live import WidgetLive
from tandem.onboarding import services as setup_services
from tenants import changes
from tenants.models import ApiKey
from tenants.services import (
    AuthenticationFailed,
    api_key_refresh,
    origin_allowed,
)

from ..net import scope_client_ip
from . import selectors, services, sockets
from .key_cache import key_authenticate
from .models import Conversation
from .replies import EXPIRED, ReplyFollower
from .sampling import sampling_for_tandem, sampling_options
from .visitors import (
    IdentityRefused,
    visitor_establish,
    visitor_recheck,
    visitor_token_issue,
    visitor_token_read,
)

log = logging.getLogger(__name__)
MAX_FRAME_BYTES = 64 * 1024
CLOSE_UNAUTHORIZED, CLOSE_FORBIDDEN = 4401, 4403
LOCALE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})?$")


def in_db(fn):
    """`fn` run in the event loop's executor, not thread-sensitive: a socket's database
    work (a connect's key check, a submission) runs side by side with other sockets'
    instead of queueing behind all of it on daphne's one sync thread. The services keep
    no thread-bound state; the database connection is the executor thread's own, and
    database_sync_to_async closes it there, before and after the call, once it is too
    old or broken."""
    return database_sync_to_async(fn, thread_sensitive=False)


class ChatConsumer(AsyncWebsocketConsumer):
    # Tokens never travel through the channel layer (it drops messages at capacity), and
    # this consumer receives nothing else from it: do not hold a layer channel open.
    channel_layer_alias = "tandem-consumers-use-no-layer"

    async def connect(self):
        self.api_key = None
        self.followers: dict[str, asyncio.Task] = {}
        self.counted_ip = self.counted_key = self.idle_task = None
        self.frames = sockets.FrameBucket()
        self.last_frame_at = time.monotonic()
        self.redis = async_redis()
        self.client_ip = scope_client_ip(self.scope)
        self.live = WidgetLive(self)  # a hand-over to a person: tandem.handoff.live
        query = parse_qs(self.scope.get("query_string", b"").decode())
        # A client that understands token frames carrying several tokens (`count`) says so.
        self.merge_tokens = (query.get("batch") or [""])[0] == "1"
        # The visitor's language (the widget's locale): the assistant is asked to answer in it.
        self.locale = (query.get("locale") or [""])[0]
        headers = dict(self.scope.get("headers", []))
        origin = headers.get(b"origin", b"").decode() or None
        await self.accept()
        # The address's cap first: a peer over it costs no Redis read and no query.
        if not sockets.sockets.open_ip(self.client_ip):
            await self._too_many("address")
            return
        self.counted_ip = self.client_ip
        # The change counter before the key: a change that commits after it is noticed by
        # the next message; the key itself comes from the process's copy while the counter
        # says nothing changed (key_cache.py).
        version = await sockets.change_version(self.redis)
        try:
            api_key = await key_authenticate(plaintext=(query.get("key") or [""])[0], kind=ApiKey.Kind.WIDGET,
                                             version=version, in_db=in_db)
        except AuthenticationFailed as exc:
            await self._error(exc.code, str(exc))
            await self.close(code=CLOSE_UNAUTHORIZED)
            return
        if not origin_allowed(api_key=api_key, origin=origin):
            await self._error("origin_not_allowed", f"Origin {origin!r} is not allowed for this key.")
            await self.close(code=CLOSE_FORBIDDEN)
            return
        # Who this socket speaks for, checked now and again for every message (a wrong
        # identity hash is refused before anything is stored: tandem.chat.visitors).
        def arg(name: str) -> str:
            return (query.get(name) or [""])[0]

        # The visitor id is the server's, signed: a token that does not verify gets a new
        # one, which the page keeps (frame "visitor").
        visitor_id = visitor_token_read(tenant=api_key.tenant, token=arg("visitor"))
        issued = None
        if visitor_id is None:
            visitor_id, issued = visitor_token_issue(tenant=api_key.tenant)
        try:
            self.visitor = visitor_establish(
                tenant=api_key.tenant, visitor_id=visitor_id, user_id=arg("user"),
                user_hash=arg("user_hash"), name=arg("user_name"), email=arg("user_email"),
                page_url=arg("page"), user_agent=headers.get(b"user-agent", b"").decode("latin-1"))
        except IdentityRefused as exc:
            await self._error(exc.code, str(exc))
            await self.close(code=CLOSE_UNAUTHORIZED)
            return
        if issued:
            await self._send({"type": "visitor", "token": issued})
        if self.locale and not LOCALE.match(self.locale):
            await self._error("invalid_locale", "locale must be a language tag such as fr or pt-BR; "
                                                "replies follow the conversation's language.")
            self.locale = ""
        if not sockets.sockets.open_key(api_key.pk):
            await self._too_many("key")
            return
        self.counted_key = api_key.pk
        self.api_key = api_key
        self.key_version, self.key_read_at = version, time.monotonic()
        self.idle_task = asyncio.create_task(sockets.close_when_idle(self))
        # The getting-started checklist's install step: a process writes a tenant's first
        # accepted connect once, then remembers it in memory (no I/O on later connects).
        if not setup_services.widget_connect_known(api_key.tenant_id):
            await in_db(setup_services.widget_connected)(tenant_id=api_key.tenant_id, origin=origin)

    async def disconnect(self, code):
        # A disconnect does not cancel: the client may come back and resume. Requests
        # nobody listens to are cancelled by the workers once the listener lease lapses.
        for task in self.followers.values():
            task.cancel()
        self.live.stop()
        if self.idle_task is not None:
            self.idle_task.cancel()
        sockets.sockets.close(key_id=self.counted_key, ip=self.counted_ip)
        self.counted_ip = self.counted_key = None
        # The Redis client is the process's shared one: not closed here.

    async def receive(self, text_data=None, bytes_data=None):
        if self.api_key is None:
            return
        self.last_frame_at = time.monotonic()
        wait = self.frames.take()
        if wait is not None:  # no work for a frame over the socket's rate
            await self._error("rate_limited", "Too many frames on this connection.", retry_after=round(wait, 3))
            return
        if text_data is None or len(text_data) > MAX_FRAME_BYTES:
            await self._error("invalid_frame", f"Frames must be JSON text under {MAX_FRAME_BYTES} bytes.")
            return
        try:
            frame = json.loads(text_data)
        except (ValueError, RecursionError):  # also Python's integer-digit and nesting limits
            await self._error("invalid_json", "The frame is not valid JSON.")
            return
        if not isinstance(frame, dict):
            await self._error("invalid_frame", "A frame must be a JSON object.")
            return
        kind = frame.get("type")
        handler = {"message": self._on_message, "cancel": self._on_cancel, "resume": self._on_resume,
                   "history": self._on_history, "handoff": self.live.on_handoff,
                   "typing": self.live.on_typing, "offline": self.live.on_offline,
                   "feedback": lambda f: feedback_socket.on_feedback(self, f),
                   "csat": lambda f: feedback_socket.on_csat(self, f),
                   "attachment": lambda f: attachment_socket.on_attachment(self, f)}.get(kind) if isinstance(kind, str) else None
        if handler is None:
            await self._error("unknown_type", "type must be one of: message, cancel, resume, history, handoff, "
                                              "typing, offline, feedback, csat, attachment.")
            return
        try:
            await handler(frame)
        except Exception:
            # A bug or a lost database/Redis connection: the client hears of it and the
            # socket stays open (an exception here would close it with 1011 and skip
            # disconnect(), leaving its followers running).
            log.exception("chat frame %r failed", kind)
            await self._error("internal_error", "The server failed to handle this frame; please retry.")

    async def _on_message(self, frame: dict):
        conversation = frame.get("conversation")
        if conversation is not None and not isinstance(conversation, str):
            await self._error("invalid_frame", "conversation must be an id or null.")
            return
        # The socket keeps its key and tenant: the admission checks in the same round trip
        # that tenants.changes counted no change since they were read (and the submission
        # reads them again if it did), and they are read again at their maximum age.
        refresh = self._key_aged()
        # Where to watch the conversation's events from, read before the message is sent:
        # a hand-over the CPU tier makes of it publishes its event before this returns.
        since = await self.live.mark_before_send(conversation)
        try:
            # The frame's own sampling options (docs/protocol.md); the rest are the tenant's.
            options = sampling_options(frame.get("sampling"))
            sampling = (await in_db(lambda: sampling_for_tandem(quota=self.api_key.tenant.quota, **options))()
                        if options else None)
            sub = await in_db(services.chat_submit)(
                api_key=self.api_key, messages=[("user", frame.get("text"))], sampling=sampling,
                conversation_id=conversation, channel=Conversation.Channel.WIDGET,
                visitor=self.visitor, key_version=self.key_version, refresh_key=refresh,
                client_ip=self.client_ip, locale=self.locale, offer_actions=True,
            )
        except (AuthenticationFailed, IdentityRefused) as exc:
            # Revoked, its tenant deactivated, or the visitor's identity no longer verifies
            # (verification turned on, a new secret) since connect.
            await self._refuse(exc)
            return
        except states.HeldForPerson as exc:  # a person answers: stored for them, no reply
            await self.live.held(exc, after=since)
            return
        except InvalidInput as exc:
            extra = {"param": exc.param} if exc.code == "invalid_sampling" else {}
            await self._error(exc.code, str(exc), **extra)
            return
        except services.QuotaRefused as exc:
            retry = exc.admission.retry_after_s
            await self._error(exc.code, str(exc), reason=exc.reason,
                              retry_after=None if retry is None else round(retry, 3))
            return
        except services.NotFound as exc:
            await self._error(exc.code, str(exc))
            return
        if sub.api_key is not self.api_key:  # read again
            self.api_key, self.key_version, self.key_read_at = sub.api_key, sub.key_version, time.monotonic()
            self.visitor = sub.visitor
        request_id = str(sub.assistant_message.pk)
        await self._send({"type": "conversation", "id": str(sub.conversation.pk)})
        await self._send({"type": "start", "message": request_id})
        if not sub.served:
            await self._send({"type": "status", "message": request_id, "state": "queued",
                              "detail": "No worker is serving this tenant's pool right now; the "
                                        "request is queued."})
        self._follow(request_id, after=-1, served=sub.served)
        self.live.watch(str(sub.conversation.pk), after=since)

    async def _key_still_works(self) -> bool:
        """For the frames that pass no admission (cancel, resume, history): read the key again when
        tenants.changes counted a change since it was read, or at its maximum age, as a
        message would. False, after refusing the socket, when it no longer works."""
        version = await changes.aversion(self.redis)
        if version == self.key_version and not self._key_aged():
            return True
        try:
            self.api_key = await in_db(api_key_refresh)(api_key=self.api_key)
            self.visitor = visitor_recheck(tenant=self.api_key.tenant, visitor=self.visitor)
        except (AuthenticationFailed, IdentityRefused) as exc:
            await self._refuse(exc)
            return False
        self.key_version, self.key_read_at = version, time.monotonic()
        return True

    def _key_aged(self) -> bool:
        """The socket's copy of its key and tenant has reached its maximum age."""
        return time.monotonic() - self.key_read_at >= settings.TANDEM_TENANT_REFRESH_S

    async def _refuse(self, exc: AuthenticationFailed | IdentityRefused):
        """The key was revoked (or its tenant deactivated), or the visitor's identity stopped
        verifying, while the socket was open."""
        await self._error(exc.code, str(exc))
        await self.close(code=CLOSE_UNAUTHORIZED)
        self.api_key = None

    async def _on_cancel(self, frame: dict):
        if not await self._key_still_works():
            return
        try:
            await in_db(services.chat_cancel)(
                tenant=self.api_key.tenant, message_id=frame.get("message"), visitor=self.visitor)
        except services.NotFound as exc:
            await self._error(exc.code, str(exc))

    async def _on_resume(self, frame: dict):
        after = frame.get("after", -1)
        if not isinstance(after, int) or isinstance(after, bool):
            await self._error("invalid_frame", "after must be an integer token index.")
            return
        if not await self._key_still_works():
            return
        try:
            msg = await in_db(services.message_get)(
                tenant=self.api_key.tenant, message_id=frame.get("message"), visitor=self.visitor)
        except services.NotFound as exc:
            await self._error(exc.code, str(exc))
            return
        request_id = str(msg.pk)
        if msg.is_final and not await streams.exists(self.redis, request_id):
            # Finished long ago: its stream expired, and nothing more will be written.
            await self._send(_frame(request_id, EXPIRED))
            return
        self._follow(request_id, after=after, served=True)

    async def _on_history(self, frame: dict):
        """The conversation's transcript, for a page that reloaded (docs/protocol.md)."""
        if not await self._key_still_works():
            return
        conversation = frame.get("conversation")
        mark = await self.live.mark(conversation) if isinstance(conversation, str) and len(conversation) <= 64 else "$"
        try:
            transcript = await in_db(selectors.conversation_transcript)(
                tenant=self.api_key.tenant, conversation_id=frame.get("conversation"), visitor=self.visitor)
        except services.NotFound as exc:
            await self._error(exc.code, str(exc))
            return
        # A page reloaded while it waits with nobody to take it offers the offline form again.
        unreachable = (await in_db(assignment.unreachable)(tenant_id=self.api_key.tenant_id)
                       if transcript["handoff"] == Conversation.Handoff.PENDING_HUMAN else {})
        await self._send({"type": "history", "conversation": transcript["id"], "messages": transcript["messages"],
                          "handoff": transcript["handoff"], **unreachable})
        self.live.watch(transcript["id"], after=mark)

    def _follow(self, request_id: str, *, after: int, served: bool):
        old = self.followers.pop(request_id, None)
        if old:
            old.cancel()
        self.followers[request_id] = asyncio.create_task(self._forward(request_id, after, served))

    async def _forward(self, request_id: str, after: int, served: bool):
        """Forward the request's records as frames until its end or error (a silent
        stream ends in an error too: see ReplyFollower)."""
        follower = ReplyFollower(request_id, served=served, after_index=after)
        calls = CallHider()  # a tool call's tokens are the agents' to read (tandem.actions)
        try:
            async for batch in follower.batches():
                for frame in calls.frames(_frames(request_id, batch, merge=self.merge_tokens)):
                    await self._send(frame)
        except asyncio.CancelledError:
            pass
        except Exception:  # e.g. Redis dropped the connection: say so rather than go quiet
            log.exception("following %s failed", request_id)
            await self._send(_frame(request_id, streams.error_record(
                "stream_failed", "Following this reply failed; resume it to continue.")))
        finally:
            # A resume of the same reply may have replaced this task already: leave its entry.
            if self.followers.get(request_id) is asyncio.current_task():
                del self.followers[request_id]
            self.last_frame_at = time.monotonic()  # the idle timeout counts from the reply's end

    async def _too_many(self, per: str):
        await self._error("too_many_connections", f"Too many open chat connections for this {per}.")
        await self.close(code=sockets.CLOSE_TOO_MANY)

    async def _send(self, payload: dict):
        await self.send(text_data=json.dumps(payload))

    async def send_error(self, code: str, text: str) -> None:
        await self._error(code, text)

    async def _error(self, code: str, text: str, **extra):
        """A connection- or frame-level error: `message` is the text. (Errors of one
        request carry that request's id in `message` and the text in `detail`, so every
        frame about a request can be routed by its `message` field.)"""
        await self._send({"type": "error", "code": code, "message": text, "detail": text, **extra})



def _frames(request_id: str, batch: list[dict], *, merge: bool) -> list[dict]:
    """A batch of stream records as frames. For a client that asked for it (`batch=1`),
    consecutive tokens become one frame: `index` is the first token's, `count` how many,
    `text` their texts joined (docs/protocol.md)."""
    frames: list[dict] = []
    for rec in batch:
        frame = _frame(request_id, rec)
        last = frames[-1] if frames else None
        if merge and rec["type"] == "token" and last is not None and last["type"] == "token":
            last["text"] += frame["text"]
            last["count"] = last.get("count", 1) + 1
            continue
        frames.append(frame)
    return frames


def _frame(request_id: str, rec: dict) -> dict:
    """A stream record as the protocol's frame about that request."""
    kind = rec["type"]
    if kind == "token":
        return {"type": "token", "message": request_id, "index": rec["index"], "text": rec["text"]}
    if kind == "end":
        # No prompt_tokens_details: a widget never learns what the prefix cache held
        # (it would tell whether another prompt shared a prefix; docs/security.md).
        usage = {k: v for k, v in (rec["usage"] or {}).items() if k != "prompt_tokens_details"}
        return {"type": "end", "message": request_id, "finish_reason": rec["finish_reason"], "usage": usage,
                "sources": rec.get("sources", [])}
    if kind == "error":
        return {"type": "error", "code": rec["code"], "message": request_id, "detail": rec["message"]}
    return {"type": "status", "message": request_id, "state": rec["state"], "detail": rec.get("detail", "")}
