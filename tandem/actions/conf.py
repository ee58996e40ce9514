"""The operator's settings for actions (tandem/settings.py reads them from the
environment; docs/actions.md lists them)."""

from __future__ import annotations

from django.conf import settings


def max_rounds() -> int:
    """Tool rounds one visitor message may take before the assistant must answer in text."""
    return int(getattr(settings, "TANDEM_ACTIONS_MAX_ROUNDS", 3))


def max_timeout_s() -> float:
    return float(getattr(settings, "TANDEM_ACTIONS_MAX_TIMEOUT_S", 10.0))


def max_response_bytes() -> int:
    """Read of an endpoint's answer at most (the rest is never read)."""
    return int(getattr(settings, "TANDEM_ACTIONS_MAX_RESPONSE_BYTES", 64 * 1024))


def result_chars() -> int:
    """Of what was read, the model is shown at most this many characters."""
    return int(getattr(settings, "TANDEM_ACTIONS_RESULT_CHARS", 2000))


def rest_wait_s() -> float:
    """How long a REST reply waits for the continuation of a call (an approval included)
    before it ends with a `timeout` error (the answer then arrives in the transcript)."""
    return settings.TANDEM_ACTIONS_REST_WAIT_S
