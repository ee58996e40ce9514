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


def served_by(route: Route, workers: list[dict]) -> bool:
    """Whether the live `workers` (wire.workers.live_workers) serve every tier of `route`."""
    live = {(w["role"], w["pool"]) for w in workers}
    if route.colocated:
        return ("colocated", route.prefill_pool) in live
    return ("prefill", route.prefill_pool) in live and ("decode", route.decode_pool) in live
