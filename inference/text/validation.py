"""Validation of user text, shared by the web tier (cheap checks, immediate errors) and
the CPU tier (the same checks again, then token limits)."""

from __future__ import annotations

import unicodedata

MAX_MESSAGE_CHARS = 16_000


class InvalidInput(ValueError):
    def __init__(self, message: str, *, code: str = "invalid_message", param: str | None = None):
        super().__init__(message)
        self.code, self.param = code, param


def clean_user_text(text: object, *, max_chars: int = MAX_MESSAGE_CHARS) -> str:
    if not isinstance(text, str):
        raise InvalidInput("The message text must be a string.", param="text")
    # Control characters (other than newline and tab) break prompts and logs and are
    # never meaningful in a chat message; lone surrogates cannot be encoded at all.
    cleaned = "".join(
        ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cs")
    ).strip()
    if not cleaned:
        raise InvalidInput("The message is empty.", code="empty_message", param="text")
    if len(cleaned) > max_chars:
        raise InvalidInput(
            f"The message is {len(cleaned)} characters long; the maximum is {max_chars}.",
            code="message_too_long", param="text",
        )
    return cleaned
