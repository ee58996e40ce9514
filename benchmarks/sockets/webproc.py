"""What a web process costs, read from outside it: its resident memory, the CPU it used
over a window, and how many Redis connections it holds (Redis's CLIENT LIST, matched to
the process by the local ports of its own TCP connections)."""

from __future__ import annotations

import time
from urllib.parse import urlparse


class WebProbe:
    def __init__(self, pid: int, redis_url: str):
        import psutil
        import redis

        self.proc = psutil.Process(pid)
        self.redis = redis.Redis.from_url(redis_url)
        self.redis_port = urlparse(redis_url).port or 6379

    def rss_mb(self) -> float:
        return self.proc.memory_info().rss / 2**20

    def cpu_percent(self, window_s: float) -> float:
        """Percent of one core the process used over the next `window_s` seconds."""
        before, t0 = self.proc.cpu_times(), time.monotonic()
        time.sleep(window_s)  # the measuring window itself
        after, dt = self.proc.cpu_times(), time.monotonic() - t0
        return 100.0 * ((after.user - before.user) + (after.system - before.system)) / dt

    def redis_clients(self) -> dict[str, int]:
        """Redis's clients whose address is one of this process's connections to it, by
        the name they gave (CLIENT SETNAME; "-" for none): which pool or reader holds them."""
        mine = {c.laddr.port for c in self.proc.net_connections(kind="tcp")
                if c.raddr and c.raddr.port == self.redis_port}
        out: dict[str, int] = {}
        for c in self.redis.client_list():
            if int(c["addr"].rsplit(":", 1)[1]) in mine:
                name = c.get("name") or "-"
                out[name] = out.get(name, 0) + 1
        return out

    def redis_connections(self) -> int:
        return sum(self.redis_clients().values())

    def open_files(self) -> int:
        return self.proc.num_fds()

    def snapshot(self, *, cpu_window_s: float) -> dict:
        clients = self.redis_clients()
        return {"rss_mb": self.rss_mb(), "idle_cpu_percent": self.cpu_percent(cpu_window_s),
                "redis_connections": sum(clients.values()), "redis_clients": clients, "open_fds": self.open_files()}
