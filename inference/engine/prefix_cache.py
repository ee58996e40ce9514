"""The prefix cache: KV of prompt prefixes already computed, reused by later prompts that
start the same way (a tenant's system prompt, the earlier turns of a conversation).

Owns the cached blocks and their eviction. Keys are chained hashes of block-aligned
prefixes: block i's key hashes block i-1's key and block i's token ids, and the chain's
root hashes the model fingerprint and the tenant's salt. So a hit means "this exact
prefix, these weights, this tenant": one salt can never read another's entry, and a
different model can never reuse stale KV. LRU over blocks within a token budget; a hit
refreshes its chain parents-last, so children are evicted before the parents they need.
"""

from __future__ import annotations

import hashlib
import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass

import torch


@dataclass
class PrefixHit:
    tokens: int  # prompt tokens covered, a multiple of the block size
    k: torch.Tensor  # [L, Hkv, tokens, D]
    v: torch.Tensor  # [L, Hkv, tokens, D]


@dataclass(frozen=True)
class SharedPrefix:
    """The leading tokens of a prompt that may reuse entries made under another salt: a
    tenant's system prompt, which every one of its conversations starts with, while
    what follows it stays under the conversation's own salt. The first
    `tokens // block_size` blocks chain from `salt`; the chain then switches to the
    request's salt, so no block after the switch matches a prompt of another salt."""

    salt: str
    tokens: int


@dataclass(frozen=True)
class PrefixCacheStats:
    hits: int
    misses: int
    hit_tokens: int
    blocks: int
    tokens: int
    max_tokens: int


class PrefixCache:
    def __init__(self, *, fingerprint: str, max_tokens: int, block_size: int = 32):
        if block_size < 1:
            raise ValueError("block_size must be positive")
        self.fingerprint = fingerprint
        self.block_size = block_size
        self.max_blocks = max_tokens // block_size
        self._blocks: OrderedDict[bytes, tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = self._hit_tokens = 0

    def _root(self, salt: str | None) -> bytes:
        root = hashlib.blake2b(digest_size=16)
        root.update(self.fingerprint.encode())
        root.update(b"\0salt\0" + (salt or "").encode())
        return root.digest()

    def _chain(self, token_ids: list[int], salt: str | None, n_blocks: int,
               shared: SharedPrefix | None = None) -> list[bytes]:
        bs = self.block_size
        shared_blocks = min(n_blocks, shared.tokens // bs) if shared is not None else 0
        keys, prev = [], self._root(shared.salt if shared_blocks else salt)
        for i in range(n_blocks):
            if shared_blocks and i == shared_blocks:  # the shared prefix ends: the request's salt from here
                prev = hashlib.blake2b(prev + b"\0switch\0" + (salt or "").encode(), digest_size=16).digest()
            h = hashlib.blake2b(prev, digest_size=16)
            h.update(array("q", token_ids[i * bs : (i + 1) * bs]).tobytes())
            prev = h.digest()
            keys.append(prev)
        return keys

    def lookup(self, token_ids: list[int], salt: str | None,
               shared: SharedPrefix | None = None) -> PrefixHit | None:
        """The longest cached block-aligned prefix, leaving at least one token to compute
        (the prefill needs the last prompt token's logits)."""
        n_blocks = (len(token_ids) - 1) // self.block_size
        if self.max_blocks == 0 or n_blocks == 0:
            return None
        keys = self._chain(token_ids, salt, n_blocks, shared)
        with self._lock:
            found: list[tuple[torch.Tensor, torch.Tensor]] = []
            for key in keys:
                block = self._blocks.get(key)
                if block is None:
                    break
                found.append(block)
            for key in reversed(keys[: len(found)]):
                self._blocks.move_to_end(key)
            if not found:
                self._misses += 1
                return None
            self._hits += 1
            self._hit_tokens += len(found) * self.block_size
        k = torch.cat([b[0] for b in found], dim=2)
        v = torch.cat([b[1] for b in found], dim=2)
        return PrefixHit(tokens=len(found) * self.block_size, k=k, v=v)

    def insert(self, token_ids: list[int], salt: str | None, k: torch.Tensor, v: torch.Tensor,
               shared: SharedPrefix | None = None) -> int:
        """Remember every full block of a prompt whose KV k, v [L, Hkv, >=len, D] was just
        computed. Returns the number of new blocks."""
        bs = self.block_size
        n_blocks = min(len(token_ids), int(k.shape[2])) // bs
        n_blocks = min(n_blocks, self.max_blocks)
        if n_blocks == 0:
            return 0
        keys = self._chain(token_ids, salt, n_blocks, shared)
        added = 0
        with self._lock:
            for i, key in enumerate(keys):
                if key not in self._blocks:
                    # clone: a slice would keep the whole prompt's KV alive.
                    self._blocks[key] = (k[:, :, i * bs : (i + 1) * bs].clone(),
                                         v[:, :, i * bs : (i + 1) * bs].clone())
                    added += 1
            for key in reversed(keys):
                self._blocks.move_to_end(key)
            while len(self._blocks) > self.max_blocks:
                self._blocks.popitem(last=False)
        return added

    def clear(self) -> None:
        with self._lock:
            self._blocks.clear()

    def stats(self) -> PrefixCacheStats:
        with self._lock:
            return PrefixCacheStats(
                hits=self._hits, misses=self._misses, hit_tokens=self._hit_tokens,
                blocks=len(self._blocks), tokens=len(self._blocks) * self.block_size,
                max_tokens=self.max_blocks * self.block_size,
            )
