"""Open now, and back when: the schedule as plain values, checked and computed without
the database (models.BusinessHours holds it as JSON). Times are wall-clock times of the
tenant's zone, so a daylight-saving change moves nothing that people read."""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache

from tandem.chat.validation import InvalidInput

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MAX_HOLIDAYS = 100
LOOKAHEAD_DAYS = 370  # a schedule with no opening in a year has none: "back" is unknown
_TIME = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
_HOLIDAY = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:\s+(.{1,100}))?$")


@dataclass(frozen=True)
class Schedule:
    zone: zoneinfo.ZoneInfo
    days: dict[int, tuple[time, time]]  # weekday (Monday 0) -> (opens, closes); missing: closed
    holidays: frozenset[date]

    def is_open(self, now: datetime) -> bool:
        local = now.astimezone(self.zone)
        span = self.days.get(local.weekday())
        return (span is not None and local.date() not in self.holidays
                and span[0] <= local.time().replace(tzinfo=None) < span[1])

    def next_opening(self, now: datetime) -> datetime | None:
        """When it opens next after `now` (aware, in the tenant's zone); None when never."""
        local = now.astimezone(self.zone)
        for ahead in range(LOOKAHEAD_DAYS):
            day = local.date() + timedelta(days=ahead)
            span = self.days.get(day.weekday())
            if span is None or day in self.holidays:
                continue
            opens = datetime.combine(day, span[0], tzinfo=self.zone)
            if opens > local:
                return opens
        return None


@lru_cache(maxsize=64)
def zone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA zone `name`; InvalidInput (param time_zone) for anything else."""
    if not isinstance(name, str) or name not in _zone_names():
        raise InvalidInput(f"{name!r} is not a time zone: use a name such as Europe/Paris or America/New_York.",
                           param="time_zone", code="invalid_time_zone")
    return zoneinfo.ZoneInfo(name)


@lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def parse_time(value: str, *, param: str) -> time:
    m = _TIME.match(value.strip()) if isinstance(value, str) else None
    if not m:
        raise InvalidInput(f"{value!r} is not a time: use HH:MM, 24-hour (e.g. 09:00).", param=param,
                           code="invalid_time")
    return time(int(m[1]), int(m[2]))


def parse_weekly(weekly: dict) -> dict[int, tuple[time, time]]:
    """{"0": ["09:00", "17:00"], …} as {0: (time, time)}; InvalidInput naming the day."""
    if not isinstance(weekly, dict):
        raise InvalidInput("The weekly schedule must map days to [opens, closes].", param="weekly")
    days = {}
    for key, span in weekly.items():
        if key not in {str(i) for i in range(7)}:
            raise InvalidInput(f"{key!r} is not a day (0 is Monday, 6 Sunday).", param="weekly")
        day = DAYS[int(key)]
        if not (isinstance(span, list | tuple) and len(span) == 2):
            raise InvalidInput(f"{day}: give an opening and a closing time.", param=f"day{key}")
        opens, closes = (parse_time(v, param=f"day{key}") for v in span)
        if closes <= opens:
            raise InvalidInput(f"{day}: closing time must be after opening time (an opening that runs past "
                               "midnight is two days' hours).", param=f"day{key}", code="invalid_hours")
        days[int(key)] = (opens, closes)
    return days


def parse_holidays(lines: str) -> list[dict]:
    """Text, one holiday a line ("2026-12-25 Christmas"), as [{"date", "name"}], sorted;
    InvalidInput naming the line."""
    out: dict[str, dict] = {}
    for n, raw in enumerate((lines or "").splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        m = _HOLIDAY.match(line)
        try:
            day = date.fromisoformat(m[1]) if m else None
        except ValueError:
            day = None
        if day is None:
            raise InvalidInput(f"Line {n}: start with a date as YYYY-MM-DD, then an optional name.",
                               param="holidays", code="invalid_holiday")
        out[day.isoformat()] = {"date": day.isoformat(), "name": (m[2] or "").strip()}
    if len(out) > MAX_HOLIDAYS:
        raise InvalidInput(f"At most {MAX_HOLIDAYS} holidays.", param="holidays", code="too_many_holidays")
    return sorted(out.values(), key=lambda h: h["date"])


def holidays_text(holidays: list[dict]) -> str:
    return "\n".join(f"{h['date']} {h.get('name', '')}".rstrip() for h in holidays or [])


def schedule_of(*, time_zone: str, weekly: dict, holidays: list[dict]) -> Schedule:
    return Schedule(zone=zone(time_zone), days=parse_weekly(weekly),
                    holidays=frozenset(date.fromisoformat(h["date"]) for h in holidays or []))
