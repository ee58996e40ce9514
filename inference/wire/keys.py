"""Redis key names. One id follows a request end to end (the assistant message's UUID);
every per-request key is derived from it here and nowhere else."""

PREFIX = "tandem"


def stream(request_id: str) -> str:
    return f"{PREFIX}:stream:{request_id}"


def request(request_id: str) -> str:
    return f"{PREFIX}:req:{request_id}"


def kv(request_id: str) -> str:
    return f"{PREFIX}:kv:{request_id}"


def cancel(request_id: str) -> str:
    return f"{PREFIX}:cancel:{request_id}"


def listener(request_id: str) -> str:
    return f"{PREFIX}:listen:{request_id}"


def rendezvous(request_id: str) -> str:
    return f"{PREFIX}:rendezvous:{request_id}"


def owner(request_id: str) -> str:
    """Who holds the request now (inference.wire.worker_ownership): worker, stage, epoch, state."""
    return f"{PREFIX}:owner:{request_id}"


def sent(request_id: str) -> str:
    """The request's stage sent and not yet taken (inference.wire.worker_ownership): which
    task on which queue, so that it can be sent again if its message is lost."""
    return f"{PREFIX}:sent:{request_id}"


SENT_PATTERN = f"{PREFIX}:sent:*"

# A cancel flag outlives any request (its spec expires after an hour too).
CANCEL_TTL_S = 3600
CANCEL_CHANNEL = f"{PREFIX}:cancel"
WORKER_HASH_PREFIX = f"{PREFIX}:worker:"
WORKERS_SET = f"{PREFIX}:workers"


def conversation_events(conversation_id: str) -> str:
    """A conversation's live events (handed to a person: messages, state, typing)."""
    return f"{PREFIX}:conv:{conversation_id}:events"


def worker_requests(name: str) -> str:
    """The requests a worker holds, beside its heartbeat key (`WORKER_HASH_PREFIX + name`)."""
    return f"{WORKER_HASH_PREFIX}{name}:requests"
