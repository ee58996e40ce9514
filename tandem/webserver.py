"""The web process: daphne's command line, with its housekeeping spread out.

daphne visits every open connection once a second (to reap applications that ended) and
every two seconds (handshake and websocket timeouts, keepalive pings). A widget socket
that nobody types in costs nothing else, so with thousands of them those visits are most
of an idle web process's CPU, and it grows with the sockets held. Here each visit runs one
time in HOUSEKEEPING_EVERY: an ended application is reaped within 5 s instead of 1, a
handshake refused within 10 s of its deadline instead of 2 (the platform allows 30 s), and
a keepalive ping goes out within 10 s of its interval. Nothing else of daphne changes.

    python -m tandem.webserver <daphne's arguments>   (devstack.processes.daphne_argv)"""

from __future__ import annotations

import os

from daphne.cli import CommandLineInterface
from daphne.server import Server  # installs Twisted's asyncio reactor: import it first
from twisted.internet import reactor

from tandem.db_pool import open_pool

# Its database connections come from a pool of this many (DB_POOL_SIZE in tandem/settings.py;
# the environment's DB_POOL_SIZE, where set, wins): each HTTP request runs its sync code
# on a thread of its own, and requests past this many wait for a connection instead of
# each opening one.
WEB_DB_POOL_SIZE = "10"
HOUSEKEEPING_EVERY = 5
# daphne's own periods (daphne/server.py), which its checkers reschedule themselves with.
APPLICATION_CHECK_S = 1
TIMEOUT_CHECK_S = 2


class TandemServer(Server):
    _application_ticks = 0
    _timeout_ticks = 0

    def run(self):
        open_pool()  # daphne has loaded the application, so Django is set up
        super().run()

    def application_checker(self):
        self._application_ticks += 1
        if self._application_ticks % HOUSEKEEPING_EVERY:
            reactor.callLater(APPLICATION_CHECK_S, self.application_checker)
            return
        super().application_checker()

    def timeout_checker(self):
        self._timeout_ticks += 1
        if self._timeout_ticks % HOUSEKEEPING_EVERY:
            reactor.callLater(TIMEOUT_CHECK_S, self.timeout_checker)
            return
        super().timeout_checker()


class TandemCommandLine(CommandLineInterface):
    server_class = TandemServer


if __name__ == "__main__":
    os.environ.setdefault("DB_POOL_SIZE", WEB_DB_POOL_SIZE)  # before daphne loads the settings
    TandemCommandLine.entrypoint()
