"""Hand-over phrases as a person edits them (tandem.handoff.phrases, issue 32): saved from
the Assistant page as escaped patterns and read back as phrases; the built-in set's
examples each matched by their own line; patterns saved before phrases existed read back
unchanged."""

from __future__ import annotations

import pytest

from inference.text.handover import asks_for_person
from tandem.handoff import phrases as handoff_phrases
from tenants.models import Tenant
from tests.console.test_pages import assistant_form

pytestmark = pytest.mark.django_db
A = "/console/t/alpha"


def test_hand_over_phrases_are_saved_as_escaped_patterns_and_read_back_as_phrases(client, world):
    client.force_login(world.admin_a)
    html = client.get(f"{A}/assistant/").content.decode()
    assert "“talk to a person”" in html and "Advanced: regular expressions" in html  # the built-in set, shown
    form = assistant_form(world.a.tenant, handover_phrases="speak to a manager\nc++ help?\n  écrire à un humain ")
    assert client.post(f"{A}/assistant/", form).status_code == 302
    stored = Tenant.objects.get(pk=world.a.tenant.pk).handover_patterns
    for message, hands_over in (("Can I SPEAK to   a manager?", True), ("I need c++ help? now", True),
                                ("je veux écrire à un humain", True), ("speak to a managers", False),
                                ("c+ help?", False), ("Let me talk to a person", True)):  # the last: built-in
        assert asks_for_person(message, stored) is hands_over, message
    html = client.get(f"{A}/assistant/").content.decode()
    assert "speak to a manager\nc++ help?\nécrire à un humain" in html.replace("&#x27;", "'")
    # Built-ins off, nothing of one's own: hand-over by words is off.
    off = assistant_form(Tenant.objects.get(pk=world.a.tenant.pk), handover_builtin=False, handover_phrases="")
    assert client.post(f"{A}/assistant/", off).status_code == 302
    assert Tenant.objects.get(pk=world.a.tenant.pk).handover_patterns == "-"
    short = client.post(f"{A}/assistant/", assistant_form(world.a.tenant, handover_phrases="ok\nhi"))
    assert short.status_code == 400 and "Line 1: a phrase has at least 3 characters" in short.content.decode()


def test_every_built_in_example_is_recognised_by_its_own_line():
    for rule in handoff_phrases.builtin_rules():
        for example in rule["examples"]:
            assert asks_for_person(f"Hello, {example}!", rule["pattern"]), example


def test_patterns_saved_before_phrases_existed_read_back_unchanged():
    old = "\\bhuman please\\b\n(refund|money back)"
    read = handoff_phrases.read(old)
    assert (read.builtin, read.phrases, read.expressions) == (False, [], ["\\bhuman please\\b", "(refund|money back)"])
    assert handoff_phrases.write(read) == old
    assert handoff_phrases.read("").builtin and handoff_phrases.write(handoff_phrases.read("")) == ""
