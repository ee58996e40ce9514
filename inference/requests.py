"""The request spec: what every tier needs to know about one request, kept in Redis
under `tandem:req:<id>` so that model workers never have to query the database on the
hot path. The web tier writes the first half; the CPU tier adds the prompt."""

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
    # Filled in by the CPU tier:
    prompt_token_ids: list[int] = field(default_factory=list)
    cache_salt: str = ""  # the tenant's prefix-cache namespace
    enqueued_at: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

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
