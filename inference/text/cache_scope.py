"""Which part of a prompt may be shared in the prefix cache, and under which salt.

The prefix cache (inference/engine/prefix_cache.py) keys every block on a chain rooted
in one salt: a prompt can only hit blocks cached under the same salt. Sharing a block
across two prompts tells the second one (through `cached_tokens`, or its time to first
token) that the first held the same text. So:

- the tenant's own content (its system prompt, and the knowledge placed after it) is
  safe to share across all of the tenant's conversations: every visitor sees the same;
- what a visitor wrote is not: a widget prompt is salted per conversation, so nobody
  can probe for another visitor's words (issue 19, finding 2).

A REST request is the tenant's own server speaking with its secret key: it keeps the
tenant salt (the key holder can only learn about its own prompts).

`shared_prefix_tokens` is the length of the tenant-owned prefix of a prompt: the engine
caches that many tokens (in whole blocks) under the tenant salt and the rest under the
conversation's (`engine.prefix_cache.SharedPrefix`); see docs/security.md."""

from __future__ import annotations

from typing import Any

WIDGET_CHANNEL = "widget"


def tenant_salt(tenant_id: int | str) -> str:
    return f"tenant:{tenant_id}"


def prompt_salt(*, tenant_id: int | str, channel: str, conversation_id: str) -> str:
    """The salt a prompt's own part is cached under (after its shared prefix)."""
    if channel == WIDGET_CHANNEL:
        return f"{tenant_salt(tenant_id)}:conversation:{conversation_id}"
    return tenant_salt(tenant_id)


def shared_prefix_tokens(tokenizer: Any, token_ids: list[int], *, system_prompt: str | None,
                         encode: Any) -> int:
    """How many leading tokens of `token_ids` are the tenant's (its system prompt as the
    template renders it): the common prefix with the same system prompt before an empty
    user turn. `encode(tokenizer, system_prompt, messages)` is the prompt builder's."""
    if not system_prompt:
        return 0
    probe = encode(tokenizer, system_prompt, [{"role": "user", "content": ""}])
    n = 0
    for a, b in zip(token_ids, probe, strict=False):
        if a != b:
            break
        n += 1
    return n
