"""Business hours (tandem.hours): the schedule's arithmetic in the tenant's zone, its
checks, the console page that edits it, and what a hand-over says with it: out of hours
the offline form with when the team is back, and an assistant that promises nobody."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from inference.pipeline.cpu import prompt_parts
from inference.wire.spec import RequestSpec, Sampling
from tandem.chat.models import AgentPresence
from tandem.chat.validation import InvalidInput
from tandem.handoff import assignment, states
from tandem.hours import selectors, services
from tandem.hours.schedule import parse_holidays, schedule_of
from tenants.audit import Actor
from tenants.models import AuditLog, Membership
from tests.factories import UserFactory, make_tenant
from tests.world import PASSWORD

WEEKDAYS = {str(d): ["09:00", "17:00"] for d in range(5)}  # Monday to Friday, 9 to 5


def paris(**kw):
    return schedule_of(time_zone="Europe/Paris", weekly=WEEKDAYS, holidays=kw.get("holidays", []))


def at(iso: str) -> datetime:
    return datetime.fromisoformat(iso).astimezone(UTC)


def test_open_within_the_days_hours_in_the_tenants_zone():
    s = paris()
    assert s.is_open(at("2026-12-07T09:00:00+01:00"))  # Monday 9:00 in Paris
    assert s.is_open(at("2026-12-07T16:59:00+01:00"))
    assert not s.is_open(at("2026-12-07T17:00:00+01:00"))
    assert s.is_open(at("2026-12-07T08:30:00+00:00"))  # 8:30 in London is 9:30 in Paris
    assert not s.is_open(at("2026-12-07T07:30:00+00:00"))
    assert not s.is_open(at("2026-12-05T12:00:00+01:00"))  # Saturday


def test_back_at_is_the_next_opening_across_the_weekend_and_holidays():
    s = paris(holidays=parse_holidays("2026-12-07 Staff day\n2026-12-25 Christmas"))
    friday_evening = at("2026-12-04T18:00:00+01:00")
    assert s.next_opening(friday_evening) == datetime.fromisoformat("2026-12-08T09:00:00+01:00")  # Monday is off
    assert s.next_opening(at("2026-12-08T07:00:00+01:00")) == datetime.fromisoformat("2026-12-08T09:00:00+01:00")
    assert not s.is_open(at("2026-12-25T10:00:00+01:00"))
    # Wall-clock hours through a change of summer time: 9:00 local, whatever the offset.
    assert s.next_opening(at("2026-03-28T12:00:00+01:00")) == datetime.fromisoformat("2026-03-30T09:00:00+02:00")


def test_a_schedule_with_no_open_day_has_no_next_opening():
    s = schedule_of(time_zone="UTC", weekly={}, holidays=[])
    assert not s.is_open(at("2026-12-07T10:00:00+00:00"))
    assert s.next_opening(at("2026-12-07T10:00:00+00:00")) is None


@pytest.mark.parametrize("weekly, holidays, zone, param", [
    ({"0": ["17:00", "09:00"]}, "", "UTC", "day0"),
    ({"2": ["9am", "17:00"]}, "", "UTC", "day2"),
    ({"7": ["09:00", "17:00"]}, "", "UTC", "weekly"),
    ({}, "", "Mars/Olympus", "time_zone"),
    ({}, "2026-02-30 Nope", "UTC", "holidays"),
    ({}, "Christmas", "UTC", "holidays"),
])
def test_bad_schedules_are_refused_naming_the_field(db, weekly, holidays, zone, param):
    created = make_tenant()
    with pytest.raises(InvalidInput) as refused:
        services.hours_save(tenant=created.tenant, actor=Actor(), enabled=True, time_zone=zone, weekly=weekly,
                            holidays=holidays)
    assert refused.value.param == param
    assert selectors.hours_get(tenant=created.tenant).pk is None  # nothing saved


def _closed_now(tenant):
    """Hours that are never open now: today and every day closed but one far from now."""
    now = datetime.now(UTC)
    closed_day = (now.weekday() + 3) % 7
    services.hours_save(tenant=tenant, actor=Actor(), enabled=True, time_zone="UTC",
                        weekly={str(closed_day): ["10:00", "11:00"]}, holidays="")
    return closed_day


def test_out_of_hours_nobody_can_take_a_conversation_and_the_event_says_when_they_are_back(db):
    created = make_tenant()
    tenant = created.tenant
    agent = UserFactory()
    Membership.objects.create(user=agent, tenant=tenant, role=Membership.Role.AGENT)
    AgentPresence.objects.create(tenant=tenant, user=agent, status="online", seen_at=datetime.now(UTC))
    assert assignment.unreachable(tenant_id=tenant.pk) == {}  # no hours: whoever is online
    day = _closed_now(tenant)
    event = assignment.state_event(state="pending_human", agent=None, tenant_id=tenant.pk)
    assert event["offline"] is True and event["closed"] is True
    back = datetime.fromisoformat(event["back_at"])
    assert back.weekday() == day and (back.hour, back.minute) == (10, 0) and back > datetime.now(UTC)
    # The assistant's hand-over text promises nobody, in the visitor's language.
    assert states.handoff_spec(tenant=tenant, channel="widget", locale="fr")["handover_text"].startswith(
        "Personne de notre équipe n'est disponible")
    services.hours_save(tenant=tenant, actor=Actor(), enabled=False, time_zone="UTC", weekly={}, holidays="")
    assert assignment.unreachable(tenant_id=tenant.pk) == {}
    assert states.handoff_spec(tenant=tenant, channel="widget")["handover_text"] == tenant.handover_text


def test_in_hours_with_no_agent_online_the_form_is_offered_without_back_at(db):
    created = make_tenant()
    assert assignment.unreachable(tenant_id=created.tenant.pk) == {"offline": True}
    text = states.handoff_spec(tenant=created.tenant, channel="widget", locale="de")["handover_text"]
    assert text.startswith("Gerade ist niemand aus unserem Team erreichbar")


def test_the_cpu_tier_asks_the_model_to_answer_in_the_visitors_language():
    spec = RequestSpec(request_id="r", tenant_id=1, api_key_id=None, conversation_id="c", channel="widget",
                       sampling=Sampling(), system_prompt="You are Shop's assistant.",
                       prompt_messages=[{"role": "user", "content": "Bonjour"}], locale="fr")
    system, _ = prompt_parts(spec)
    assert system == "You are Shop's assistant.\n\nThe customer's language is French: always answer in French."
    spec.locale = "xx"
    assert prompt_parts(spec)[0] == "You are Shop's assistant."  # an unknown tag adds nothing


@pytest.fixture
def people(db):
    created = make_tenant(slug="hours-shop")
    other = make_tenant(slug="hours-other")
    made = {}
    for name, role in [("admin", "admin"), ("viewer", "viewer")]:
        u = UserFactory()
        u.set_password(PASSWORD)
        u.save()
        Membership.objects.create(user=u, tenant=created.tenant, role=role)
        made[name] = u
    return created.tenant, other.tenant, made


def _form(**over):
    data = {"enabled": "on", "time_zone": "Europe/Paris", "holidays": "2026-12-25 Christmas"}
    for d in range(7):
        data[f"day{d}_opens"], data[f"day{d}_closes"] = ("09:00", "17:30") if d < 5 else ("", "")
    return {**data, **over}


def test_the_console_page_saves_the_schedule_and_audits_it(client, people):
    tenant, _, made = people
    client.force_login(made["admin"])
    url = f"/console/t/{tenant.slug}/assistant/hours/"
    page = client.get(url)
    assert page.status_code == 200
    assert b'for="id_day0_opens">Monday opens</label>' in page.content and b"Business hours are off" in page.content
    saved = client.post(url, _form())
    assert saved.status_code == 302
    row = selectors.hours_get(tenant=tenant)
    assert row.enabled and row.time_zone == "Europe/Paris"
    assert row.weekly["4"] == ["09:00", "17:30"] and "5" not in row.weekly
    assert row.holidays == [{"date": "2026-12-25", "name": "Christmas"}]
    assert AuditLog.objects.filter(tenant=tenant, entity="business_hours").exists()
    assert b"2026-12-25 Christmas" in client.get(url).content
    # When it opens next, in the tenant's zone as the schedule is written.
    hour = (datetime.now(ZoneInfo("Asia/Tokyo")).hour + 3) % 24  # not now: closed
    services.hours_save(tenant=tenant, actor=Actor(), enabled=True, time_zone="Asia/Tokyo",
                        weekly={str(d): [f"{hour:02d}:00", f"{hour:02d}:01"] for d in range(7)}, holidays="")
    assert f", {hour:02d}:00 (Asia/Tokyo).".encode() in client.get(url).content


@pytest.mark.parametrize("over, message", [
    ({"day1_opens": "18:00"}, b"Tuesday: closing time must be after opening time"),
    ({"day2_closes": ""}, b"Wednesday: give both times"),
    ({"time_zone": "Paris"}, b"is not a time zone"),
    ({"holidays": "25/12/2026"}, b"Line 1: start with a date"),
])
def test_bad_input_is_a_form_error_on_its_field(client, people, over, message):
    tenant, _, made = people
    client.force_login(made["admin"])
    page = client.post(f"/console/t/{tenant.slug}/assistant/hours/", _form(**over))
    assert page.status_code == 400
    assert message in page.content
    assert selectors.hours_get(tenant=tenant).pk is None


def test_a_viewer_reads_the_hours_but_cannot_change_them_and_another_tenant_is_not_found(client, people):
    tenant, other, made = people
    client.force_login(made["viewer"])
    assert client.get(f"/console/t/{tenant.slug}/assistant/hours/").status_code == 200
    assert client.post(f"/console/t/{tenant.slug}/assistant/hours/", _form()).status_code == 403
    assert client.get(f"/console/t/{other.slug}/assistant/hours/").status_code == 404
