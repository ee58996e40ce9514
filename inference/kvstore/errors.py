"""Why a KV entry cannot be handed over; every one means: recompute the prefill."""


class KVError(Exception):
    """The cache cannot be handed over; recompute the prefill."""


class KVMissing(KVError):
    """No entry under this request id: never stored, already taken, or its lease expired."""


class KVCorrupt(KVError):
    """An entry exists but its bytes fail the checks (checksum, length, header)."""


class KVMismatch(KVError):
    """An intact entry that does not fit the reader: fingerprint, dtype, shape or format version."""
