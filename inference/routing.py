"""Routing a tenant to its pools: the allocation names a prefill and a decode pool; a
colocated pool does both in one worker. Read on every request, so an operator's change
takes effect for the tenant's next request without a restart."""

from __future__ import annotations

from dataclasses import dataclass

from tenants.models import ComputePool, Tenant


@dataclass(frozen=True)
class Route:
    prefill_pool: str
    decode_pool: str
    colocated: bool
    priority: int
    max_decode_slots: int

    @property
    def first_queue(self) -> str:
        return f"colocated.{self.prefill_pool}" if self.colocated else f"prefill.{self.prefill_pool}"

    @property
    def decode_queue(self) -> str:
        return f"decode.{self.decode_pool}"


# Celery's Redis transport keeps one list per priority step and serves step 0 first, so
# a tenant's priority (higher is more important) maps onto steps 0 (first) .. 9 (last).
PRIORITY_STEPS = 10


def broker_priority(priority: int) -> int:
    return max(0, min(PRIORITY_STEPS - 1, PRIORITY_STEPS // 2 - 1 - priority))


def route_for_tenant(tenant: Tenant) -> Route:
    alloc = tenant.allocation
    prefill, decode = alloc.prefill_pool, alloc.decode_pool
    colocated = prefill.role == ComputePool.Role.COLOCATED
    return Route(
        prefill_pool=prefill.slug,
        decode_pool=prefill.slug if colocated else decode.slug,
        colocated=colocated,
        priority=alloc.priority,
        max_decode_slots=alloc.max_decode_slots,
    )
