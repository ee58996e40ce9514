"""The shared-memory KV store backend: prefill and decode on the same host, no Redis copy.

One file per request, `<root>/<request_id>.kv`, in the codec's format, under /dev/shm
(RAM-backed tmpfs) by default, or any directory both processes can reach.

- Writes are atomic: a private `.tmp-*` file is written whole, then renamed into place,
  so a reader sees either nothing or a complete entry.
- Takes are atomic: the entry is renamed to a private `.claim-*` name before it is read;
  rename succeeds for exactly one taker, every other one finds nothing (`KVMissing`).
- The lease is the header's expiry, checked on take and `exists`. No server deletes
  expired files, so each put and take first sweeps the directory; the file's mtime is
  set to its expiry so the sweep needs a `stat`, not a read, per file.
- Nothing is fsynced: the lease outlives no reboot, and tmpfs has no disk to sync to.
"""

from __future__ import annotations

import os
import secrets
import time

from inference.engine.kv import KVCache
from inference.kvstore import codec
from inference.kvstore.base import KVStore, check_request_id
from inference.kvstore.errors import KVCorrupt, KVMissing

DEFAULT_ROOT = "/dev/shm/tandem-kv"
_SUFFIX = ".kv"
_TMP, _CLAIM = ".tmp-", ".claim-"


class SharedMemoryKVStore(KVStore):
    def __init__(
        self, root_dir: str | os.PathLike[str] = DEFAULT_ROOT, *, orphan_grace_s: float = 60.0
    ) -> None:
        self.root = os.fspath(root_dir)
        # Temporary and claimed files older than this belong to a process that died
        # mid-write or mid-read; the sweep removes them.
        self.orphan_grace_s = orphan_grace_s
        os.makedirs(self.root, mode=0o700, exist_ok=True)

    def path(self, request_id: str) -> str:
        return os.path.join(self.root, check_request_id(request_id) + _SUFFIX)

    def _private(self, kind: str, request_id: str) -> str:
        return os.path.join(self.root, f"{kind}{request_id}-{os.getpid()}-{secrets.token_hex(6)}")

    def put(self, request_id: str, kv: KVCache, *, ttl_s: float) -> int:
        final = self.path(request_id)
        now = time.time()
        self.sweep(now=now)
        entry = codec.encode(kv, created_at=now, ttl_s=ttl_s)
        tmp = self._private(_TMP, request_id)
        try:
            with open(tmp, "xb", opener=lambda p, flags: os.open(p, flags, 0o600)) as f:
                f.write(entry.head)
                f.write(entry.k)  # straight from the tensor's memory, no join
                f.write(entry.v)
            expires_at = now + ttl_s
            os.utime(tmp, (expires_at, expires_at))
            os.replace(tmp, final)
        except BaseException:
            _unlink_quietly(tmp)
            raise
        return entry.nbytes

    def _take_bytes(self, request_id: str) -> bytearray:
        final = self.path(request_id)
        self.sweep()
        claimed = self._claim(final, request_id)
        if claimed is None:
            raise KVMissing(
                f"no KV entry {request_id!r} in {self.root} (never stored, already taken, or expired)"
            )
        try:
            with open(claimed, "rb") as f:
                buf = bytearray(os.fstat(f.fileno()).st_size)
                n = f.readinto(buf)
        finally:
            _unlink_quietly(claimed)
        if n != len(buf):
            raise KVCorrupt(
                f"KV entry {request_id!r} shrank while being read ({n} of {len(buf)} bytes)"
            )
        return buf

    def _expiry_clock(self) -> float:
        return time.time()  # no server expires files: the header's expiry is the lease

    def _claim(self, final: str, request_id: str) -> str | None:
        claimed = self._private(_CLAIM, request_id)
        try:
            os.rename(final, claimed)
        except FileNotFoundError:
            return None
        return claimed

    def delete(self, request_id: str) -> bool:
        try:
            os.unlink(self.path(request_id))
        except FileNotFoundError:
            return False
        return True

    def exists(self, request_id: str) -> bool:
        final = self.path(request_id)
        try:
            with open(final, "rb") as f:
                prefix = f.read(codec.PREFIX_SIZE)
                head = prefix + f.read(codec.header_size(prefix) - len(prefix))
            expires_at = codec.parse_header(head).expires_at
        except FileNotFoundError:
            return False
        except KVCorrupt:
            return True  # present but unreadable: `take` will say so, with details
        if time.time() < expires_at:
            return True
        self._reap(final, time.time())
        return False

    def sweep(self, *, now: float | None = None) -> int:
        """Remove expired entries and orphaned temporary files; returns how many went."""
        now = time.time() if now is None else now
        removed = 0
        with os.scandir(self.root) as entries:
            for entry in entries:
                name = entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # taken or replaced while we looked
                if name.endswith(_SUFFIX) and not name.startswith("."):
                    if st.st_mtime <= now:
                        removed += self._reap(entry.path, now)
                elif name.startswith((_TMP, _CLAIM)) and now - st.st_ctime > self.orphan_grace_s:
                    removed += _unlink_quietly(entry.path)
        return removed

    def _reap(self, final: str, now: float) -> int:
        request_id = os.path.basename(final)[: -len(_SUFFIX)]
        claimed = self._claim(final, request_id)
        if claimed is None:
            return 0
        try:
            if os.stat(claimed).st_mtime > now:
                # A fresh put replaced the expired file between our stat and rename: put
                # it back. link() never overwrites, so an even newer put still wins.
                try:
                    os.link(claimed, final)
                except FileExistsError:
                    pass
                return 0
            return 1
        finally:
            _unlink_quietly(claimed)

    def __repr__(self) -> str:
        return f"SharedMemoryKVStore({self.root!r})"


def _unlink_quietly(path: str) -> int:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return 0
    return 1
