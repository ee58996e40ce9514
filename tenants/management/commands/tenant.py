"""`manage.py tenant create|list|rotate-key|add-member`: the operator's command line for
tenants, through the same services (and audit log) as the console."""

from __future__ import annotations

import json
import sys

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError

from tenants import selectors, services
from tenants.audit import Actor
from tenants.models import Membership


class Command(BaseCommand):
    help = "Create and list tenants, rotate their secret keys, add members."
    stealth_options = ("stdin",)  # call_command(..., stdin=...) in tests

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a tenant with quota, allocation and keys.")
        create.add_argument("slug")
        create.add_argument("--name", required=True)
        create.add_argument("--rpm", type=int, help="requests per minute")
        create.add_argument("--tpm", type=int, help="tokens per minute")
        create.add_argument("--max-concurrent", type=int, help="concurrent streams")
        create.add_argument("--daily-tokens", type=int, help="daily token budget")
        create.add_argument("--origin", action="append", default=[], help="allowed widget origin")
        create.add_argument("--system-prompt")
        create.add_argument("--json", action="store_true", help="print exactly one JSON object")
        sub.add_parser("list", help="List tenants.").add_argument("--json", action="store_true")
        rotate = sub.add_parser("rotate-key", help="Revoke the secret keys and issue a new one.")
        rotate.add_argument("slug")
        rotate.add_argument("--json", action="store_true")
        member = sub.add_parser("add-member", help="Give a user a role in a tenant (the user is created when missing).")
        member.add_argument("slug")
        member.add_argument("username")
        member.add_argument("--role", required=True, choices=Membership.Role.values)
        member.add_argument("--email", default="", help="for a user created here")
        member.add_argument("--password-stdin", action="store_true",
                            help="read the new user's password from standard input (first line)")

    def handle(self, *args, action, **opts):
        return {"create": self._create, "list": self._list, "rotate-key": self._rotate,
                "add-member": self._add_member}[action](opts)

    def _create(self, opts):
        quota = {
            field: opts[option]
            for option, field in [
                ("rpm", "requests_per_minute"),
                ("tpm", "tokens_per_minute"),
                ("max_concurrent", "max_concurrent_streams"),
                ("daily_tokens", "daily_token_budget"),
            ]
            if opts.get(option) is not None
        }
        for field, value in quota.items():
            if value < 0:
                raise CommandError(f"{field} must not be negative")
        try:
            created = services.tenant_create(
                slug=opts["slug"], name=opts["name"], system_prompt=opts.get("system_prompt"),
                allowed_origins=opts["origin"], quota=quota, actor=Actor.command(),
            )
        except IntegrityError as exc:
            raise CommandError(f"tenant {opts['slug']!r} already exists") from exc
        result = {
            "slug": created.tenant.slug,
            "secret_key": created.secret_key.plaintext,
            "widget_key": created.widget_key.plaintext,
        }
        if opts["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(f"Created tenant {result['slug']}.")
        self.stdout.write(f"  secret key (shown once, store it now): {result['secret_key']}")
        self.stdout.write(f"  widget key: {result['widget_key']}")

    def _list(self, opts):
        rows = [
            {"slug": t.slug, "name": t.name, "active": t.is_active,
             "rpm": t.quota.requests_per_minute, "tpm": t.quota.tokens_per_minute,
             "prefill_pool": str(t.allocation.prefill_pool), "decode_pool": str(t.allocation.decode_pool)}
            for t in selectors.tenant_list()
        ]
        if opts["json"]:
            self.stdout.write(json.dumps(rows))
            return
        for r in rows:
            self.stdout.write(
                f"{r['slug']:<20} {r['name']:<30} {'active' if r['active'] else 'inactive':<9}"
                f" rpm={r['rpm']} tpm={r['tpm']} {r['prefill_pool']} → {r['decode_pool']}"
            )

    def _rotate(self, opts):
        tenant = selectors.tenant_get(slug=opts["slug"])
        if tenant is None:
            raise CommandError(f"no tenant {opts['slug']!r}")
        issued = services.tenant_rotate_secret_key(tenant=tenant, actor=Actor.command())
        if opts["json"]:
            self.stdout.write(json.dumps({"slug": tenant.slug, "secret_key": issued.plaintext}))
        else:
            self.stdout.write(f"New secret key for {tenant.slug} (shown once): {issued.plaintext}")

    def _add_member(self, opts):
        tenant = selectors.tenant_get(slug=opts["slug"])
        if tenant is None:
            raise CommandError(f"no tenant {opts['slug']!r}")
        password = None
        if opts["password_stdin"]:
            password = (opts.get("stdin") or sys.stdin).readline().rstrip("\r\n")
            if not password:
                raise CommandError("--password-stdin: no password on standard input")
        existed = services.user_find(identifier=opts["username"]) is not None
        if password and not existed:
            try:
                validate_password(password)
            except ValidationError as exc:
                raise CommandError("password: " + " ".join(exc.messages)) from None
        try:
            m = services.member_add(tenant=tenant, identifier=opts["username"], role=opts["role"],
                                    actor=Actor.command(), create_user=True, password=password)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        if not existed and opts["email"]:
            m.user.email = opts["email"]
            m.user.save(update_fields=["email"])
        note = "" if existed else " (user created" + ("" if password else ", no password: set one to sign in") + ")"
        if existed and password:
            note = " (existing user: password left unchanged)"
        self.stdout.write(f"{m.user.get_username()} is {m.role} of {tenant.slug}{note}.")
