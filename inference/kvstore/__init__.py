"""The KV store: hands one sequence's prompt KV cache from a prefill worker to a decode worker.

Backends: `RedisKVStore` (the default; works across hosts) and `SharedMemoryKVStore`
(same host, files under /dev/shm). `from_url` picks one from a URL so deployments choose
by configuration. The byte format lives in `codec`, the interface in `base`, the errors in `errors`.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from inference.kvstore.base import KVStore
from inference.kvstore.errors import KVCorrupt, KVError, KVMismatch, KVMissing
from inference.kvstore.redis_store import DEFAULT_PREFIX, RedisKVStore
from inference.kvstore.shm_store import DEFAULT_ROOT, SharedMemoryKVStore

__all__ = [
    "KVCorrupt",
    "KVError",
    "KVMismatch",
    "KVMissing",
    "KVStore",
    "RedisKVStore",
    "SharedMemoryKVStore",
    "from_url",
]


def from_url(url: str, *, prefix: str = DEFAULT_PREFIX) -> KVStore:
    """`redis://`, `rediss://`, `unix://` → RedisKVStore (with `prefix`);
    `shm:///dir` or `file:///dir` → SharedMemoryKVStore (`shm://` alone: /dev/shm/tandem-kv).
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("redis", "rediss", "unix"):
        return RedisKVStore(url, prefix=prefix)
    if scheme in ("shm", "file"):
        if parts.netloc not in ("", "localhost"):
            raise ValueError(
                f"{url!r}: a {scheme}:// KV store is local; write {scheme}:///absolute/dir"
            )
        path = unquote(parts.path)
        if not path and scheme == "shm":
            path = DEFAULT_ROOT
        if not path.startswith("/"):
            raise ValueError(
                f"{url!r}: expected an absolute directory, as in {scheme}:///dev/shm/tandem-kv"
            )
        return SharedMemoryKVStore(path)
    raise ValueError(f"unknown KV store URL {url!r}; use redis://host:port/db or shm:///dir")
