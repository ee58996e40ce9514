"""The web process's database pool (DB_POOL_SIZE, set by tandem/webserver.py): how its
async code calls the database so that a connection goes back to the pool as soon as the
call is done, how to tell a pool that stayed full from a bug, and the 503 a page answers
then."""

from __future__ import annotations

import functools
import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.http import HttpResponse
from django.utils.deprecation import MiddlewareMixin
from psycopg_pool import PoolTimeout

RETRY_AFTER_S = 1  # a pool that stayed full DB_POOL_WAIT_S frees a connection in milliseconds
BUSY_MESSAGE = "The server is busy; retry shortly."  # a page's answer then, and the API's
OPEN_WAIT_S = 10  # how long a starting web process waits for its first connection

logger = logging.getLogger(__name__)


def open_pool(timeout: float = OPEN_WAIT_S) -> None:
    """Open the process's pool and wait for its first connection, before the process
    listens. Django opens the pool at the first query and lets the pool connect in the
    background, so a burst that reaches a process just started would wait DB_POOL_WAIT_S
    for a connection still being made, and with a short wait every request of it was a
    503. A database that does not answer in `timeout` is logged, not fatal: the pool is
    dropped (a pool whose wait failed is closed for good) and the first request makes a
    new one, as without this."""
    connection = connections["default"]
    pool = getattr(connection, "pool", None)  # PostgreSQL's backend only (make run's is SQLite)
    if pool is None:
        return
    try:
        pool.open(wait=True, timeout=timeout)
    except PoolTimeout:
        logger.warning("no database connection after %s s; serving anyway", timeout)
        connection.close_pool()


def pooled_sync_to_async(fn, *, thread_sensitive: bool = True):
    """`sync_to_async(fn)` for database work in an HTTP view (or a reply it follows): in a
    process that pools its connections, the thread gives its connection back when `fn`
    returns. An HTTP request's thread otherwise keeps it until the response ends, so a
    few replies that stream or wait would hold the whole pool. (Channels'
    database_sync_to_async gives it back too, but it also closes a connection inside a
    transaction, which an in-process test, one transaction, does not survive; a process
    without a pool keeps today's connection handling.)"""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            give_back_connections()

    return sync_to_async(call, thread_sensitive=thread_sensitive)


def give_back_connections() -> None:
    """In a process that pools its connections, give this thread's back to the pool now:
    before a wait that needs none (a page waiting on the CPU tier), which would otherwise
    hold one for as long as it waits. A query after it takes one again."""
    if settings.DB_POOL_SIZE:
        connections.close_all()


def pool_exhausted(exc: BaseException) -> bool:
    """Whether `exc` is the pool staying full for DB_POOL_WAIT_S: an overload the client
    should retry, not a bug."""
    return isinstance(exc, PoolTimeout) or isinstance(exc.__cause__, PoolTimeout)


class PoolExhaustedMiddleware(MiddlewareMixin):
    """A page or endpoint whose view found the pool full past DB_POOL_WAIT_S answers 503
    with Retry-After, not a 500 (the API's views answer in their own envelope:
    tandem.api.errors.busy_error)."""

    def process_exception(self, request, exception):
        if not pool_exhausted(exception):
            return None
        response = HttpResponse(BUSY_MESSAGE + "\n", status=503,
                                content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
