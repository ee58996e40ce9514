"""Limits per visitor and per client IP on a widget (public) key: a widget key is in
every page's source, so anyone can use it, and the tenant's own quota alone would let
one script spend what all of the tenant's visitors share. The numbers are settings
(TANDEM_WIDGET_VISITOR_*, TANDEM_WIDGET_IP_*; docs/security.md); they are checked in the
same atomic admission as the tenant's quota (tenants.quotas, `subjects`)."""

from __future__ import annotations

from django.conf import settings

from tenants.quotas import SubjectLimits

from .visitors import Visitor


def widget_subjects(*, visitor: Visitor, client_ip: str) -> list[SubjectLimits]:
    subjects = [SubjectLimits(
        name="visitor", identity=visitor.subject,
        requests_per_minute=settings.TANDEM_WIDGET_VISITOR_RPM,
        tokens_per_minute=settings.TANDEM_WIDGET_VISITOR_TPM,
        max_concurrent_streams=settings.TANDEM_WIDGET_VISITOR_STREAMS)]
    if client_ip:
        subjects.append(SubjectLimits(
            name="ip", identity=client_ip,
            requests_per_minute=settings.TANDEM_WIDGET_IP_RPM,
            tokens_per_minute=settings.TANDEM_WIDGET_IP_TPM,
            max_concurrent_streams=settings.TANDEM_WIDGET_IP_STREAMS))
    return subjects


_WHO = {"visitor": "you", "ip": "your network address"}
_WHAT = {"requests_per_minute": "Too many messages per minute",
         "tokens_per_minute": "Too many tokens per minute",
         "concurrent_streams": "Too many replies in progress at once"}


def refusal_text(reason: str | None) -> str:
    """The text for a per-visitor or per-IP refusal (or a generic one)."""
    who, _, what = (reason or "").partition("_")
    if who in _WHO and what in _WHAT:
        return f"{_WHAT[what]} from {_WHO[who]}."
    return "The request was refused by the tenant's quota."
