"""The KV store hands a cache over exactly once, bit for bit, or says why it cannot."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import uuid

import pytest
import redis
import torch

from inference.engine.kv import KVCache
from inference.kvstore import (
    KVCorrupt,
    KVMismatch,
    KVMissing,
    RedisKVStore,
    SharedMemoryKVStore,
    from_url,
)


def redis_url() -> str:
    # The shared conftest exports REDIS_URL (CI's database, or an embedded server);
    # keys here live under a unique prefix, so sharing that database is safe.
    return os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")


FINGERPRINT = "smollm2-135m-instruct@test"


@pytest.fixture
def kv_redis():
    client = redis.Redis.from_url(redis_url())
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.fail(f"Redis is needed at {redis_url()} (REDIS_URL): {exc}")
    yield client
    client.close()


@pytest.fixture
def shm_dir():
    # /dev/shm is where production puts it; fall back to the temp dir where it is absent.
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    path = tempfile.mkdtemp(prefix="tandem-kv-test-", dir=base)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["redis", "shm"])
def store(request, kv_redis, shm_dir):
    if request.param == "shm":
        yield SharedMemoryKVStore(shm_dir)
        return
    prefix = f"test:kv:{uuid.uuid4().hex}:"
    yield RedisKVStore(kv_redis, prefix=prefix)
    for key in kv_redis.scan_iter(match=prefix + "*"):
        kv_redis.delete(key)


def make_kv(
    *, dtype=torch.bfloat16, layers=30, heads=3, length=60, dim=64, fingerprint=FINGERPRINT
):
    gen = torch.Generator().manual_seed(length)
    k = torch.randn(layers, heads, length, dim, generator=gen).to(dtype)
    v = torch.randn(layers, heads, length, dim, generator=gen).to(dtype)
    return KVCache(k=k, v=v, model_fingerprint=fingerprint)


def bits(t: torch.Tensor) -> torch.Tensor:
    # Compare raw bytes, so NaN payloads and -0.0 count as equal only when identical.
    return t.contiguous().view(torch.uint8)


def read_raw(store, request_id: str) -> bytes:
    if isinstance(store, RedisKVStore):
        return store._redis.get(store.key(request_id))
    with open(store.path(request_id), "rb") as f:
        return f.read()


def write_raw(store, request_id: str, data: bytes) -> None:
    if isinstance(store, RedisKVStore):
        store._redis.set(store.key(request_id), data, keepttl=True)
    else:
        path = store.path(request_id)
        mtime = os.stat(path).st_mtime  # keep the lease the sweep reads
        with open(path, "wb") as f:
            f.write(data)
        os.utime(path, (mtime, mtime))


def flip(data: bytes, index: int) -> bytes:
    out = bytearray(data)
    out[index] ^= 0x01
    return bytes(out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_round_trip_preserves_tensors_bit_for_bit(store, dtype):
    kv = make_kv(dtype=dtype)
    kv.k[0, 0, 0, :3] = torch.tensor([float("nan"), float("inf"), -0.0], dtype=dtype)
    stored = store.put("req-1", kv, ttl_s=30)
    out = store.take("req-1", expected_fingerprint=FINGERPRINT, expected_dtype=dtype)
    assert stored > kv.nbytes
    assert out.model_fingerprint == FINGERPRINT
    assert out.k.dtype == out.v.dtype == dtype
    assert out.k.shape == out.v.shape == (30, 3, 60, 64)
    assert torch.equal(bits(out.k), bits(kv.k))
    assert torch.equal(bits(out.v), bits(kv.v))


def test_non_contiguous_tensors_are_stored_in_logical_order(store):
    base = torch.randn(30, 60, 3, 64)
    kv = KVCache(k=base.transpose(1, 2), v=base.transpose(1, 2) * 2, model_fingerprint="m")
    store.put("req-nc", kv, ttl_s=30)
    out = store.take("req-nc")
    assert torch.equal(out.k, kv.k) and torch.equal(out.v, kv.v)


def test_take_consumes_the_entry(store):
    store.put("req-1", make_kv(), ttl_s=30)
    assert store.exists("req-1")
    store.take("req-1")
    assert not store.exists("req-1")
    with pytest.raises(KVMissing, match="req-1"):
        store.take("req-1")


def test_only_one_of_many_concurrent_takers_gets_the_cache(store):
    store.put("req-race", make_kv(length=8), ttl_s=30)
    barrier, results = threading.Barrier(8), []

    def taker():
        barrier.wait()
        try:
            results.append(store.take("req-race").length)
        except KVMissing:
            results.append("missing")

    threads = [threading.Thread(target=taker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert sorted(results, key=str) == [8] + ["missing"] * 7


def test_put_replaces_an_earlier_entry(store):
    store.put("req-1", make_kv(length=5), ttl_s=30)
    store.put("req-1", make_kv(length=7), ttl_s=30)
    assert store.take("req-1").length == 7


def test_delete_drops_the_entry(store):
    store.put("req-1", make_kv(), ttl_s=30)
    assert store.delete("req-1") is True
    assert store.delete("req-1") is False
    with pytest.raises(KVMissing):
        store.take("req-1")


def test_expired_entry_goes_away_by_itself(store):
    started = time.monotonic()
    store.put("req-short", make_kv(length=4), ttl_s=0.2)
    if time.monotonic() - started < 0.15:  # only meaningful while still inside the lease
        assert store.exists("req-short")
    deadline = time.monotonic() + 5.0
    while store.exists("req-short"):
        assert time.monotonic() < deadline, "entry outlived its 0.2 s lease by 5 s"
        time.sleep(0.02)
    with pytest.raises(KVMissing):
        store.take("req-short")


def test_shm_take_refuses_an_expired_file_even_before_a_sweep(shm_dir):
    store = SharedMemoryKVStore(shm_dir)
    store.put("req-old", make_kv(length=4), ttl_s=0.1)
    expires = os.stat(store.path("req-old")).st_mtime
    while time.time() <= expires:  # wait on the clock, not a guessed duration
        time.sleep(0.01)
    os.utime(store.path("req-old"), (expires + 3600, expires + 3600))  # hide it from the sweep
    with pytest.raises(KVMissing, match="expired"):
        store.take("req-old")


def test_shm_sweep_removes_expired_files_and_orphans(shm_dir):
    store = SharedMemoryKVStore(shm_dir, orphan_grace_s=0.0)
    store.put("req-old", make_kv(length=4), ttl_s=0.05)
    open(os.path.join(shm_dir, ".tmp-req-crashed-1-ab"), "wb").close()
    expires = os.stat(store.path("req-old")).st_mtime
    while time.time() <= expires:
        time.sleep(0.01)
    store.put("req-new", make_kv(length=4), ttl_s=30)  # the put sweeps first
    assert os.listdir(shm_dir) == ["req-new.kv"]


@pytest.mark.parametrize("where", ["payload", "header", "digest"])
def test_flipped_byte_is_reported_as_corrupt(store, where):
    store.put("req-1", make_kv(), ttl_s=30)
    data = read_raw(store, "req-1")
    index = {
        "payload": len(data) - 100,
        "header": data.index(b"fingerprint") + 16,
        "digest": data.index(b"}") + 5,
    }
    write_raw(store, "req-1", flip(data, index[where]))
    with pytest.raises(KVCorrupt):
        store.take("req-1", expected_fingerprint=FINGERPRINT)
    assert not store.exists("req-1")  # consumed: the caller recomputes instead


@pytest.mark.parametrize("keep", [5, 100, -1])
def test_truncated_entry_is_reported_as_corrupt(store, keep):
    store.put("req-1", make_kv(), ttl_s=30)
    data = read_raw(store, "req-1")
    write_raw(store, "req-1", data[:keep])
    with pytest.raises(KVCorrupt):
        store.take("req-1")


def test_foreign_bytes_are_reported_as_corrupt(store):
    store.put("req-1", make_kv(length=2), ttl_s=30)
    write_raw(store, "req-1", b"hello, not a cache")
    with pytest.raises(KVCorrupt, match="not a Tandem KV entry"):
        store.take("req-1")


@pytest.mark.parametrize(
    ("expectation", "message"),
    [
        ({"expected_fingerprint": "llama-3-8b@other"}, "computed by model"),
        ({"expected_dtype": torch.float32}, "dtype"),
        ({"expected_shape": (24, 8, 128)}, "layers, kv_heads, head_dim"),
    ],
)
def test_cache_for_another_model_is_refused(store, expectation, message):
    store.put("req-1", make_kv(dtype=torch.bfloat16), ttl_s=30)
    with pytest.raises(KVMismatch, match=message):
        store.take("req-1", **expectation)


def test_matching_expectations_are_accepted(store):
    store.put("req-1", make_kv(), ttl_s=30)
    out = store.take(
        "req-1",
        expected_fingerprint=FINGERPRINT,
        expected_dtype=torch.bfloat16,
        expected_shape=(30, 3, 64),
    )
    assert out.length == 60


@pytest.mark.parametrize("bad_id", ["", "../etc/passwd", ".tmp-x", "a/b", "x" * 201])
def test_unsafe_request_ids_are_rejected(store, bad_id):
    with pytest.raises(ValueError, match="request id"):
        store.put(bad_id, make_kv(length=1), ttl_s=30)


def test_malformed_caches_are_rejected_at_put(store):
    with pytest.raises(ValueError, match="k and v"):
        store.put(
            "r",
            KVCache(k=torch.zeros(2, 1, 3, 4), v=torch.zeros(2, 1, 4, 4), model_fingerprint="m"),
            ttl_s=1,
        )
    with pytest.raises(ValueError, match="empty"):
        store.put(
            "r",
            KVCache(k=torch.zeros(2, 1, 0, 4), v=torch.zeros(2, 1, 0, 4), model_fingerprint="m"),
            ttl_s=1,
        )
    with pytest.raises(ValueError, match="ttl_s"):
        store.put("r", make_kv(length=1), ttl_s=0)
    assert not store.exists("r")


def test_from_url_picks_the_backend(shm_dir):
    redis_store = from_url(redis_url(), prefix="t:")
    assert isinstance(redis_store, RedisKVStore) and redis_store.key("abc") == "t:abc"
    redis_store.close()
    for scheme in ("shm", "file"):
        shm_store = from_url(f"{scheme}://{shm_dir}")
        assert isinstance(shm_store, SharedMemoryKVStore) and shm_store.root == shm_dir
    with pytest.raises(ValueError, match="unknown KV store URL"):
        from_url("s3://bucket/kv")
    with pytest.raises(ValueError, match="local"):
        from_url("shm://otherhost/dev/shm")


def test_redis_store_refuses_a_decoding_client():
    with pytest.raises(ValueError, match="decode_responses"):
        RedisKVStore(redis.Redis.from_url(redis_url(), decode_responses=True))
