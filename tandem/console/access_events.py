"""A person's access changed: their memberships, their role, their account, or they
signed out. Open sockets that act for that person (the agent socket) follow the
person's access stream, `tandem:user:<id>:access`, and check their access again the
moment something is written there, instead of finding out at their next action.

Written from model signals, so every path that changes a membership (services, the
admin, a management command) is covered; sent once the transaction commits."""

from __future__ import annotations

import logging

import redis
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from inference.wire.connections import get_redis
from tenants.models import Membership, Tenant

log = logging.getLogger(__name__)
MAXLEN = 20
TTL_S = 24 * 3600


def key(user_id: int) -> str:
    return f"tandem:user:{user_id}:access"


def access_changed(*, user_ids, signed_out: str = "") -> None:
    """Tell the sockets of these people to check their access again (on commit).
    `signed_out`: the session that was signed out (its sockets close without a check:
    the signal comes before the session is deleted)."""
    ids = sorted({int(u) for u in user_ids if u is not None})
    if not ids:
        return

    def send():
        try:
            pipe = get_redis().pipeline(transaction=False)
            for uid in ids:
                pipe.xadd(key(uid), {"signed_out": signed_out}, maxlen=MAXLEN, approximate=True)
                pipe.expire(key(uid), TTL_S)
            pipe.execute()
        except redis.RedisError:
            # The change is saved; every socket still checks the role at its next action.
            log.warning("could not announce an access change for %s", ids, exc_info=True)

    transaction.on_commit(send)


def _membership_changed(sender, instance, **kwargs):
    access_changed(user_ids=[instance.user_id])


def _user_changed(sender, instance, **kwargs):
    access_changed(user_ids=[instance.pk])


def _tenant_changed(sender, instance, **kwargs):
    access_changed(user_ids=Membership.objects.filter(tenant=instance).values_list("user_id", flat=True))


def _signed_out(sender, request, user, **kwargs):
    if user is not None:
        access_changed(user_ids=[user.pk], signed_out=request.session.session_key or "")


def connect_signals() -> None:
    post_save.connect(_membership_changed, sender=Membership, dispatch_uid="access-membership-saved")
    post_delete.connect(_membership_changed, sender=Membership, dispatch_uid="access-membership-deleted")
    post_save.connect(_user_changed, sender=get_user_model(), dispatch_uid="access-user-saved")
    post_delete.connect(_user_changed, sender=get_user_model(), dispatch_uid="access-user-deleted")
    post_save.connect(_tenant_changed, sender=Tenant, dispatch_uid="access-tenant-saved")
    user_logged_out.connect(_signed_out, dispatch_uid="access-signed-out")
