"""`python -m benchmarks webhooks`: webhook fan-out (issue 29), alone and beside chats.

Starts a throwaway platform (its own Redis and database under var/bench/, as the sockets
benchmark does) plus a webhooks worker (tandem.webhooks.queue.worker_argv, the CPU tier's
`webhooks` queue), every process allowed to reach 127.0.0.1 (TANDEM_OUTBOUND_ALLOW_HOSTS),
and a receiver: a real HTTP server on 127.0.0.1 answering 200, recording when each event
arrived and verifying a sample of signatures with docs/webhooks.md's recipe. One endpoint
of one tenant points at it, subscribed to every event type. Then:

- fan-out: --events events emitted with event_emit (from --emitters threads of this
  process) while nothing else runs; events delivered per second, and each event's delay
  from its creation (Event.created_at, stored by the emitting process) to its arrival;
- chats: --chats visitors each send one message at the same moment through the widget
  socket, in rounds alternated A B B A (--pairs pairs): A with the endpoint disabled
  (webhooks off: no event is even stored), B with it enabled (every chat event type
  delivered). The chats' TTFT and inter-token gaps in A and in B, and in B the events
  delivered and their delay from creation to arrival.

--quick is a smoke run of seconds on the tiny model; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import os
import time

from devstack.processes import _spawn, live_workers, running_platform, wait_for

from ..quick import add_quick_options, parse_quick
from ..report import fmt, say, write_json
from ..sockets import visitors as vis
from ..stack import site as platform_site
from ..stack.chat_client import together
from ..stack.prompts import Counter
from ..stack.tenancy import make_tenant
from ..stats import summarize
from ..traces import Trace, summarize_traces
from .receiver import Receiver
from .report import report

QUICK = {"events": 50, "chats": 4, "pairs": 1, "max_output_tokens": 8, "model": "tiny", "warmup": 1,
         "decode_slots": 8, "webhook_threads": 4}
ALLOW = "127.0.0.1"  # the receiver's address, allowed to every process of the run (operator setting)
DRAIN_TIMEOUT_S = 120  # the most a round waits for its events to arrive
SETTLE_S = 1.0  # no new event stored for this long after a round: its events are all stored


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks webhooks", description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=2000, help="events in the fan-out phase (default 2000; 0 skips it)")
    p.add_argument("--emitters", type=int, default=4, help="threads emitting the fan-out's events (default 4)")
    p.add_argument("--chats", type=int, default=64, help="visitors chatting at once (default 64; 0 skips the chats)")
    p.add_argument("--pairs", type=int, default=2,
                   help="pairs of rounds without and with webhooks, alternated A B B A (default 2)")
    p.add_argument("--max-output-tokens", type=int, default=64)
    p.add_argument("--warmup", type=int, default=2, help="unmeasured chat requests before measuring")
    p.add_argument("--webhook-threads", type=int, default=8, help="the webhooks worker's threads (default 8)")
    p.add_argument("--verify-every", type=int, default=10,
                   help="the receiver verifies the signature of every n-th request (default 10)")
    platform_site.add_site_options(p)
    p.set_defaults(db_url="postgres")  # as deployed: the worker writes beside the emitters
    add_quick_options(p, default_out="var/bench/webhooks.json")
    return parse_quick(p, argv, name="webhooks", default_out="var/bench/webhooks.json", quick_defaults=QUICK,
                       parse=platform_site.parse)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    if min(args.events, args.chats) < 0 or min(args.pairs, args.emitters, args.webhook_threads,
                                               args.verify_every) < 1:
        raise SystemExit("--events and --chats take counts (0 skips); --pairs, --emitters, --webhook-threads "
                         "and --verify-every positive ones")
    # Read by this process's settings when django.setup() runs in bench_site: the endpoint's
    # URL, on 127.0.0.1, is checked against it when the endpoint is made.
    os.environ["TANDEM_OUTBOUND_ALLOW_HOSTS"] = ALLOW
    result = platform_site.start_run("webhooks", argv, quick=args.quick)
    with platform_site.bench_site("webhooks", args) as site, Receiver(verify_every=args.verify_every) as receiver:
        tenant = make_tenant("bench-webhooks", quota={
            "requests_per_minute": 1_000_000, "tokens_per_minute": 10**9, "max_concurrent_streams": 100_000,
            "daily_token_budget": 10**12, "max_output_tokens": args.max_output_tokens,
        }, allocation=platform_site.whole_pool(args))
        endpoint = _endpoint(tenant, receiver)
        env = platform_site.platform_env(args, TANDEM_TRUSTED_PROXIES="127.0.0.1",
                                         TANDEM_OUTBOUND_ALLOW_HOSTS=ALLOW)
        result["config"] = {
            "events": args.events, "emitters": args.emitters, "chats": args.chats, "pairs": args.pairs,
            "max_output_tokens": args.max_output_tokens, "webhook_threads": args.webhook_threads,
            "verify_every": args.verify_every, "model": str(site.model_dir), "dtype": args.dtype,
            "decode_slots": args.decode_slots, "platform_env": env, "run_dir": str(site.run_dir),
            "db": "postgres" if site.db_url.startswith("postgres") else "sqlite",
        }
        workers = platform_site.model_workers(args)
        say(f"starting daphne + {', '.join(f'{r}.{p}' for r, p, _ in workers)} + the webhooks worker "
            f"(logs: {site.log_dir})")
        with running_platform(db_url=site.db_url, model_dir=str(site.model_dir), workers=workers,
                              extra_env=env, log_dir=site.log_dir) as plat:
            _start_webhooks_worker(plat, threads=args.webhook_threads)
            bench = Bench(args, plat, tenant, endpoint, receiver)
            if args.events:
                result["fanout"] = bench.fanout(args.events)
            if args.chats:
                bench.warm_up()
                result["chats"] = bench.chats(args.chats)
            say("stopping the platform")
        result["receiver"] = {"requests": receiver.requests, "duplicates": receiver.duplicates,
                              "signatures_verified": receiver.verified, "bad_signatures": receiver.bad_signatures}
    report(result)
    say(f"wrote {write_json(args.out, result)}")


def _endpoint(tenant, receiver: Receiver):
    from tandem.webhooks.models import EVENT_TYPES
    from tandem.webhooks.services import endpoint_create
    from tenants.models import Tenant

    created = endpoint_create(tenant=Tenant.objects.get(pk=tenant.tenant_id), url=receiver.url,
                              events=list(EVENT_TYPES), description="benchmark receiver")
    receiver.secret = created.secret
    return created.endpoint


def _start_webhooks_worker(plat, *, threads: int) -> None:
    """The webhooks worker as deployed (TANDEM_ROLE=cpu, its own queue), one of the
    platform's processes, so that the platform stops it with the others."""
    import redis

    from tandem.webhooks.queue import worker_argv

    name = "webhooks-worker"
    plat.procs[name] = proc = _spawn(name, worker_argv(concurrency=threads),
                                     {**plat.env, "TANDEM_ROLE": "cpu", "TANDEM_POOL": "shared"}, plat.log_dir)
    client = redis.Redis.from_url(plat.env["REDIS_URL"])
    wait_for(lambda: any(w.get("pid") == proc.pid for w in live_workers(client)), timeout=180,
             what="the webhooks worker's heartbeat", procs={name: proc}, log_dir=plat.log_dir)
    say(f"webhooks worker up ({threads} threads)")


