"""The byte format of one stored KV entry, shared by every backend.

Layout (all integers little-endian):

    b"TANDEMKV" | u32 header_len | header (UTF-8 JSON) | u32 CRC-32 | payload

The JSON header names the format version, model fingerprint, dtype, geometry (layers,
kv heads, sequence length, head dim), payload size and the created/expiry wall-clock
times. The payload is the raw bytes of k then v, each [L, Hkv, S, D] in C order. The
checksum covers the header JSON and the payload, so a flipped bit anywhere past the magic
is caught as `KVCorrupt` rather than read as a different (wrong) cache.

CRC-32 rather than a cryptographic digest: it guards against accidents (truncation, a
torn write, a bit flip), not against someone who can write to the store, and it runs
several times faster than blake2b over a prompt's megabytes of KV, time that the
decode worker otherwise spends on its own core beside the running batch.
Version 1 entries (blake2b) read as corrupt, so the caller recomputes them.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass

import numpy as np
import torch

from inference.engine.kv import KVCache
from inference.kvstore.errors import KVCorrupt, KVMismatch, KVMissing

FORMAT_VERSION = 2
MAGIC = b"TANDEMKV"
_LEN = struct.Struct("<I")
_CRC = struct.Struct("<I")
DIGEST_SIZE = _CRC.size
PREFIX_SIZE = len(MAGIC) + _LEN.size
# A header is a few hundred bytes; anything far larger is garbage, not a header.
MAX_HEADER_SIZE = 64 * 1024

# The dtypes a KV cache is kept in; the name is what the header stores.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}
_DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}


@dataclass(frozen=True)
class EntryHeader:
    version: int
    fingerprint: str
    dtype: str
    layers: int
    kv_heads: int
    length: int
    head_dim: int
    payload_bytes: int
    created_at: float  # wall clock, seconds since the epoch
    expires_at: float
    digest: bytes
    payload_offset: int  # where the payload starts in the stored bytes
    raw_json: bytes  # exactly the bytes the digest covers, never re-serialised


@dataclass(frozen=True)
class EncodedEntry:
    """An entry as separate buffers, so a file backend can write it without joining."""

    head: bytes  # magic, length, JSON and digest
    k: np.ndarray  # uint8, flat view of the tensor's memory (no copy)
    v: np.ndarray

    @property
    def nbytes(self) -> int:
        return len(self.head) + self.k.nbytes + self.v.nbytes

    def join(self) -> bytearray:
        # One allocation and one copy per tensor; Redis needs a single value.
        out = bytearray(self.nbytes)
        view = memoryview(out)
        h, nk = len(self.head), self.k.nbytes
        view[:h] = self.head
        view[h : h + nk] = self.k
        view[h + nk :] = self.v
        return out


def _as_bytes(t: torch.Tensor) -> np.ndarray:
    # Viewing as uint8 is how bf16 (which numpy lacks) reaches raw bytes without a copy.
    return t.detach().to("cpu").contiguous().view(torch.uint8).numpy().reshape(-1)


def encode(kv: KVCache, *, created_at: float, ttl_s: float) -> EncodedEntry:
    k, v = kv.k, kv.v
    if k.dim() != 4 or k.shape != v.shape:
        raise ValueError(
            f"k and v must both be [L, Hkv, S, D]; got {tuple(k.shape)} and {tuple(v.shape)}"
        )
    if k.dtype != v.dtype or k.dtype not in _DTYPE_NAMES:
        raise ValueError(f"unsupported dtypes k={k.dtype} v={v.dtype}; use one of {list(DTYPES)}")
    if k.shape[2] == 0:
        raise ValueError("an empty KV cache (sequence length 0) has nothing to hand over")
    if not kv.model_fingerprint:
        raise ValueError("model_fingerprint must be a non-empty string")
    if not ttl_s > 0:
        raise ValueError(f"ttl_s must be positive, got {ttl_s}")
    kb, vb = _as_bytes(k), _as_bytes(v)
    layers, kv_heads, length, head_dim = (int(n) for n in k.shape)
    header = {
        "version": FORMAT_VERSION,
        "fingerprint": kv.model_fingerprint,
        "dtype": _DTYPE_NAMES[k.dtype],
        "layers": layers,
        "kv_heads": kv_heads,
        "length": length,
        "head_dim": head_dim,
        "payload_bytes": kb.nbytes + vb.nbytes,
        "created_at": created_at,
        "expires_at": created_at + ttl_s,
    }
    raw_json = json.dumps(header, separators=(",", ":")).encode()
    crc = zlib.crc32(vb, zlib.crc32(kb, zlib.crc32(raw_json)))
    head = MAGIC + _LEN.pack(len(raw_json)) + raw_json + _CRC.pack(crc)
    return EncodedEntry(head=head, k=kb, v=vb)


def header_size(prefix: bytes | bytearray | memoryview) -> int:
    """Bytes of the whole head (through the digest), given the first PREFIX_SIZE bytes."""
    if len(prefix) < PREFIX_SIZE or bytes(prefix[: len(MAGIC)]) != MAGIC:
        raise KVCorrupt("not a Tandem KV entry (bad magic or truncated before the header)")
    (json_len,) = _LEN.unpack_from(prefix, len(MAGIC))
    if json_len > MAX_HEADER_SIZE:
        raise KVCorrupt(f"header length {json_len} is implausible")
    return PREFIX_SIZE + json_len + DIGEST_SIZE


def parse_header(buf: bytes | bytearray | memoryview) -> EntryHeader:
    end = header_size(buf)
    if len(buf) < end:
        raise KVCorrupt(f"entry truncated inside its header ({len(buf)} of {end} bytes)")
    raw_json = bytes(buf[PREFIX_SIZE : end - DIGEST_SIZE])
    try:
        fields = json.loads(raw_json)
        return EntryHeader(
            version=int(fields["version"]),
            fingerprint=str(fields["fingerprint"]),
            dtype=str(fields["dtype"]),
            layers=int(fields["layers"]),
            kv_heads=int(fields["kv_heads"]),
            length=int(fields["length"]),
            head_dim=int(fields["head_dim"]),
            payload_bytes=int(fields["payload_bytes"]),
            created_at=float(fields["created_at"]),
            expires_at=float(fields["expires_at"]),
            digest=bytes(buf[end - DIGEST_SIZE : end]),
            payload_offset=end,
            raw_json=raw_json,
        )
    except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError is a ValueError
        raise KVCorrupt(f"unreadable entry header: {exc}") from exc


def decode(
    buf: bytes | bytearray,
    *,
    request_id: str,
    now: float | None = None,
    expected_fingerprint: str | None = None,
    expected_dtype: torch.dtype | None = None,
    expected_shape: tuple[int, int, int] | None = None,
) -> KVCache:
    """Check every byte of a stored entry and rebuild the cache, or raise a `KVError`.

    `now` enforces the header's expiry (for backends without a server-side TTL). A
    `bytearray` is wrapped without copying; read-only `bytes` are copied once.
    """
    h = parse_header(buf)
    where = f"KV entry {request_id!r}"
    if h.version != FORMAT_VERSION:
        raise KVMismatch(
            f"{where} has format version {h.version}; this reader knows {FORMAT_VERSION}"
        )
    if now is not None and now >= h.expires_at:
        raise KVMissing(f"{where} expired {now - h.expires_at:.3f}s ago")
    dtype = DTYPES.get(h.dtype)
    if dtype is None:
        raise KVCorrupt(f"{where} names an unknown dtype {h.dtype!r}")
    itemsize = torch.empty((), dtype=dtype).element_size()
    half = h.layers * h.kv_heads * h.length * h.head_dim * itemsize
    actual = len(buf) - h.payload_offset
    if min(h.layers, h.kv_heads, h.length, h.head_dim) <= 0 or h.payload_bytes != 2 * half:
        raise KVCorrupt(
            f"{where} header is inconsistent: payload_bytes {h.payload_bytes} != 2 x {half}"
        )
    if actual != h.payload_bytes:
        raise KVCorrupt(
            f"{where} payload is {actual} bytes, header says {h.payload_bytes} (truncated?)"
        )
    crc = zlib.crc32(memoryview(buf)[h.payload_offset :], zlib.crc32(h.raw_json))
    if _CRC.pack(crc) != h.digest:
        raise KVCorrupt(f"{where} fails its checksum")
    if expected_fingerprint is not None and h.fingerprint != expected_fingerprint:
        raise KVMismatch(
            f"{where} was computed by model {h.fingerprint!r}, expected {expected_fingerprint!r}"
        )
    if expected_dtype is not None and dtype != expected_dtype:
        raise KVMismatch(f"{where} has dtype {h.dtype}, expected {expected_dtype}")
    geometry = (h.layers, h.kv_heads, h.head_dim)
    if expected_shape is not None and geometry != tuple(expected_shape):
        raise KVMismatch(
            f"{where} has (layers, kv_heads, head_dim) {geometry}, expected {tuple(expected_shape)}"
        )
    shape = (h.layers, h.kv_heads, h.length, h.head_dim)
    k = _tensor(buf, h.payload_offset, half, dtype, shape)
    v = _tensor(buf, h.payload_offset + half, half, dtype, shape)
    return KVCache(k=k, v=v, model_fingerprint=h.fingerprint)


def _tensor(
    buf: bytes | bytearray, offset: int, count: int, dtype: torch.dtype, shape: tuple[int, ...]
) -> torch.Tensor:
    if isinstance(buf, bytearray):
        # Writable memory the tensor may keep alive and own: no copy.
        raw = torch.frombuffer(buf, dtype=torch.uint8, count=count, offset=offset)
    else:
        # Immutable bytes must not back a writable tensor: copy once.
        raw = torch.from_numpy(
            np.frombuffer(buf, dtype=np.uint8, count=count, offset=offset).copy()
        )
    return raw.view(dtype).reshape(shape)
