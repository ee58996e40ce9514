"""The KV store contract: the `KVStore` interface and the errors every backend raises.

The KV store owns the handoff of one sequence's prompt KV cache from a prefill worker to
a decode worker: a leased (TTL) entry, keyed by request id, read exactly once. It never
returns wrong data: anything it cannot vouch for is an error, and the caller answers any
`KVError` by recomputing the prefill.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

import torch

from inference.engine.kv import KVCache
from inference.kvstore import codec

# Request ids become Redis keys and file names, so they are kept to a safe alphabet
# (the assistant Message's UUID fits). A leading dot is refused because the shared
# memory backend uses dot-names for its temporary and claimed files.
_REQUEST_ID_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")


def check_request_id(request_id: str) -> str:
    if not isinstance(request_id, str) or not _REQUEST_ID_RE.fullmatch(request_id):
        raise ValueError(
            f"request id {request_id!r} must be 1-200 characters of [A-Za-z0-9._-], "
            "not starting with a dot"
        )
    return request_id


class KVStore(ABC):
    """Moves a `KVCache` from one process (or host) to another, once.

    `put` leases an entry for `ttl_s` seconds; `take` reads and removes it in one atomic
    step, so two decode workers can never both load the same cache. A reader that knows
    what it serves passes `expected_*` so that a cache from other weights, another dtype
    or another geometry is refused (`KVMismatch`) instead of silently decoded. A
    refused entry is consumed all the same: the caller recomputes it anyway.
    """

    @abstractmethod
    def put(self, request_id: str, kv: KVCache, *, ttl_s: float) -> int:
        """Store `kv` under `request_id` for `ttl_s` seconds, replacing any earlier entry.

        Returns the number of bytes stored (header included).
        """

    def take(
        self,
        request_id: str,
        *,
        expected_fingerprint: str | None = None,
        expected_dtype: torch.dtype | None = None,
        expected_shape: tuple[int, int, int] | None = None,
    ) -> KVCache:
        """Read and delete the entry atomically.

        `expected_shape` is (layers, kv_heads, head_dim); the sequence length is free.
        Raises `KVMissing`, `KVCorrupt` or `KVMismatch`.
        """
        return codec.decode(
            self._take_bytes(request_id),
            request_id=request_id,
            now=self._expiry_clock(),
            expected_fingerprint=expected_fingerprint,
            expected_dtype=expected_dtype,
            expected_shape=expected_shape,
        )

    @abstractmethod
    def _take_bytes(self, request_id: str) -> bytes | bytearray:
        """Remove the stored entry and return its bytes, in one atomic step; raise
        `KVMissing` when there is none (or `KVCorrupt` when it cannot be read whole)."""

    def _expiry_clock(self) -> float | None:
        """The time the header's expiry is checked against on take; None where the
        backend's own TTL is the lease and the header's expiry is not checked."""
        return None

    @abstractmethod
    def delete(self, request_id: str) -> bool:
        """Drop the entry (an abandoned request); True if there was one."""

    @abstractmethod
    def exists(self, request_id: str) -> bool:
        """True while an unexpired entry is stored under `request_id`."""

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release connections or handles the store holds."""
