"""What a widget request offers the model: the tenant's enabled actions as tools, in the
REST API's tool-call format (tandem.api.tool_calls: a system message describing them,
and the grammar that holds a call to an action's parameters).

The choice, per pass:
- a visitor's message that contains one of an action's trigger phrases: that action,
  as a named tool_choice (the model must call it; only its arguments are the model's);
- otherwise `auto` (the model may call one or answer in text);
- after a result: `auto` among the actions not yet called for this visitor's message;
- after a refused, denied or failed call, or at TANDEM_ACTIONS_MAX_ROUNDS: no tools (the
  model answers in text, which ends the turn; a grammar keeps that text from starting
  with markup, as a small model would echo the result's tags).

Where: every widget message, and the REST API's conversation messages
(POST /api/v1/conversations/<id>/messages/) unless the request says `"actions": false`. The
OpenAI-compatible /v1/chat/completions is never offered them (its client brings its own
`tools`; a reply there that starts with a call is the client's). Both surfaces share
the channel "api", so the conversations view says it is one (`offered_over_rest`) around
its submission, and a REST request that was offered them is marked (`was_offered`): the
reply's end (calls.py) and the view's follower (stream.py) read the mark.

Imports no chat module: tandem.chat.services calls `offer_to` for every message."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json

from inference.wire.connections import get_redis
from tandem.api import tool_calls

from .models import Action

AUTO, NONE = "auto", "none"
WIDGET, API = "widget", "api"  # tandem.chat.models.Conversation.Channel's values
MARK_TTL_S = 3600  # a request's own lifetime in Redis at most (inference.wire.spec.REQUEST_TTL_S)

# Set by the REST conversations view around chat_submit (which it cannot pass a flag
# through): True offers this REST request the tenant's actions.
_rest_offer: contextvars.ContextVar[bool] = contextvars.ContextVar("tandem_actions_rest_offer", default=False)


@contextlib.contextmanager
def offered_over_rest(enabled: bool = True):
    """The REST conversation message submitted inside is offered the tenant's actions
    (`enabled` False: the request's `"actions": false`)."""
    token = _rest_offer.set(enabled)
    try:
        yield
    finally:
        _rest_offer.reset(token)


def _mark_key(request_id: str) -> str:
    return f"tandem:actions:offered:{request_id}"


def was_offered(request_id: str) -> bool:
    """Whether the REST request `request_id` was offered the tenant's actions (a reply of
    it that starts with a call is an action call, not a client's tool call)."""
    return bool(get_redis().exists(_mark_key(str(request_id))))


def functions(actions: list[Action]) -> list[dict]:
    return [{"type": "function", "function": {"name": a.name, "description": a.description,
                                              "parameters": a.parameters}} for a in actions]


def choice_for(actions: list[Action], text: str) -> str | dict:
    """The named action whose phrase the message contains (the first by name), else auto."""
    lowered = text.lower()
    for a in actions:
        if any(p in lowered for p in a.phrases()):
            return {"type": "function", "function": {"name": a.name}}
    return AUTO


@functools.lru_cache(maxsize=1)
def plain_text_grammar() -> str:
    """A reply that starts with neither "<" nor "{": after a result a small model tends
    to echo the <tool_response> it was shown rather than answer in words."""
    import llguidance

    return llguidance.LLMatcher.grammar_from_lark("start: TEXT\nTEXT: /[^<{\\s](.|\\n)*/\n")


@functools.lru_cache(maxsize=256)
def _compiled(tools_json: str, choice_json: str) -> tuple[str, str]:
    data = {"tools": json.loads(tools_json), "tool_choice": json.loads(choice_json)}
    return tool_calls.system_prompt(data), tool_calls.grammar(data)


def offer_to(spec, *, tenant_id: int, channel: str, text: str | None = None, choice: str | dict | None = None,
             called: frozenset[str] = frozenset()) -> bool:
    """Offer the tenant's enabled actions to the request `spec` (a RequestSpec not yet
    admitted): its grammar set, the tools' system message put first. `text`: the
    visitor's message, for trigger phrases (first pass); `choice`: the choice itself
    (a continuation); `called`: actions already called for this visitor message, not
    offered again (a small model asked again tends to repeat its call). True when tools
    were offered."""
    if channel == API:
        # A continuation (`choice` set) follows a call this conversation was offered.
        if choice is None and not _rest_offer.get():
            return False
    elif channel != WIDGET:
        return False
    actions = [] if choice == NONE else [
        a for a in Action.objects.filter(tenant_id=tenant_id, enabled=True) if a.name not in called]
    if not actions:
        if choice is not None:  # a continuation that answers in text
            spec.sampling.grammar = plain_text_grammar()
        return False
    if choice is None:
        choice = choice_for(actions, text or "")
    system, grammar = _compiled(json.dumps(functions(actions), sort_keys=True), json.dumps(choice, sort_keys=True))
    spec.sampling.grammar = grammar
    spec.prompt_messages = [{"role": "system", "content": system}, *spec.prompt_messages]
    if channel == API:
        # Before admission: a refused request leaves only this mark, which expires.
        get_redis().set(_mark_key(spec.request_id), "1", ex=MARK_TTL_S)
    return True