class Bench:
    def __init__(self, args, plat, tenant, endpoint, receiver: Receiver):
        self.args, self.plat, self.tenant, self.endpoint, self.receiver = args, plat, tenant, endpoint, receiver
        self.prompts = Counter(0)
        self.addresses = Counter(0)  # every visitor of the run has an address of its own
        self.ws_url = plat.ws_url

    # -- fan-out ---------------------------------------------------------------------------

    def fanout(self, n: int) -> dict:
        """n events emitted from --emitters threads, all to the one endpoint."""
        from django.db import connection

        from tandem.webhooks.events import event_emit

        say(f"fan-out: {n} events from {self.args.emitters} thread(s)")
        k = self.args.emitters
        shares = [n // k + (i < n % k) for i in range(k)]

        def emit(i: int) -> list[str]:
            try:
                return [event_emit(tenant_id=self.tenant.tenant_id, tenant_slug=self.tenant.slug, type="reply.failed",
                                   data={"message": f"bench-{i}-{j}", "code": "benchmark"}).id
                        for j in range(shares[i])]
            finally:
                connection.close()  # this thread's own connection

        t0 = time.time()
        ids = [e for part in together(k, emit) for e in part]
        emitted_s = time.time() - t0
        got = self.receiver.wait_for(ids, timeout=DRAIN_TIMEOUT_S + n / 50)
        out = self._delays(ids)
        span = (max(out.pop("arrivals"), default=t0) - t0) or None
        out.update(events=n, emitters=k, emit_s=emitted_s, emitted_per_s=n / emitted_s if emitted_s else None,
                   delivered_per_s=got / span if span else None, span_s=span)
        say(f"  {got}/{n} delivered, {fmt(out['delivered_per_s'])} events/s (emitted at "
            f"{fmt(out['emitted_per_s'])}/s); delay p50 {fmt(out['delay_ms']['p50'])} ms, "
            f"p99 {fmt(out['delay_ms']['p99'])} ms")
        return out

    def _delays(self, ids: list[str]) -> dict:
        """Each event's creation (from the database) to its first arrival at the receiver,
        and how its deliveries ended."""
        from django.db.models import Count

        from tandem.webhooks.models import Delivery, Event

        created = dict(Event.objects.filter(id__in=ids).values_list("id", "created_at"))
        arrivals = {i: self.receiver.arrivals[i] for i in ids if i in self.receiver.arrivals}
        delays = [(arrivals[i] - created[i].timestamp()) * 1e3 for i in arrivals if i in created]
        # An attempt records its outcome just after the receiver answered: wait (briefly) for
        # the last ones, so that "sending" in the table means a delivery still unfinished.
        deadline = time.monotonic() + 10
        while True:
            statuses = dict(Delivery.objects.filter(event_id__in=ids).values_list("status")
                            .annotate(n=Count("id")))
            if not ({"sending", "pending"} & statuses.keys()) or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # polling another process's writes
        # The attempts' own time (the POST, as the worker timed it): the rest of a delay is
        # waiting for a worker thread.
        post_ms = Delivery.objects.filter(event_id__in=ids, duration_ms__isnull=False).values_list(
            "duration_ms", flat=True)
        return {"emitted": len(ids), "delivered": len(arrivals), "delay_ms": summarize(delays),
                "post_ms": summarize(post_ms), "deliveries": statuses, "arrivals": list(arrivals.values())}

    # -- chats -----------------------------------------------------------------------------

    def _webhooks(self, on: bool) -> None:
        from tandem.webhooks.services import endpoint_update

        self.endpoint = endpoint_update(endpoint=self.endpoint, enabled=on)

    def warm_up(self) -> None:
        say(f"warm-up: {self.args.warmup} chat request(s), webhooks off")
        self._webhooks(False)
        for _ in range(self.args.warmup):
            [v] = vis.open_visitors([self.ws_url], self.tenant.widget_key, 1, first_address=self.addresses.reserve(1),
                                    batch=True)
            try:
                tr = v.ask(Trace(prompt_n=self.prompts()))
            finally:
                v.close()
            if not tr.ok:
                raise RuntimeError(f"warm-up failed: {tr.error}")

    def chats(self, m: int) -> dict:
        """--pairs pairs of rounds, webhooks off (A) and on (B), in the order A B B A ...,
        so that a change in the machine's background load falls on both."""
        visitors = vis.open_visitors([self.ws_url], self.tenant.widget_key, m,
                                     first_address=self.addresses.reserve(m), batch=True)
        off: list[Trace] = []
        on: list[Trace] = []
        rounds = []
        try:
            for pair in range(self.args.pairs):
                for hooks in ((False, True) if pair % 2 == 0 else (True, False)):
                    rounds.append(self._round(visitors, m, hooks, off, on))
        finally:
            vis.close_all(visitors)
            self._webhooks(False)
        a, b = summarize_traces(off), summarize_traces(on)
        ids = [i for r in rounds for i in r.pop("event_ids")]
        events = self._delays(ids)
        events.pop("arrivals")
        p99a, p99b = a["itl_ms"]["p99"], b["itl_ms"]["p99"]
        change = (p99b - p99a) * 100 / p99a if p99a and p99b is not None else None
        say(f"  {m} chats: ITL p99 off {fmt(p99a)} ms, on {fmt(p99b)} ms ({fmt(change)}%); "
            f"{events['delivered']}/{events['emitted']} events delivered, delay p99 {fmt(events['delay_ms']['p99'])} ms")
        return {"chats": m, "pairs": self.args.pairs, "off": a, "on": b, "itl_p99_change_percent": change,
                "events": events, "rounds": rounds}

    def _round(self, visitors, m: int, hooks: bool, off: list, on: list) -> dict:
        from django.utils import timezone

        self._webhooks(hooks)
        started = timezone.now()
        traces = vis.chat_round(visitors, first_prompt=self.prompts.reserve(m))
        (on if hooks else off).extend(traces)
        ids = self._drain(started) if hooks else self._event_ids(started)
        s = summarize_traces(traces)
        say(f"  round webhooks {'on ' if hooks else 'off'}: {m - s['error_count']}/{m} replies, ITL p99 "
            f"{fmt(s['itl_ms']['p99'])} ms, {len(ids)} events")
        return {"webhooks": hooks, "completed": m - s["error_count"], "errors": s["errors"],
                "ttft_p99_ms": s["ttft_ms"]["p99"], "itl_p99_ms": s["itl_ms"]["p99"], "events": len(ids),
                "event_ids": ids, "traces": [t.to_json() for t in traces]}

    def _event_ids(self, since) -> list[str]:
        from tandem.webhooks.models import Event

        return list(Event.objects.filter(tenant_id=self.tenant.tenant_id, created_at__gte=since)
                    .values_list("id", flat=True))

    def _drain(self, since) -> list[str]:
        """The round's events, once every one stored has arrived and none was stored for
        SETTLE_S (a reply's last event is stored after its `end` frame reached the
        visitor): the endpoint is only disabled for the next round after that."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        ids: list[str] = []
        while True:
            left = deadline - time.monotonic()
            ids = self._event_ids(since)
            got = self.receiver.wait_for(ids, timeout=max(left, 0))
            if got < len(ids) or left <= 0:
                say(f"  WARNING: {len(ids) - got} of the round's {len(ids)} events did not arrive in "
                    f"{DRAIN_TIMEOUT_S} s")
                return ids
            time.sleep(SETTLE_S)  # the settle window: is a late event still being stored?
            if set(self._event_ids(since)) == set(ids):
                return ids
