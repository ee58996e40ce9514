"""The request spec: what every tier needs to know about one request, kept in Redis
under `tandem:req:<id>` so that no tier queries the database on the way to the first
token. The web tier writes it with the prompt's inputs (the conversation as it read it
for this message); the CPU tier turns those into prompt token ids."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import redis

from . import keys

REQUEST_TTL_S = 3600


@dataclass
class Sampling:
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    # Repetition control and bias, as inference.engine.penalties defines them (off by default).
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: list[list] = field(default_factory=list)  # [[token id, bias], …]
    # The llguidance grammar the reply must stay inside (inference.engine.grammar): a
    # response_format's JSON schema, compiled and checked by the web tier; "" = free.
    grammar: str = ""
    # Each token's logprob in the stream's token records, with this many alternatives.
    logprobs: bool = False
    top_logprobs: int = 0


@dataclass
class RequestSpec:
    request_id: str  # the assistant message's UUID
    tenant_id: int
    api_key_id: int | None
    conversation_id: str
    channel: str
    sampling: Sampling
    priority: int = 0
    max_decode_slots: int | None = None
    prefill_pool: str = "shared"
    decode_pool: str = "shared"
    colocated: bool = False
    # The prompt's inputs, written by the web tier: the tenant's system prompt and its
    # prompt limit when the message was sent, and the conversation ({"role", "content"},
    # oldest first, ending with the new user message). The CPU tier validates and builds
    # the prompt from these alone, then empties them: the model tiers need only the ids.
    system_prompt: str = ""
    prompt_messages: list[dict] = field(default_factory=list)
    max_prompt_tokens: int = 0
    # "Talk to a person" in words (inference.text.handover): the tenant's patterns, one a
    # line ("" the built-in set, "-" off), and what the assistant says when they match.
    handover_patterns: str = "-"
    handover_text: str = ""
    handover_ungrounded: bool = False  # hand over when retrieval finds nothing above its min_score
    # The visitor's language as the widget sends it ("fr", "de"; "" unknown): the CPU tier
    # asks the model to answer in it (inference.text.prompting.language_instruction).
    locale: str = ""
    # The tenant's retrieval settings, written by the web tier: {"k", "min_score",
    # "language"}; empty when the tenant has knowledge off (the CPU tier then makes no
    # database read at all).
    retrieval: dict = field(default_factory=dict)
    # Filled in by the CPU tier:
    prompt_token_ids: list[int] = field(default_factory=list)
    cache_salt: str = ""  # the prompt's prefix-cache namespace (inference.text.cache_scope)
    # The first cache_shared_tokens tokens (the tenant's system prompt) are cached under
    # cache_shared_salt, shared by all its conversations; the rest under cache_salt.
    cache_shared_salt: str = ""
    cache_shared_tokens: int = 0
    # The articles whose passages the prompt holds, best first ({"article_id", "title",
    # "url", "score"}): carried to the reply's end record and its citations.
    sources: list[dict] = field(default_factory=list)
    enqueued_at: float = 0.0

    def to_json(self) -> str:
        # Not dataclasses.asdict: it deep-copies every element of the token id list,
        # which cost more than the rest of the save on a ~70-token prompt.
        return json.dumps({**vars(self), "sampling": asdict(self.sampling)})

    @classmethod
    def from_json(cls, raw: str | bytes) -> RequestSpec:
        data = json.loads(raw)
        data["sampling"] = Sampling(**data["sampling"])
        return cls(**data)


def save(client: redis.Redis, spec: RequestSpec) -> None:
    client.set(keys.request(spec.request_id), spec.to_json(), ex=REQUEST_TTL_S)


def load(client: redis.Redis, request_id: str) -> RequestSpec | None:
    raw = client.get(keys.request(request_id))
    return RequestSpec.from_json(raw) if raw else None


def load_with_cancel(client: redis.Redis, request_id: str) -> tuple[RequestSpec | None, bool]:
    """The spec and whether the request was cancelled, in one round trip: every tier asks
    both before it starts, and each round trip is on the time to first token."""
    pipe = client.pipeline(transaction=False)
    pipe.get(keys.request(request_id))
    pipe.exists(keys.cancel(request_id))
    raw, cancelled = pipe.execute()
    return (RequestSpec.from_json(raw) if raw else None), bool(cancelled)
