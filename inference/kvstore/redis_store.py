"""The Redis KV store backend: the default, and the one that works across hosts.

One Redis string per request, `<prefix><request_id>`, set with a millisecond TTL so an
entry nobody takes (a decode worker died, the client left) goes away by itself. Redis's
TTL is the lease: the header's expiry is not checked here, because prefill and decode
hosts' clocks need not agree while the Redis server's clock is the one that counts.
"""

from __future__ import annotations

import time

import redis

from inference.engine.kv import KVCache
from inference.kvstore import codec
from inference.kvstore.base import KVStore, check_request_id
from inference.kvstore.errors import KVMissing

DEFAULT_PREFIX = "tandem:kv:"


class RedisKVStore(KVStore):
    def __init__(
        self, redis_client_or_url: redis.Redis | str, *, prefix: str = DEFAULT_PREFIX
    ) -> None:
        if isinstance(redis_client_or_url, str):
            self._redis = redis.Redis.from_url(redis_client_or_url)
            self._owns_client = True
        else:
            self._redis = redis_client_or_url
            self._owns_client = False
        # A client that decodes replies to str would mangle the binary payload.
        kwargs = getattr(self._redis, "connection_pool", None)
        if kwargs is not None and kwargs.connection_kwargs.get("decode_responses"):
            raise ValueError("RedisKVStore needs a client with decode_responses=False")
        self.prefix = prefix
        self._has_getdel: bool | None = None  # learnt on first take; GETDEL needs Redis >= 6.2

    def key(self, request_id: str) -> str:
        return self.prefix + check_request_id(request_id)

    def put(self, request_id: str, kv: KVCache, *, ttl_s: float) -> int:
        entry = codec.encode(kv, created_at=time.time(), ttl_s=ttl_s)
        value = entry.join()
        # Round up so a short TTL never becomes 0 ms (which Redis rejects).
        self._redis.set(
            self.key(request_id), memoryview(value), px=max(1, int(ttl_s * 1000 + 0.999))
        )
        return len(value)

    def _take_bytes(self, request_id: str) -> bytes:
        value = self._getdel(self.key(request_id))
        if value is None:
            raise KVMissing(
                f"no KV entry {request_id!r} in Redis (never stored, already taken, or expired)"
            )
        return value

    def _getdel(self, key: str) -> bytes | None:
        if self._has_getdel is not False:
            try:
                value = self._redis.getdel(key)
                self._has_getdel = True
                return value
            except redis.ResponseError as exc:
                if "unknown command" not in str(exc).lower():
                    raise
                self._has_getdel = False
        # Older servers: GET and DEL inside MULTI/EXEC are just as atomic.
        pipe = self._redis.pipeline(transaction=True)
        pipe.get(key)
        pipe.delete(key)
        value, _ = pipe.execute()
        return value

    def delete(self, request_id: str) -> bool:
        return bool(self._redis.delete(self.key(request_id)))

    def exists(self, request_id: str) -> bool:
        return bool(self._redis.exists(self.key(request_id)))

    def close(self) -> None:
        if self._owns_client:
            self._redis.close()

    def __repr__(self) -> str:
        return f"RedisKVStore(prefix={self.prefix!r})"
