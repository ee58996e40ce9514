"""What a conversation's request offers the model: the tenant's enabled actions as tools, in the
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

Where: the caller says (tandem.chat.services.chat_submit's `offer_actions`): the widget
socket offers them with every message, and the REST API's conversation messages
(POST /api/v1/conversations/<id>/messages/) unless the request says `"actions": false`.
The OpenAI-compatible /v1/chat/completions never offers them (its client brings its own
`tools`; a reply there that starts with a call is the client's). Whether a reply was
offered them is stored with it (tandem.chat.models.Message.offered_actions), where the
reply's end (calls.py) reads it.

Imports no chat module: tandem.chat.services calls `offer_to`."""

from __future__ import annotations

import functools
import json

from tandem.api import tool_calls

from .models import Action

AUTO, NONE = "auto", "none"


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


def offer_to(spec, *, tenant_id: int, text: str | None = None, choice: str | dict | None = None,
             called: frozenset[str] = frozenset()) -> bool:
    """Offer the tenant's enabled actions to the request `spec` (a RequestSpec not yet
    admitted): its grammar set, the tools' system message put first. Called only for a
    request its caller offers them to (a first pass), or for the continuation of a
    call (which that offer made). `text`: the visitor's message, for trigger phrases
    (first pass); `choice`: the choice itself (a continuation); `called`: actions
    already called for this visitor message, not offered again (a small model asked
    again tends to repeat its call). True when tools were offered: the caller stores
    it on the reply's row (Message.offered_actions)."""
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
    return True
