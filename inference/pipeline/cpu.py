"""The CPU tier: validate, retrieve the tenant's knowledge, build the prompt (tenant
system prompt, knowledge, history within the context window), tokenize, send the
request on to the pools the web tier routed it to. No model weights here: only the
tokenizer, loaded once per worker process.

Everything else it needs is in the request's spec (the web tier wrote the tenant's
system prompt, its prompt limit, its retrieval settings and the conversation): the one
database read on the way to the first token is retrieval, a single indexed query scoped
to the tenant (`knowledge.selectors.retrieve`), and none when the tenant has it off. The web tier enqueues the request before it stores the message rows, so it
builds the prompt while they are written; the request goes on (or fails) once both are
done, by whichever of the two tiers finishes second (`rendezvous`)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DatabaseError

from knowledge.search import Hit
from knowledge.selectors import passage, retrieve, sources_of

from ..text import cache_scope, handover
from ..text.prompting import PromptTooLong, _encode, build_prompt, language_instruction
from ..text.tokenizer import get_tokenizer
from ..text.validation import TextRejected, clean_user_text
from ..wire import broker, streams
from ..wire.connections import get_redis
from ..wire.spec import RequestSpec, load_with_cancel, save
from ..worker.budget import disarm
from . import outcomes, rendezvous
from .contracts import HANDOVER, HANDOVER_UNGROUNDED

log = logging.getLogger(__name__)


def preprocess_request(request_id: str) -> str | None:
    """Returns the queue the request goes on to (sent from here, or by the web tier when
    its rows commit after this), or None when it ended here (or had already been through
    here: a redelivered task does nothing)."""
    client = get_redis()
    spec, cancelled = load_with_cancel(client, request_id)
    if spec is not None and spec.prompt_token_ids:
        # Redelivered (the worker died after storing the prompt, before acking): prefill
        # has it unless the worker died before the send, which the hand-off can tell.
        rendezvous.send_if_lost(client, request_id)
        return None
    failure, prompt = None, None
    if spec is None:
        failure = ("expired", "The request expired before it was processed.")
    elif cancelled:
        failure = ("cancelled", "Cancelled before processing.")
    else:
        try:
            system_prompt, history = prompt_parts(spec)
            if handover.asks_for_person(history[-1]["content"], spec.handover_patterns):
                # No prompt, no model call: the reply is the hand-over (pipeline.outcomes).
                rendezvous.report(client, request_id, rendezvous.cpu_failed(
                    HANDOVER, spec.handover_text or handover.DEFAULT_TEXT))
                return None
            hits = _knowledge_hits(spec, history)
            if hits == [] and spec.retrieval and spec.handover_ungrounded:
                # The knowledge has nothing above the tenant's minimum score: a person
                # answers rather than the model guessing (a failed read, None, does not
                # count: that is an outage, not an unanswerable question).
                rendezvous.report(client, request_id, rendezvous.cpu_failed(
                    HANDOVER_UNGROUNDED, spec.handover_text or handover.DEFAULT_TEXT))
                return None
            hits = hits or []
            context_room = max(16, settings.TANDEM_MAX_CONTEXT - spec.sampling.max_tokens)
            prompt = build_prompt(
                get_tokenizer(), system_prompt=system_prompt, history=history,
                max_prompt_tokens=min(spec.max_prompt_tokens, context_room),
                knowledge=[passage(h) for h in hits] if spec.retrieval else None,
            )
            spec.sources = sources_of(hits[:prompt.knowledge_used])
        except PromptTooLong as exc:
            failure = ("prompt_too_long", str(exc))
        except ValueError as exc:  # TextRejected, or a value no prompt can take
            failure = (getattr(exc, "code", "invalid_message"), str(exc))
    # The web tier enqueued this before storing the message rows: the request goes on
    # (or fails) once both the rows and the prompt are done, by whichever comes second.
    disarm()  # the request's own work is done: its time budget (tasks) ends before the reports
    if failure:
        rendezvous.report(client, request_id, rendezvous.cpu_failed(*failure))
        return None
    spec.prompt_token_ids = prompt.token_ids
    # Visitor-written text is never shared across conversations (inference.text.cache_scope).
    spec.cache_salt = cache_scope.prompt_salt(tenant_id=spec.tenant_id, channel=spec.channel,
                                              conversation_id=spec.conversation_id)
    spec.cache_shared_salt = cache_scope.tenant_salt(spec.tenant_id)
    spec.cache_shared_tokens = cache_scope.shared_prefix_tokens(
        get_tokenizer(), prompt.token_ids, system_prompt=system_prompt, encode=_encode)
    spec.system_prompt, spec.prompt_messages = "", []  # the ids replace them for every later tier
    tier, task = ("colocated", broker.COLOCATED) if spec.colocated else ("prefill", broker.PREFILL)
    queue = broker.queue_name(tier, spec.prefill_pool)

    def state(pipe):
        # The spec the model tier fetches, and the stream's progress record, in the same
        # transaction as the report.
        save(pipe, spec)
        streams.append(pipe, request_id, [streams.status_record("prefilling", f"queued on {queue}")])

    done = rendezvous.report(client, request_id, rendezvous.cpu_ready(
        task=task, queue=queue, priority=broker.broker_priority(spec.priority)), state)
    if done == rendezvous.SENT:
        # The rows are committed (this report completed the pair). Written after the
        # send, off the way to the first token. When the web tier's commit completes the
        # pair instead, the status goes from "queued" straight to "decoding".
        outcomes.message_set_status(request_id=request_id, status="prefilling")
    return queue


def knowledge_hits(spec: RequestSpec, history: list[dict]) -> list[Hit]:
    """The tenant's passages for the newest user message (and a few words of the one
    before it), best first; [] when the tenant has knowledge off. A failed read costs
    the reply its grounding, not the reply."""
    return _knowledge_hits(spec, history) or []


def _knowledge_hits(spec: RequestSpec, history: list[dict]) -> list[Hit] | None:
    """knowledge_hits, but None when the read failed."""
    r = spec.retrieval
    if not r:
        return []
    users = [m["content"] for m in history if m["role"] == "user"]
    try:
        return retrieve(tenant_id=spec.tenant_id, message=users[-1], context=users[-2] if len(users) > 1 else "",
                        k=int(r.get("k", 3)), min_score=float(r.get("min_score", 0.0)),
                        language=str(r.get("language", "english")), mode=str(r.get("mode", "hybrid")))
    except DatabaseError:
        log.warning("retrieval failed for %s; answering without knowledge", spec.request_id, exc_info=True)
        return None


def prompt_parts(spec: RequestSpec) -> tuple[str | None, list[dict]]:
    """(system prompt, history) for build_prompt from the spec's inputs. An integrator's
    own system messages (REST) follow the tenant's system prompt; replies with no text
    are left out; the last message must be the user's, and is validated again here."""
    extra_system, history = [], []
    for m in spec.prompt_messages:
        if m["role"] == "system":
            extra_system.append(m["content"])
        elif m["role"] == "assistant" and not m["content"]:
            continue
        else:
            history.append({"role": m["role"], "content": m["content"]})
    if not history or history[-1]["role"] != "user":
        raise TextRejected("The conversation must end with a user message.")
    history[-1]["content"] = clean_user_text(history[-1]["content"])
    system_prompt = "\n\n".join(
        p for p in [spec.system_prompt, *extra_system, language_instruction(spec.locale)] if p) or None
    return system_prompt, _alternating(history)


def _alternating(history: list[dict]) -> list[dict]:
    """Merge consecutive messages of the same role (e.g. a user who sent two messages
    while no reply came): chat templates expect user and assistant to alternate."""
    merged: list[dict] = []
    for m in history:
        if merged and merged[-1]["role"] == m["role"]:
            merged[-1] = {"role": m["role"], "content": merged[-1]["content"] + "\n\n" + m["content"]}
        else:
            merged.append(dict(m))
    return merged
